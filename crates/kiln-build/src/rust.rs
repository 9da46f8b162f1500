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

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use kiln_pins::{Pins, Target};

use crate::cache::{Cache, KeyBuilder};
use crate::error::{io, BuildError};
use crate::jobs::Outcome;
use crate::toolkit::Toolkit;

/// The target the kernel crate is compiled for.
pub const DEVICE_TARGET: &str = "nvptx64-nvidia-cuda";
/// The one `-C target-cpu` the PTX is generated for (the oldest GPU of any kiln matrix).
pub const PTX_CPU: &str = "sm_80";
/// The crate, relative to the kernels directory.
pub const CRATE_DIR: &str = "rust";

/// A verified kernel rustc and the cargo beside it.
#[derive(Debug, Clone)]
pub struct KernelRustc {
    pub rustc: PathBuf,
    pub cargo: PathBuf,
    /// `rustc -vV`, verbatim (recorded in the manifest).
    pub version_verbose: String,
}

/// What to install when no usable kernel rustc is found (one line).
pub fn install_hint(pins: &Pins) -> String {
    let v = &pins.toolchain.kernel_rustc;
    format!(
        "install Debian's rustc-web {v} with its sources (`apt-get install --allow-downgrades \
         rustc-web={v}* libstd-rust-web-dev={v}* rust-web-src={v}* cargo-web={v}*`: a plain install \
         takes bookworm-security's newer release; `cargo xtask bootstrap` does this as root), or \
         enter `nix develop` (the pinned nightly with rust-src), or set KILN_KERNEL_RUSTC"
    )
}

/// `release: 1.85.0` → "1.85.0"; `commit-date: 2026-08-19` → "2026-08-19".
fn vv_field<'a>(vv: &'a str, field: &str) -> Option<&'a str> {
    vv.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(": "))
        .map(str::trim)
}

/// Whether `rustc -vV` is a pinned kernel rustc: the exact release `kernel-rustc` or its
/// tested fallback `kernel-rustc-fallback`, or the flake's nightly (`rust-nightly`; a nightly
/// of date D carries commit-date D or the day before).
pub fn matches_pin(vv: &str, pins: &Pins) -> bool {
    let release = vv_field(vv, "release").unwrap_or("");
    if release == pins.toolchain.kernel_rustc
        || pins.toolchain.kernel_rustc_fallback.as_deref() == Some(release)
    {
        return true;
    }
    release.contains("nightly")
        && vv_field(vv, "commit-date").is_some_and(|d| {
            d == pins.toolchain.rust_nightly
                || day_before(&pins.toolchain.rust_nightly).as_deref() == Some(d)
        })
}

/// "2026-08-20" → "2026-08-19" (proleptic Gregorian).
fn day_before(date: &str) -> Option<String> {
    let mut it = date.split('-').map(|p| p.parse::<u32>().ok());
    let (y, m, d) = (it.next()??, it.next()??, it.next()??);
    if d > 1 {
        return Some(format!("{y:04}-{m:02}-{:02}", d - 1));
    }
    let (y, m) = if m == 1 { (y - 1, 12) } else { (y, m - 1) };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    Some(format!("{y:04}-{m:02}-{:02}", days[(m - 1) as usize]))
}

fn verbose_version(rustc: &Path) -> Option<String> {
    let out = Command::new(rustc).arg("-vV").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The kernel rustc: KILN_KERNEL_RUSTC, else Debian's `/usr/bin/rustc`, else `rustc` on PATH
/// (the nightly of `nix develop`) — the first whose `rustc -vV` matches the pins and whose
/// sysroot has the `core` sources `-Zbuild-std` needs. Cargo is the one beside it.
pub fn locate(
    env: &dyn Fn(&str) -> Option<OsString>,
    pins: &Pins,
) -> Result<KernelRustc, BuildError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    let explicit = env("KILN_KERNEL_RUSTC").map(PathBuf::from);
    match &explicit {
        Some(p) => candidates.push(p.clone()),
        None => {
            candidates.push("/usr/bin/rustc".into());
            if let Some(path) = env("PATH") {
                candidates.extend(std::env::split_paths(&path).map(|d| d.join("rustc")));
            }
        }
    }
    let mut seen = Vec::new();
    for c in candidates.iter().filter(|c| c.is_file()) {
        let Some(vv) = verbose_version(c) else {
            seen.push(format!("{} (does not run)", c.display()));
            continue;
        };
        let release = vv_field(&vv, "release").unwrap_or("?").to_string();
        if !matches_pin(&vv, pins) {
            seen.push(format!("{} is {release}", c.display()));
            continue;
        }
        if !has_core_source(c) {
            seen.push(format!(
                "{} ({release}) has no rust-src (lib/rustlib/src/rust/library/core)",
                c.display()
            ));
            continue;
        }
        let cargo = c.with_file_name("cargo");
        if !cargo.is_file() {
            seen.push(format!(
                "{} ({release}) has no cargo beside it",
                c.display()
            ));
            continue;
        }
        return Ok(KernelRustc {
            rustc: c.clone(),
            cargo,
            version_verbose: vv,
        });
    }
    let found = if seen.is_empty() {
        "none found".to_string()
    } else {
        seen.join("; ")
    };
    Err(BuildError::KernelRustc(format!(
        "no kernel rustc {} (or the nightly {}) with rust-src ({found}) — {}",
        pins.toolchain.kernel_rustc,
        pins.toolchain.rust_nightly,
        install_hint(pins)
    )))
}

fn has_core_source(rustc: &Path) -> bool {
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    sysroot
        .join("lib/rustlib/src/rust/library/core/Cargo.toml")
        .is_file()
}

/// The Rust kernel crate of a kernels directory, if it has one, and every file its PTX
/// depends on (its own, and those of its path dependencies), sorted.
#[derive(Debug, Clone)]
pub struct RustCrate {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
}

impl RustCrate {
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
    pub krate: RustCrate,
    pub layout: String,
    pub key: String,
}

impl RustPtxJob {
    pub fn new(
        mut krate: RustCrate,
        rustc: &KernelRustc,
        kernels_dir: &Path,
    ) -> Result<RustPtxJob, BuildError> {
        ensure_lockfile(&mut krate, rustc)?;
        let layout = host_layout_assertions(kiln_kernel_params::ALL);
        let mut key = KeyBuilder::new("rust-ptx")
            .field("rustc", rustc.version_verbose.as_bytes())
            .field("target", DEVICE_TARGET.as_bytes())
            .field("cpu", PTX_CPU.as_bytes())
            .field("layout", layout.as_bytes());
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

    pub fn run(
        &self,
        rustc: &KernelRustc,
        cache: &Cache,
        client: &jobserver::Client,
    ) -> Result<Outcome, BuildError> {
        let started = Instant::now();
        let dest = cache.path(&self.key, "rs.ptx");
        if dest.is_file() {
            return Ok(Outcome {
                output: dest,
                cached: true,
                elapsed: started.elapsed(),
            });
        }
        let layout = cache.path(&self.key, "layout.rs");
        std::fs::write(&layout, &self.layout).map_err(io("writing the host layout check"))?;
        let staging = cache.staging(&self.key, "rs.ptx");
        let mut cmd = Command::new(&rustc.cargo);
        // The outer cargo's variables (a build script's CARGO_*, RUSTFLAGS, wrappers) belong to
        // the host build, not to this one. Kept: where cargo's sources are (CARGO_HOME: in the
        // Nix sandbox its config.toml replaces crates.io by crane's vendor directory, which
        // `-Zbuild-std` resolves the standard library's dependencies from) and whether the
        // network may be used (CARGO_NET_OFFLINE).
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
            .env("KILN_HOST_LAYOUT", &layout)
            .arg("rustc")
            .arg("--manifest-path")
            .arg(self.krate.dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(cache.dir.join("rust-target"))
            .args(["--release", "--lib", "--target", DEVICE_TARGET])
            .args(["-Zbuild-std=core", "--quiet", "--"])
            .arg(format!("-Ctarget-cpu={PTX_CPU}"))
            // The output path is in the arguments, so cargo reruns rustc whenever the key
            // changes even if its own fingerprint thinks the crate is fresh.
            .arg(format!("--emit=asm={}", staging.display()));
        client.configure(&mut cmd);
        let command = format!("{cmd:?}");
        let out = cmd.output().map_err(|e| BuildError::Tool {
            tool: rustc.cargo.display().to_string(),
            message: e.to_string(),
        })?;
        if !out.status.success() || !staging.is_file() {
            let _ = std::fs::remove_file(&staging);
            return Err(BuildError::Compile {
                source_file: self.krate.dir.clone(),
                target: format!("{DEVICE_TARGET} ({PTX_CPU})"),
                diagnostics: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
                command,
            });
        }
        check_ptx(&staging, &self.krate.dir)?;
        let output = cache.commit(&staging, &self.key, "rs.ptx")?;
        Ok(Outcome {
            output,
            cached: false,
            elapsed: started.elapsed(),
        })
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

fn ptxas(toolkit: &Toolkit) -> PathBuf {
    toolkit.nvcc.with_file_name("ptxas")
}

/// The Rust PTX as a relocatable object for one SASS target (`ptxas -c`), linked by nvlink
/// with the C++ objects of that target.
#[derive(Debug, Clone)]
pub struct PtxasJob {
    pub target: Target,
    pub ptx: PathBuf,
    pub key: String,
}

impl PtxasJob {
    pub fn new(target: Target, ptx: &Path, toolkit: &Toolkit) -> Result<PtxasJob, BuildError> {
        let key = KeyBuilder::new("ptxas")
            .field("nvcc", toolkit.version.as_bytes())
            .field("target", target.name().as_bytes())
            .file("ptx", ptx)?
            .finish();
        Ok(PtxasJob {
            target,
            ptx: ptx.to_path_buf(),
            key,
        })
    }

    pub fn run(&self, toolkit: &Toolkit, cache: &Cache) -> Result<Outcome, BuildError> {
        let started = Instant::now();
        let dest = cache.path(&self.key, "rs.o");
        if dest.is_file() {
            return Ok(Outcome {
                output: dest,
                cached: true,
                elapsed: started.elapsed(),
            });
        }
        let staging = cache.staging(&self.key, "rs.o");
        let mut cmd = Command::new(ptxas(toolkit));
        cmd.arg(format!("-arch={}", self.target.arch.sm()))
            .args(["-c", "-O3", "-o"])
            .arg(&staging)
            .arg(&self.ptx);
        run_tool(
            &mut cmd,
            &format!("ptxas (Rust kernels) for {}", self.target),
        )?;
        let output = cache.commit(&staging, &self.key, "rs.o")?;
        Ok(Outcome {
            output,
            cached: false,
            elapsed: started.elapsed(),
        })
    }
}

/// A `+PTX` target: the C++ kernels' linked PTX with the Rust PTX's functions appended (one
/// PTX module holding every kernel), proven by compiling it with ptxas for that target.
pub fn merge_ptx(
    toolkit: &Toolkit,
    cache: &Cache,
    target: Target,
    linked: &Path,
    rust_ptx: &Path,
) -> Result<Outcome, BuildError> {
    let started = Instant::now();
    let key = KeyBuilder::new("ptx-merge")
        .field("nvcc", toolkit.version.as_bytes())
        .field("target", target.name().as_bytes())
        .file("linked", linked)?
        .file("rust", rust_ptx)?
        .finish();
    let dest = cache.path(&key, "ptx");
    if dest.is_file() {
        return Ok(Outcome {
            output: dest,
            cached: true,
            elapsed: started.elapsed(),
        });
    }
    let read =
        |p: &Path| std::fs::read_to_string(p).map_err(io(format!("reading {}", p.display())));
    let (cxx, rust) = (read(linked)?, read(rust_ptx)?);
    // The module header (.version/.target/.address_size) is the C++ one: its ISA and target
    // are at least the Rust PTX's (7.0, sm_80), whose instructions stay valid under them.
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
    let merged = format!(
        "{}\n\n// Rust kernels (kernels/rust, {PTX_CPU} PTX from the kernel rustc), appended by kiln-build\n{body}",
        cxx.trim_end()
    );
    let staging = cache.staging(&key, "ptx");
    std::fs::write(&staging, merged).map_err(io("writing the merged PTX"))?;
    let check = cache.staging(&key, "check.o");
    let mut cmd = Command::new(ptxas(toolkit));
    cmd.arg(format!("-arch={}", target.arch.sm()))
        .arg("-o")
        .arg(&check)
        .arg(&staging);
    let r = run_tool(
        &mut cmd,
        &format!("ptxas check of the merged PTX for {target}"),
    );
    let _ = std::fs::remove_file(&check);
    if let Err(e) = r {
        let _ = std::fs::remove_file(&staging);
        return Err(e);
    }
    let output = cache.commit(&staging, &key, "ptx")?;
    Ok(Outcome {
        output,
        cached: false,
        elapsed: started.elapsed(),
    })
}

fn run_tool(cmd: &mut Command, what: &str) -> Result<(), BuildError> {
    let out = cmd.output().map_err(|e| BuildError::Tool {
        tool: what.to_string(),
        message: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(BuildError::Tool {
            tool: what.to_string(),
            message: format!(
                "{}\n  command: {cmd:?}",
                String::from_utf8_lossy(&out.stderr).trim_end()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_before_crosses_months_and_leap_years() {
        assert_eq!(day_before("2026-08-20").unwrap(), "2026-08-19");
        assert_eq!(day_before("2026-03-01").unwrap(), "2026-02-28");
        assert_eq!(day_before("2024-03-01").unwrap(), "2024-02-29");
        assert_eq!(day_before("2026-01-01").unwrap(), "2025-12-31");
    }

    /// The workspace's pins: 1.85.0, its fallback 1.96.0 and the nightly are kernel rustcs;
    /// another release is not.
    #[test]
    fn the_pin_its_fallback_and_the_nightly_match() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let pins = Pins::load(&root).unwrap();
        let vv = |release: &str, date: &str| {
            format!(
                "rustc {release}\nrelease: {release}\ncommit-date: {date}\nLLVM version: 19.1.7"
            )
        };
        let pin = &pins.toolchain.kernel_rustc;
        let fallback = pins
            .toolchain
            .kernel_rustc_fallback
            .clone()
            .expect("a fallback pin");
        assert!(matches_pin(&vv(pin, "2025-02-17"), &pins));
        assert!(matches_pin(&vv(&fallback, "2026-05-25"), &pins));
        assert!(!matches_pin(&vv("1.90.0", "2025-09-14"), &pins));
        let nightly = format!(
            "rustc 1.91.0-nightly\nrelease: 1.91.0-nightly\ncommit-date: {}",
            pins.toolchain.rust_nightly
        );
        assert!(matches_pin(&nightly, &pins));
    }

    #[test]
    fn layout_assertions_name_every_field() {
        let text = host_layout_assertions(kiln_kernel_params::ALL);
        assert!(text.contains("type T = crate::params::RmsnormParams;"));
        assert!(text.contains("offset_of!(T, eps) == 16"));
        assert!(text.contains("parameter struct RmsnormParams, field `eps`"));
    }
}
