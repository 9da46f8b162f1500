//! Installing the pinned toolchain without Nix: each component is a `pip install --target DIR`
//! of exact versions, stamped with the requirement list it was installed from and verified
//! after install (and on every run, cheaply), so a second run does nothing and a changed pin
//! reinstalls just that component. The kernel rustc is a system package: found as kiln-build
//! finds it, and installed with apt-get by version when running as root on Debian.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use kiln_pins::Pins;
use serde::Serialize;

use crate::error::{io, ToolchainError};
use crate::layout::Layout;
use crate::{kernel_rustc, nvcc};

/// What [`install`] is asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Reinstall every component even when its stamp matches.
    pub force: bool,
    /// Print nothing on stderr unless something is installed or fails.
    pub quiet: bool,
    /// Fail when no pinned kernel rustc is found (and cannot be installed); otherwise its absence
    /// is reported as `skipped` (a project without `kernels/rust` does not need it).
    pub require_kernel_rustc: bool,
}

/// One component after [`install`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ComponentStatus {
    /// The component's name, e.g. "cuda" or "libclang".
    pub name: String,
    /// "ok" (already there), "installed", or "skipped".
    pub action: String,
    /// What was verified, e.g. "nvcc 13.0.88"; why, for "skipped".
    pub what: String,
    /// Wall-clock seconds this component took (verify, plus install when it ran).
    pub seconds: f64,
}

/// The result of [`install`]: where, the env file, every component.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    /// The toolchain directory installed into.
    pub root: PathBuf,
    /// The env file to `source`, exporting the toolchain's variables.
    pub env_file: PathBuf,
    /// Every component's outcome, in install order.
    pub components: Vec<ComponentStatus>,
    /// Wall-clock seconds for the whole install.
    pub seconds: f64,
}

type Verify = fn(&Layout, &Pins) -> Result<String, CheckError>;

/// Why a command failed or an installed component is not the pinned one: the message a
/// [`ToolchainError::Install`] carries.
#[derive(Debug, thiserror::Error)]
enum CheckError {
    #[error("cannot start {program:?}: {source}")]
    Start {
        program: std::ffi::OsString,
        source: std::io::Error,
    },
    #[error("{command} failed ({status}):\n{stdout}{stderr}")]
    Command {
        command: String,
        status: std::process::ExitStatus,
        stdout: String,
        stderr: String,
    },
    #[error("unrecognised `nvcc --version` output:\n{0}")]
    NvccOutput(String),
    #[error("nvcc is {found}, the pin is {pin}")]
    Nvcc { found: String, pin: String },
    #[error("{tool} is {found:?}, the pin is {pin}")]
    CudaTool {
        tool: &'static str,
        found: String,
        pin: String,
    },
    #[error("{} is missing", .0.display())]
    Missing(PathBuf),
    #[error("libclang-ng {0} is not the installed version")]
    Libclang(String),
    #[error("`maturin --version` says {said:?}, the pin is {want}")]
    Maturin { said: String, want: String },
    #[error("{name} is missing from {}", site.display())]
    PyTool { name: String, site: PathBuf },
}

/// Each PyPI component's name and exact requirements, from the pins.
pub fn requirements(pins: &Pins) -> Vec<(&'static str, Vec<String>)> {
    let t = &pins.toolchain;
    let mut py_tools = vec![format!("maturin=={}", t.maturin)];
    py_tools.extend(
        pins.test_tools
            .iter()
            .map(|(name, v)| format!("{name}=={v}")),
    );
    vec![
        (
            "cuda",
            vec![format!(
                "cuda-toolkit[nvcc,crt,cccl,cudart,nvvm]=={}",
                t.cuda
            )],
        ),
        (
            "cuda-tools",
            vec![
                format!("nvidia-cuda-cuobjdump=={}", t.cuda_tools),
                format!("nvidia-cuda-nvdisasm=={}", t.cuda_tools),
            ],
        ),
        ("libclang", vec![format!("libclang-ng=={}", t.libclang_ng)]),
        ("py", py_tools),
    ]
}

fn component_dir(layout: &Layout, name: &str) -> (PathBuf, Verify) {
    match name {
        "cuda" => (layout.cuda_site(), verify_nvcc),
        "cuda-tools" => (layout.cuda_tools_site(), verify_cuda_tools),
        "libclang" => (layout.libclang_site(), verify_libclang),
        _ => (layout.py_site(), verify_py_tools),
    }
}

/// Installs what is missing or stale into `layout` and writes its env file.
pub fn install(layout: &Layout, pins: &Pins, opts: &Options) -> Result<Installed, ToolchainError> {
    let started = Instant::now();
    std::fs::create_dir_all(&layout.root)
        .map_err(io(format!("creating {}", layout.root.display())))?;
    let mut components = Vec::new();
    for (name, reqs) in requirements(pins) {
        let status = install_component(layout, pins, name, &reqs, opts)?;
        components.push(status);
    }
    components.push(ensure_kernel_rustc(pins, opts)?);
    std::fs::write(layout.env_file(), layout.env_script())
        .map_err(io(format!("writing {}", layout.env_file().display())))?;
    let seconds = started.elapsed().as_secs_f64();
    if !opts.quiet {
        eprintln!(
            "toolchain ready in {seconds:.1} s; for a shell: source {}",
            layout.env_file().display()
        );
    }
    Ok(Installed {
        root: layout.root.clone(),
        env_file: layout.env_file(),
        components,
        seconds,
    })
}

fn install_component(
    layout: &Layout,
    pins: &Pins,
    name: &str,
    reqs: &[String],
    opts: &Options,
) -> Result<ComponentStatus, ToolchainError> {
    let (dir, verify) = component_dir(layout, name);
    let stamp = layout.root.join(format!("{name}.stamp"));
    let wanted = reqs.join("\n");
    let current = std::fs::read_to_string(&stamp).unwrap_or_default();
    let status = |action: &str, what: String, t: Instant| ComponentStatus {
        name: name.into(),
        action: action.into(),
        what,
        seconds: t.elapsed().as_secs_f64(),
    };
    let t = Instant::now();
    if !opts.force && current == wanted && dir.exists() {
        if let Ok(what) = verify(layout, pins) {
            if !opts.quiet {
                eprintln!("  ok       {name:<11} {what}");
            }
            return Ok(status("ok", what, t));
        }
    }
    eprintln!("  install  {name:<11} {}", reqs.join(" "));
    let failed = |message: String| ToolchainError::Install {
        component: name.into(),
        message,
    };
    let _ = std::fs::remove_file(&stamp);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io(format!("removing {}", dir.display())))?;
    }
    let mut pip = Command::new(python());
    pip.args(["-m", "pip", "install", "--quiet"])
        .args(["--disable-pip-version-check", "--no-compile"])
        .arg("--target")
        .arg(&dir)
        .args(reqs);
    run_checked(&mut pip).map_err(|e| failed(e.to_string()))?;
    let what = verify(layout, pins)
        .map_err(|e| failed(format!("installed but failed verification: {e}")))?;
    std::fs::write(&stamp, &wanted).map_err(io(format!("writing {}", stamp.display())))?;
    eprintln!(
        "  ok       {name:<11} {what} ({:.1} s)",
        t.elapsed().as_secs_f64()
    );
    Ok(status("installed", what, t))
}

/// The kernel rustc (kernels/rust for nvptx64): found and verified against the pin the way
/// kiln-build finds it; on Debian as root, Debian's packages are installed when it is missing.
/// It is a system package, not a PyPI wheel, so it is not under the layout's root.
fn ensure_kernel_rustc(pins: &Pins, opts: &Options) -> Result<ComponentStatus, ToolchainError> {
    const NAME: &str = "rust-kernel";
    let t = Instant::now();
    let env = |k: &str| std::env::var_os(k);
    let status = |action: &str, what: String| ComponentStatus {
        name: NAME.into(),
        action: action.into(),
        what,
        seconds: t.elapsed().as_secs_f64(),
    };
    let found = match kernel_rustc::locate(&env, pins) {
        Ok(r) => Ok(status("ok", describe(&r))),
        Err(e) if !opts.require_kernel_rustc => Ok(status(
            "skipped",
            format!("not needed without kernels/rust ({e})"),
        )),
        Err(e) if !can_apt_install() => Err(e),
        Err(_) => apt_install_kernel_rustc(pins).map(|r| status("installed", describe(&r))),
    }?;
    if !opts.quiet || found.action == "installed" {
        eprintln!("  {:<8} {NAME:<11} {}", found.action, found.what);
    }
    Ok(found)
}

fn describe(r: &kernel_rustc::KernelRustc) -> String {
    let release = r
        .version_verbose
        .lines()
        .find_map(|l| l.strip_prefix("release: "))
        .unwrap_or("?");
    format!(
        "rustc {release} ({}, rust-src, RUSTC_BOOTSTRAP=1)",
        r.rustc.display()
    )
}

/// By version: Debian 12 carries two rustc-web releases (bookworm 1.85, bookworm-security 1.96)
/// and a plain install takes the newest, which is not the pin. When the pin has left the
/// archive, the tested fallback (`kernel-rustc-fallback`), as .ci/run does.
fn apt_install_kernel_rustc(pins: &Pins) -> Result<kernel_rustc::KernelRustc, ToolchainError> {
    let mut releases = vec![pins.toolchain.kernel_rustc.clone()];
    releases.extend(pins.toolchain.kernel_rustc_fallback.clone());
    let mut last = String::new();
    for release in &releases {
        let packages: Vec<String> = DEBIAN_KERNEL_RUSTC_PACKAGES
            .iter()
            .map(|p| format!("{p}={release}*"))
            .collect();
        eprintln!(
            "  install  {:<11} apt-get install --allow-downgrades {}",
            "rust-kernel",
            packages.join(" ")
        );
        match run_checked(
            Command::new("apt-get")
                .args(["install", "-y", "-qq", "--allow-downgrades"])
                .args(&packages),
        ) {
            Ok(_) => return kernel_rustc::locate(&|k: &str| std::env::var_os(k), pins),
            Err(e) => last = e.to_string(),
        }
    }
    Err(ToolchainError::Install {
        component: "rust-kernel".into(),
        message: format!(
            "apt-get (run `apt-get update` first if the version is not found): {last}"
        ),
    })
}

/// Debian's packages of the kernel rustc: the compiler, its std for the host (rustc-web needs
/// the same version), the library sources `-Zbuild-std` compiles, and cargo.
pub const DEBIAN_KERNEL_RUSTC_PACKAGES: [&str; 4] = [
    "rustc-web",
    "libstd-rust-web-dev",
    "rust-web-src",
    "cargo-web",
];

/// Root on a Debian-like system: bootstrap may install the kernel rustc's packages itself.
fn can_apt_install() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Path::new("/usr/bin/apt-get").exists()
}

fn python() -> String {
    std::env::var("KILN_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs a command to completion; on failure the error carries its output.
fn run_checked(cmd: &mut Command) -> Result<std::process::Output, CheckError> {
    let out = cmd.output().map_err(|source| CheckError::Start {
        program: cmd.get_program().to_os_string(),
        source,
    })?;
    if !out.status.success() {
        return Err(CheckError::Command {
            command: format!("{cmd:?}"),
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(out)
}

fn tool_version(layout: &Layout, program: PathBuf) -> Result<String, CheckError> {
    let mut cmd = Command::new(&program);
    cmd.arg("--version");
    layout.apply(&mut cmd);
    let out = run_checked(&mut cmd)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn verify_nvcc(layout: &Layout, pins: &Pins) -> Result<String, CheckError> {
    let text = tool_version(layout, layout.cuda_home().join("bin/nvcc"))?;
    let found =
        nvcc::parse_nvcc_version(&text).ok_or_else(|| CheckError::NvccOutput(text.clone()))?;
    if found != pins.toolchain.nvcc {
        return Err(CheckError::Nvcc {
            found,
            pin: pins.toolchain.nvcc.clone(),
        });
    }
    Ok(format!("nvcc {found}"))
}

fn verify_cuda_tools(layout: &Layout, pins: &Pins) -> Result<String, CheckError> {
    for tool in ["cuobjdump", "nvdisasm"] {
        let text = tool_version(layout, layout.cuda_tools_bin().join(tool))?;
        let found = nvcc::parse_nvcc_version(&text).unwrap_or_default();
        if found != pins.toolchain.cuda_tools {
            return Err(CheckError::CudaTool {
                tool,
                found,
                pin: pins.toolchain.cuda_tools.clone(),
            });
        }
    }
    Ok(format!("cuobjdump/nvdisasm {}", pins.toolchain.cuda_tools))
}

fn verify_libclang(layout: &Layout, pins: &Pins) -> Result<String, CheckError> {
    let lib = layout.libclang_dir().join("libclang.so");
    let resource = layout.libclang_dir().join("resource/include/stddef.h");
    for p in [lib, resource] {
        if !p.exists() {
            return Err(CheckError::Missing(p));
        }
    }
    let dist = layout.libclang_site().join(format!(
        "libclang_ng-{}.dist-info",
        pins.toolchain.libclang_ng
    ));
    if !dist.exists() {
        return Err(CheckError::Libclang(pins.toolchain.libclang_ng.clone()));
    }
    Ok(format!("libclang {}", pins.toolchain.libclang_ng))
}

fn verify_py_tools(layout: &Layout, pins: &Pins) -> Result<String, CheckError> {
    let text = tool_version(layout, layout.py_site().join("bin/maturin"))?;
    let want = format!("maturin {}", pins.toolchain.maturin);
    if text.trim() != want {
        return Err(CheckError::Maturin {
            said: text.trim().to_string(),
            want,
        });
    }
    for name in pins.test_tools.keys() {
        if !layout.py_site().join("bin").join(name).exists() && !py_dist_exists(layout, name) {
            return Err(CheckError::PyTool {
                name: name.clone(),
                site: layout.py_site(),
            });
        }
    }
    Ok(want)
}

fn py_dist_exists(layout: &Layout, name: &str) -> bool {
    let prefix = format!("{}-", name.replace('-', "_"));
    std::fs::read_dir(layout.py_site())
        .map(|rd| {
            rd.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().to_lowercase();
                n.starts_with(&prefix) && n.ends_with(".dist-info")
            })
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_component_is_an_exact_pin() {
        let pins = Pins::built_in();
        let reqs = requirements(&pins);
        let names: Vec<&str> = reqs.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["cuda", "cuda-tools", "libclang", "py"]);
        for (_, rs) in &reqs {
            assert!(rs.iter().all(|r| r.contains("==")), "{rs:?}");
        }
        assert!(reqs[0].1[0].ends_with(&format!("=={}", pins.toolchain.cuda)));
    }
}
