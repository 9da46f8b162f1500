//! `cargo xtask bootstrap`: the pinned toolchain without Nix, from PyPI, into `.toolchain/`.
//!
//! Each component is a `pip install --target DIR` of exact versions, stamped with the
//! requirement list it was installed from and verified after install (and on every run, cheaply),
//! so a second run does nothing and a changed pin reinstalls just that component.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use kiln_pins::Pins;

use crate::toolchain::{pins, run_checked, Layout};

#[derive(clap::Args, Default)]
pub struct Args {
    /// Reinstall every component even when its stamp matches.
    #[arg(long)]
    pub force: bool,
    /// Print nothing unless something is installed or fails.
    #[arg(long)]
    pub quiet: bool,
}

struct Component {
    name: &'static str,
    dir: PathBuf,
    requirements: Vec<String>,
    verify: fn(&Layout, &Pins) -> Result<String>,
}

fn components(layout: &Layout, pins: &Pins) -> Vec<Component> {
    let t = &pins.toolchain;
    let mut py_tools = vec![format!("maturin=={}", t.maturin)];
    py_tools.extend(
        pins.test_tools
            .iter()
            .map(|(name, v)| format!("{name}=={v}")),
    );
    vec![
        Component {
            name: "cuda",
            dir: layout.cuda_site(),
            requirements: vec![format!(
                "cuda-toolkit[nvcc,crt,cccl,cudart,nvvm]=={}",
                t.cuda
            )],
            verify: verify_nvcc,
        },
        Component {
            name: "cuda-tools",
            dir: layout.cuda_tools_site(),
            requirements: vec![
                format!("nvidia-cuda-cuobjdump=={}", t.cuda_tools),
                format!("nvidia-cuda-nvdisasm=={}", t.cuda_tools),
            ],
            verify: verify_cuda_tools,
        },
        Component {
            name: "libclang",
            dir: layout.libclang_site(),
            requirements: vec![format!("libclang-ng=={}", t.libclang_ng)],
            verify: verify_libclang,
        },
        Component {
            name: "py",
            dir: layout.py_site(),
            requirements: py_tools,
            verify: verify_py_tools,
        },
    ]
}

/// Installs what is missing or stale and writes `.toolchain/env`. Returns the layout.
pub fn run(args: Args) -> Result<Layout> {
    let started = Instant::now();
    let layout = Layout::new();
    let pins = pins()?;
    std::fs::create_dir_all(&layout.root)?;
    for c in components(&layout, &pins) {
        let stamp = layout.root.join(format!("{}.stamp", c.name));
        let wanted = c.requirements.join("\n");
        let current = std::fs::read_to_string(&stamp).unwrap_or_default();
        if !args.force && current == wanted && c.dir.exists() {
            if let Ok(what) = (c.verify)(&layout, &pins) {
                if !args.quiet {
                    eprintln!("  ok       {:<11} {what}", c.name);
                }
                continue;
            }
        }
        eprintln!("  install  {:<11} {}", c.name, c.requirements.join(" "));
        let t = Instant::now();
        let _ = std::fs::remove_file(&stamp);
        if c.dir.exists() {
            std::fs::remove_dir_all(&c.dir)
                .with_context(|| format!("removing {}", c.dir.display()))?;
        }
        let mut pip = Command::new(python());
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
        ])
        .arg("--target")
        .arg(&c.dir)
        .args(&c.requirements);
        run_checked(&mut pip).with_context(|| format!("installing {}", c.name))?;
        let what = (c.verify)(&layout, &pins)
            .with_context(|| format!("{} installed but failed verification", c.name))?;
        std::fs::write(&stamp, &wanted)?;
        eprintln!(
            "  ok       {:<11} {what} ({:.1} s)",
            c.name,
            t.elapsed().as_secs_f64()
        );
    }
    let rustc = kernel_rustc(&pins)?;
    if !args.quiet {
        eprintln!("  ok       {:<11} {rustc}", "rust-kernel");
    }
    std::fs::write(layout.env_file(), layout.env_script())?;
    if !args.quiet {
        eprintln!(
            "toolchain ready in {:.1} s; for a shell: source {}",
            started.elapsed().as_secs_f64(),
            layout.env_file().display()
        );
    }
    Ok(layout)
}

/// The kernel rustc (kernels/rust for nvptx64): found and verified against the pin the way
/// kiln-build finds it; on Debian as root, Debian's packages are installed when it is missing.
/// It is a system package, not a PyPI wheel, so it is not under `.toolchain/`.
fn kernel_rustc(pins: &Pins) -> Result<String> {
    let env = |k: &str| std::env::var_os(k);
    let describe = |r: &kiln_build::rust::KernelRustc| {
        let release = r
            .version_verbose
            .lines()
            .find_map(|l| l.strip_prefix("release: "))
            .unwrap_or("?")
            .to_string();
        format!(
            "rustc {release} ({}, rust-src, RUSTC_BOOTSTRAP=1)",
            r.rustc.display()
        )
    };
    match kiln_build::rust::locate(&env, pins) {
        Ok(r) => return Ok(describe(&r)),
        Err(e) if !can_apt_install() => bail!("{e}"),
        Err(_) => {}
    }
    // By version: Debian 12 carries two rustc-web releases (bookworm 1.85, bookworm-security
    // 1.96) and a plain install takes the newest, which is not the pin. When the pin has left
    // the archive, the tested fallback (`kernel-rustc-fallback`), as .ci/run does.
    let mut releases = vec![pins.toolchain.kernel_rustc.clone()];
    releases.extend(pins.toolchain.kernel_rustc_fallback.clone());
    let mut result = Ok(());
    for release in &releases {
        let packages: Vec<String> = debian_kernel_rustc_packages()
            .iter()
            .map(|p| format!("{p}={release}*"))
            .collect();
        eprintln!(
            "  install  {:<11} apt-get install --allow-downgrades {}",
            "rust-kernel",
            packages.join(" ")
        );
        result = run_checked(
            Command::new("apt-get")
                .args(["install", "-y", "-qq", "--allow-downgrades"])
                .args(&packages),
        )
        .map(drop);
        if result.is_ok() {
            break;
        }
    }
    result.context("installing the kernel rustc with apt-get (run `apt-get update` first if the version is not found)")?;
    let r = kiln_build::rust::locate(&env, pins).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(describe(&r))
}

/// Debian's packages of the kernel rustc: the compiler, its std for the host (rustc-web needs
/// the same version), the library sources `-Zbuild-std` compiles, and cargo.
fn debian_kernel_rustc_packages() -> [&'static str; 4] {
    [
        "rustc-web",
        "libstd-rust-web-dev",
        "rust-web-src",
        "cargo-web",
    ]
}

/// Root on a Debian-like system: bootstrap may install the kernel rustc's packages itself.
fn can_apt_install() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && std::path::Path::new("/usr/bin/apt-get").exists()
}

/// Bootstrap quietly: what every toolchain-using xtask command calls first.
pub fn ensure() -> Result<Layout> {
    run(Args {
        force: false,
        quiet: true,
    })
}

/// Bootstrap, then put the toolchain into this process's environment: for commands that call
/// kiln-build in-process (it locates nvcc and libclang from the environment).
pub fn ensure_in_process() -> Result<Layout> {
    let layout = ensure()?;
    for (k, v) in layout.vars() {
        std::env::set_var(k, v);
    }
    Ok(layout)
}

fn python() -> String {
    std::env::var("KILN_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn tool_version(layout: &Layout, program: PathBuf) -> Result<String> {
    let mut cmd = Command::new(&program);
    cmd.arg("--version");
    layout.apply(&mut cmd);
    let out = run_checked(&mut cmd)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn verify_nvcc(layout: &Layout, pins: &Pins) -> Result<String> {
    let text = tool_version(layout, layout.cuda_home().join("bin/nvcc"))?;
    let found = kiln_build::toolkit::parse_nvcc_version(&text)
        .with_context(|| format!("unrecognised `nvcc --version` output:\n{text}"))?;
    if found != pins.toolchain.nvcc {
        bail!("nvcc is {found}, the pin is {}", pins.toolchain.nvcc);
    }
    Ok(format!("nvcc {found}"))
}

fn verify_cuda_tools(layout: &Layout, pins: &Pins) -> Result<String> {
    for tool in ["cuobjdump", "nvdisasm"] {
        let text = tool_version(layout, layout.cuda_tools_bin().join(tool))?;
        let found = kiln_build::toolkit::parse_nvcc_version(&text).unwrap_or_default();
        if found != pins.toolchain.cuda_tools {
            bail!(
                "{tool} is {found:?}, the pin is {}",
                pins.toolchain.cuda_tools
            );
        }
    }
    Ok(format!("cuobjdump/nvdisasm {}", pins.toolchain.cuda_tools))
}

fn verify_libclang(layout: &Layout, pins: &Pins) -> Result<String> {
    let lib = layout.libclang_dir().join("libclang.so");
    let resource = layout.libclang_dir().join("resource/include/stddef.h");
    for p in [&lib, &resource] {
        if !p.exists() {
            bail!("{} is missing", p.display());
        }
    }
    let dist = layout.libclang_site().join(format!(
        "libclang_ng-{}.dist-info",
        pins.toolchain.libclang_ng
    ));
    if !dist.exists() {
        bail!(
            "libclang-ng {} is not the installed version",
            pins.toolchain.libclang_ng
        );
    }
    Ok(format!("libclang {}", pins.toolchain.libclang_ng))
}

fn verify_py_tools(layout: &Layout, pins: &Pins) -> Result<String> {
    let text = tool_version(layout, layout.py_site().join("bin/maturin"))?;
    let want = format!("maturin {}", pins.toolchain.maturin);
    if text.trim() != want {
        bail!(
            "`maturin --version` says {:?}, the pin is {want}",
            text.trim()
        );
    }
    for name in pins.test_tools.keys() {
        if !layout.py_site().join("bin").join(name).exists() && !py_dist_exists(layout, name) {
            bail!("{name} is missing from {}", layout.py_site().display());
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
