//! The second source kind: a Rust kernel crate (`kernels/rust`, `#![no_std]`, for
//! `nvptx64-nvidia-cuda`) → one PTX → `ptxas -c` per SASS target, joined by the same `nvlink`
//! as the CUDA C++ objects, and appended to the linked PTX of a `+PTX` target.
//!
//! One PTX at `sm_80` (measured choice): the kernel rustc's LLVM (19 in Debian's rustc-web
//! 1.85) emits the same PTX for every `-C target-cpu` from sm_80 to sm_90 and does not know
//! sm_100/sm_120 at all ("not a recognized processor"), so per-target PTX would buy nothing;
//! ptxas does the per-target work, as it does for nvcc.
//!
//! The device crate's parameter structs are checked against the host's at compile time: the
//! layouts of `kiln_kernel_params::ALL` as this (host) build sees them become assertions the
//! crate includes (`KILN_HOST_LAYOUT`), each naming its struct and field.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::Target;

use crate::cache::{Cache, KeyBuilder};
use crate::error::{io, BuildError};
use crate::toolkit::Toolkit;

/// The target the kernel crate is compiled for.
pub use kiln_toolchain::kernel_rustc::DEVICE_TARGET;
pub use kiln_toolchain::kernel_rustc::{install_hint, locate, matches_pin, DeviceStd, KernelRustc};
/// The one `-C target-cpu` the PTX is generated for (the oldest GPU of any kiln matrix).
pub const PTX_CPU: &str = "sm_80";
/// The crate, relative to the kernels directory.
pub const CRATE_DIR: &str = "rust";

/// The Rust kernel crate of a kernels directory, if it has one, and every file its PTX
/// depends on (its own, and those of its path dependencies), sorted.
#[derive(Debug, Clone)]
pub struct RustCrate {
    /// The crate's directory, `kernels/rust`.
    pub dir: PathBuf,
    /// Every file its PTX depends on (sources, manifests, the lockfile), keyed by content.
    pub files: Vec<PathBuf>,
}

impl RustCrate {
    /// The crate in `kernels_dir`, if it has a `rust/Cargo.toml`, with its input files.
    pub fn discover(kernels_dir: &Path) -> Result<Option<RustCrate>, BuildError> {
        let dir = kernels_dir.join(CRATE_DIR);
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            return Ok(None);
        }
        let mut files = Vec::new();
        collect_files(&dir, &mut files)?;
        let text = std::fs::read_to_string(&manifest)
            .map_err(io(format!("reading {}", manifest.display())))?;
        let doc: toml::Table = toml::from_str(&text).map_err(|e| BuildError::BadOutput {
            source_file: manifest.clone(),
            output: "Cargo.toml".into(),
            message: e.to_string(),
        })?;
        let deps = doc.get("dependencies").and_then(|d| d.as_table());
        for dep in deps.into_iter().flat_map(|t| t.values()) {
            if let Some(path) = dep.get("path").and_then(|p| p.as_str()) {
                collect_files(&dir.join(path), &mut files)?;
            }
        }
        files.sort();
        files.dedup();
        Ok(Some(RustCrate { dir, files }))
    }
}

/// Every file under `dir` except build outputs (`target/`) and hidden entries.
fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BuildError> {
    let rd = std::fs::read_dir(dir).map_err(io(format!("reading {}", dir.display())))?;
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            collect_files(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

/// The host's parameter-struct layouts as assertions on the device crate's structs
/// (`crate::params::<Name>`). Each failure names the struct and the field.
pub fn host_layout_assertions(layouts: &[kiln_kernel_params::Layout]) -> String {
    let mut s = String::from(
        "// Written by kiln-build from kiln_kernel_params::ALL as compiled for the host: the\n\
         // device crate's parameter structs must have the same layout, field by field.\n",
    );
    for l in layouts {
        let _ = writeln!(
            s,
            "const _: () = {{\n    type T = crate::params::{};",
            l.name
        );
        for f in l.fields {
            let _ = writeln!(
                s,
                "    assert!(core::mem::offset_of!(T, {f}) == {off}, \"kiln: parameter struct {n}, field `{f}`: the host puts it at byte offset {off}; the device struct differs\");",
                f = f.name,
                off = f.offset,
                n = l.name
            );
            let _ = writeln!(
                s,
                "    assert!(kiln_kernel_params::field_size(unsafe {{ core::ptr::addr_of!((*core::mem::MaybeUninit::<T>::uninit().as_ptr()).{f}) }}) == {size}, \"kiln: parameter struct {n}, field `{f}`: the host's is {size} bytes; the device field differs\");",
                f = f.name,
                size = f.size,
                n = l.name
            );
        }
        let _ = writeln!(
            s,
            "    assert!(core::mem::size_of::<T>() == {size} && core::mem::align_of::<T>() == {align}, \"kiln: parameter struct {n}: the host's is {size} bytes, aligned to {align}; the device struct differs (a field the host does not have?)\");\n}};",
            size = l.size,
            align = l.align,
            n = l.name
        );
    }
    s
}

/// The lockfile is an input of the PTX: a crate without one gets it now, before hashing, so
/// that the build itself never changes the inputs (a no-op rebuild must compile nothing).
fn ensure_lockfile(krate: &mut RustCrate, rustc: &KernelRustc) -> Result<(), BuildError> {
    let lock = krate.dir.join("Cargo.lock");
    if lock.is_file() {
        return Ok(());
    }
    let mut cmd = Command::new(&rustc.cargo);
    cmd.env("RUSTC", &rustc.rustc)
        .arg("generate-lockfile")
        .arg("--manifest-path")
        .arg(krate.dir.join("Cargo.toml"));
    run_tool(&mut cmd, "cargo generate-lockfile (Rust kernels)")?;
    krate.files.push(lock);
    krate.files.sort();
    Ok(())
}

/// Compiles the crate to PTX (cached by every input file, the layouts, the rustc and flags).
#[derive(Debug, Clone)]
pub struct RustPtxJob {
    /// The crate being compiled.
    pub krate: RustCrate,
    /// The host's parameter-struct layouts as Rust assertions, compiled into the crate.
    pub layout: String,
    /// Its cache key: rustc, target, CPU, layouts and every input file.
    pub key: String,
}

impl RustPtxJob {
    /// Keys the crate's PTX compile (creating its lockfile first if missing).
    pub fn new(
        mut krate: RustCrate,
        rustc: &KernelRustc,
        kernels_dir: &Path,
    ) -> Result<RustPtxJob, BuildError> {
        ensure_lockfile(&mut krate, rustc)?;
        let layout = host_layout_assertions(kiln_kernel_params::ALL);
        let mut key = KeyBuilder::new("rust-ptx")
            .field("rustc", &rustc.version_verbose)
            .field("std", rustc.std.as_str())
            .field("target", DEVICE_TARGET)
            .field("cpu", PTX_CPU)
            .field("layout", &layout);
        let root = kernels_dir.parent().unwrap_or(kernels_dir);
        for f in &krate.files {
            let rel = f.strip_prefix(root).unwrap_or(f);
            key = key.file(&format!("file:{}", rel.display()), f)?;
        }
        Ok(RustPtxJob {
            krate,
            layout,
            key: key.finish(),
        })
    }

    /// Where the host-layout assertions are written for the crate to include.
    pub fn layout_file(&self, cache: &Cache) -> PathBuf {
        cache.path(&self.key, "layout.rs")
    }

    /// Writes the host-layout file (an input of the command; planning writes it too).
    pub fn write_layout(&self, cache: &Cache) -> Result<(), BuildError> {
        std::fs::write(self.layout_file(cache), &self.layout)
            .map_err(io("writing the host layout check"))
    }

    /// The `cargo rustc` command writing the PTX to `output`.
    pub fn command(&self, rustc: &KernelRustc, cache: &Cache, output: &Path) -> Command {
        let mut cmd = Command::new(&rustc.cargo);
        // The outer cargo's variables (a build script's CARGO_*, RUSTFLAGS, wrappers) belong to
        // the host build, not to this one. Kept: where cargo's sources are (CARGO_HOME: in the
        // Nix sandbox its config.toml replaces crates.io by crane's vendor directory, which
        // `-Zbuild-std` resolves the standard library's dependencies from) and whether the
        // network may be used (CARGO_NET_OFFLINE). checks/plan/run_plan.py drops the same.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if (k.starts_with("CARGO_") && k != "CARGO_HOME" && k != "CARGO_NET_OFFLINE")
                || k.starts_with("RUSTC")
                || k == "RUSTFLAGS"
                || k == "RUSTDOCFLAGS"
                || k == "TARGET"
                || k == "HOST"
                || k == "OUT_DIR"
            {
                cmd.env_remove(&*k);
            }
        }
        cmd.env("RUSTC", &rustc.rustc)
            .env("RUSTC_BOOTSTRAP", "1") // -Zbuild-std and the kernel features on a release rustc
            .env("KILN_HOST_LAYOUT", self.layout_file(cache))
            .arg("rustc")
            .arg("--manifest-path")
            .arg(self.krate.dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(cache.dir.join("rust-target"))
            .args(["--release", "--lib", "--target", DEVICE_TARGET]);
        // A toolchain with the target's prebuilt `core` (the Nix nightly) builds against it: no
        // standard library is compiled, so none of its crates.io dependencies is needed.
        if rustc.std == DeviceStd::BuildStd {
            cmd.arg("-Zbuild-std=core");
        }
        cmd.args(["--quiet", "--"])
            .arg(format!("-Ctarget-cpu={PTX_CPU}"))
            // The output path is in the arguments, so cargo reruns rustc whenever the key
            // changes even if its own fingerprint thinks the crate is fresh.
            .arg(format!("--emit=asm={}", output.display()));
        cmd
    }

    /// Compiles the crate to PTX at `staging` (under the jobserver) and checks it.
    pub fn produce(
        &self,
        rustc: &KernelRustc,
        cache: &Cache,
        client: &jobserver::Client,
        staging: &Path,
    ) -> Result<(), BuildError> {
        self.write_layout(cache)?;
        let mut cmd = self.command(rustc, cache, staging);
        client.configure(&mut cmd);
        let command = format!("{cmd:?}");
        let out = cmd.output().map_err(|e| BuildError::Tool {
            tool: rustc.cargo.display().to_string(),
            message: e.to_string(),
        })?;
        if !out.status.success() || !staging.is_file() {
            return Err(BuildError::Compile {
                source_file: self.krate.dir.clone(),
                target: format!("{DEVICE_TARGET} ({PTX_CPU})"),
                diagnostics: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
                command,
            });
        }
        check_ptx(staging, &self.krate.dir)
    }
}

/// The PTX must be self-contained: a call into `core` that was not inlined stays an
/// `.extern .func`, which nothing would resolve at link time.
fn check_ptx(ptx: &Path, crate_dir: &Path) -> Result<(), BuildError> {
    let text = std::fs::read_to_string(ptx).map_err(io(format!("reading {}", ptx.display())))?;
    let bad = |message: String| BuildError::BadOutput {
        source_file: crate_dir.to_path_buf(),
        output: "PTX".into(),
        message,
    };
    let externs: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(".extern .func"))
        .collect();
    if !externs.is_empty() {
        return Err(bad(format!(
            "calls functions it does not define (a `core` function that was not inlined?): {}",
            externs.join("; ")
        )));
    }
    let info = kiln_fatbin::ptx::parse(&text).map_err(|e| bad(e.to_string()))?;
    if info.kernels.is_empty() {
        return Err(bad("no `extern \"ptx-kernel\"` entry points".into()));
    }
    Ok(())
}

/// The kernel names a Rust PTX defines.
pub fn kernels(ptx: &Path) -> Result<Vec<String>, BuildError> {
    let text = std::fs::read_to_string(ptx).map_err(io(format!("reading {}", ptx.display())))?;
    kiln_fatbin::ptx::parse(&text)
        .map(|i| i.kernels)
        .map_err(|e| BuildError::BadOutput {
            source_file: ptx.to_path_buf(),
            output: "PTX".into(),
            message: e.to_string(),
        })
}

pub(crate) fn ptxas(toolkit: &Toolkit) -> PathBuf {
    toolkit.nvcc.with_file_name("ptxas")
}

/// The Rust PTX as a relocatable object for one SASS target (`ptxas -c`), linked by nvlink
/// with the C++ objects of that target. Keyed by the PTX job's key (known before it runs).
#[derive(Debug, Clone)]
pub struct PtxasJob {
    /// The SASS target it assembles for.
    pub target: Target,
    /// The Rust PTX in the cache (the PTX job's output).
    pub ptx: PathBuf,
    /// Its cache key: nvcc version, target and the PTX job's key.
    pub key: String,
}

impl PtxasJob {
    /// Keys the assembly of `ptx`'s output for `target`.
    pub fn new(target: Target, ptx: &RustPtxJob, cache: &Cache, toolkit: &Toolkit) -> PtxasJob {
        let key = KeyBuilder::new("ptxas")
            .field("nvcc", &toolkit.version)
            .field("target", &target.name())
            .field("ptx", &ptx.key)
            .finish();
        PtxasJob {
            target,
            ptx: cache.path(&ptx.key, RUST_PTX_EXT),
            key,
        }
    }

    /// The `ptxas -c` command writing the object to `output`.
    pub fn command(&self, toolkit: &Toolkit, output: &Path) -> Command {
        let mut cmd = Command::new(ptxas(toolkit));
        cmd.arg(format!("-arch={}", self.target.arch.sm()))
            .args(["-c", "-O3", "-o"])
            .arg(output)
            .arg(&self.ptx);
        cmd
    }

    /// Runs ptxas, writing `staging`.
    pub fn produce(&self, toolkit: &Toolkit, staging: &Path) -> Result<(), BuildError> {
        run_tool(
            &mut self.command(toolkit, staging),
            &format!("ptxas (Rust kernels) for {}", self.target),
        )
    }
}

/// The extension of the Rust PTX in the cache.
pub const RUST_PTX_EXT: &str = "rs.ptx";

/// A `+PTX` target: the C++ kernels' linked PTX with the Rust PTX's functions appended (one
/// PTX module holding every kernel), proven by compiling it with ptxas for that target.
/// Keyed by the link job's and the PTX job's keys.
#[derive(Debug, Clone)]
pub struct MergeJob {
    /// The `+PTX` target whose module this is.
    pub target: Target,
    /// The linked C++ PTX, then the Rust PTX.
    pub inputs: [PathBuf; 2],
    /// Its cache key: nvcc version, target, and the link and PTX jobs' keys.
    pub key: String,
}

impl MergeJob {
    /// Keys the merge of `link`'s PTX with `ptx`'s.
    pub fn new(
        link: &crate::jobs::LinkJob,
        ptx: &RustPtxJob,
        cache: &Cache,
        toolkit: &Toolkit,
    ) -> MergeJob {
        let key = KeyBuilder::new("ptx-merge")
            .field("nvcc", &toolkit.version)
            .field("target", &link.target.name())
            .field("linked", &link.key)
            .field("rust", &ptx.key)
            .finish();
        MergeJob {
            target: link.target,
            inputs: [
                cache.path(&link.key, link.ext()),
                cache.path(&ptx.key, RUST_PTX_EXT),
            ],
            key,
        }
    }

    /// The ptxas check of the merged PTX at `merged` (its object is thrown away).
    pub fn check_command(&self, toolkit: &Toolkit, cache: &Cache, merged: &Path) -> Command {
        let mut cmd = Command::new(ptxas(toolkit));
        cmd.arg(format!("-arch={}", self.target.arch.sm()))
            .arg("-o")
            .arg(cache.path(&self.key, "check.o"))
            .arg(merged);
        cmd
    }

    /// Writes the merged PTX to `staging`, then checks it with ptxas.
    pub fn produce(
        &self,
        toolkit: &Toolkit,
        cache: &Cache,
        staging: &Path,
    ) -> Result<(), BuildError> {
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(io(format!("reading {}", p.display())));
        let merged = merge_ptx_text(&read(&self.inputs[0])?, &read(&self.inputs[1])?);
        std::fs::write(staging, merged).map_err(io("writing the merged PTX"))?;
        let r = run_tool(
            &mut self.check_command(toolkit, cache, staging),
            &format!("ptxas check of the merged PTX for {}", self.target),
        );
        let _ = std::fs::remove_file(cache.path(&self.key, "check.o"));
        r
    }
}

/// The merge itself (checks/plan/run_plan.py does the same): the C++ PTX, then the Rust PTX
/// without its module header. The header (.version/.target/.address_size) is the C++ one: its
/// ISA and target are at least the Rust PTX's (7.0, sm_80), whose instructions stay valid.
pub fn merge_ptx_text(cxx: &str, rust: &str) -> String {
    let body: String = rust
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with(".version")
                || t.starts_with(".target")
                || t.starts_with(".address_size"))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    format!(
        "{}\n\n// Rust kernels (kernels/rust, {PTX_CPU} PTX from the kernel rustc), appended by kiln-build\n{body}",
        cxx.trim_end()
    )
}

use crate::tool::run_tool;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_assertions_name_every_field() {
        let text = host_layout_assertions(kiln_kernel_params::ALL);
        assert!(text.contains("type T = crate::params::RmsnormParams;"));
        assert!(text.contains("offset_of!(T, eps) == 16"));
        assert!(text.contains("parameter struct RmsnormParams, field `eps`"));
    }
}
