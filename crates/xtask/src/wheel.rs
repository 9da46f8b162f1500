//! `cargo xtask wheel`: the `kiln` wheel, built by maturin from crates/kiln-py, with
//! Requires-Dist for the NVIDIA runtime wheels it reaches, then audited by `kiln audit`.
//!
//! maturin takes Requires-Dist only from a static pyproject list; the versions live once, in
//! `[workspace.metadata.kiln.runtime]`, so they are written into the wheel's METADATA here
//! (RECORD rehashed) instead of being restated in pyproject.toml.

mod metadata;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use kiln_pins::Pins;

use crate::bootstrap;
use crate::toolchain::{pins, repo_root, run_checked, Layout};

/// The glibc baseline the wheel is tagged for. manylinux_2_34 is what a stable Rust std built on
/// this glibc 2.36 host links against (the pthread symbols moved into libc in 2.34); it covers
/// Ubuntu 22.04+, Debian 12+ and RHEL 9+, which is where CUDA 13 drivers run. maturin checks
/// every symbol version against it. (manylinux_2_17 would need zig as the linker.)
pub const MANYLINUX: &str = "manylinux_2_34";

#[derive(clap::Args)]
pub struct Args {
    /// Where the wheel goes (default: <target dir>/wheels).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip `kiln audit` (it is also skipped, with a notice, when crates/kiln does not exist yet).
    #[arg(long)]
    pub no_audit: bool,
    /// Then run the no-GPU wheel check (checks/wheel/check_no_gpu.py): fresh venv, pip install,
    /// import, build_info, the no-driver error.
    #[arg(long)]
    pub test: bool,
    /// With --test: skip resolving Requires-Dist on PyPI.
    #[arg(long)]
    pub offline: bool,
}

/// What was built.
pub struct Built {
    pub wheel: PathBuf,
    pub requires_dist: Vec<String>,
    pub tags: Vec<String>,
}

pub fn run(args: Args) -> Result<()> {
    let built = build(&args)?;
    let size = std::fs::metadata(&built.wheel)?.len();
    println!("wheel:         {}", built.wheel.display());
    println!(
        "size:          {:.2} MiB ({size} bytes)",
        size as f64 / (1024.0 * 1024.0)
    );
    println!("tags:          {}", built.tags.join(" "));
    println!("requires-dist: {}", built.requires_dist.join(", "));
    if args.test {
        no_gpu_check(&built.wheel, args.offline)?;
    }
    Ok(())
}

/// checks/wheel/check_no_gpu.py on the wheel (fails when any of its checks fails).
pub fn no_gpu_check(wheel: &Path, offline: bool) -> Result<()> {
    let root = repo_root();
    let mut cmd = Command::new(std::env::var("KILN_PYTHON").unwrap_or_else(|_| "python3".into()));
    cmd.current_dir(&root)
        .arg(root.join("checks/wheel/check_no_gpu.py"))
        .arg(wheel);
    cmd.arg("--pins").arg(root.join("Cargo.toml"));
    if offline {
        cmd.arg("--offline");
    }
    let status = cmd
        .status()
        .context("running checks/wheel/check_no_gpu.py")?;
    if !status.success() {
        bail!("the no-GPU wheel check failed ({status})");
    }
    Ok(())
}

/// Builds (and unless told otherwise audits) the wheel; used by `gpu-bundle` too.
pub fn build(args: &Args) -> Result<Built> {
    let layout = bootstrap::ensure()?;
    let pins = pins()?;
    let root = repo_root();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| target_dir().join("wheels"));
    std::fs::create_dir_all(&out_dir)?;

    let runtime = runtime_wheels(&pins, &root.join("crates/kiln-py/Cargo.toml"))?;
    let requires = requires_dist(&pins, &root.join("crates/kiln-py/Cargo.toml"))?;
    let raw = maturin_build(&layout, &pins, &root)?;
    let name = raw.file_name().context("maturin output has no file name")?;
    let wheel = out_dir.join(name);
    // Requires-Dist and the SBOM's runtime components, from the same pins; bytecode refused.
    let tags = metadata::rewrite(&raw, &wheel, &requires, &runtime, &root).with_context(|| {
        format!(
            "adding Requires-Dist and the SBOM's runtime wheels to {}",
            raw.display()
        )
    })?;
    let _ = std::fs::remove_file(&raw);
    if !tags
        .iter()
        .all(|t| t.starts_with("cp39-abi3-") && t.contains(MANYLINUX))
    {
        bail!(
            "{} has tags {tags:?}; expected cp39-abi3-{MANYLINUX}_x86_64",
            wheel.display()
        );
    }
    if args.no_audit {
        eprintln!("note: kiln audit skipped (--no-audit)");
    } else {
        audit(&layout, &root, &wheel)?;
    }
    Ok(Built {
        wheel,
        requires_dist: requires,
        tags,
    })
}

/// The target directory cargo uses for this workspace (CARGO_TARGET_DIR or ./target).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// The runtime wheels behind `requires_dist` (same features, same order), for the SBOM.
pub fn runtime_wheels(pins: &Pins, kiln_py_manifest: &Path) -> Result<Vec<metadata::RuntimeWheel>> {
    Ok(runtime_features(pins, kiln_py_manifest)?
        .into_iter()
        .map(|f| {
            let lib = &pins.runtime[&f];
            metadata::RuntimeWheel {
                name: lib.wheel.clone(),
                version: lib.version.clone(),
            }
        })
        .collect())
}

/// One `name>=MAJOR.MINOR,<MAJOR+1` (the pin's declared range) per runtime library the extension
/// is built to reach: kiln-py's default features that name a `[workspace.metadata.kiln.runtime]`
/// entry.
pub fn requires_dist(pins: &Pins, kiln_py_manifest: &Path) -> Result<Vec<String>> {
    Ok(runtime_features(pins, kiln_py_manifest)?
        .iter()
        .map(|f| pins.runtime[f].requirement())
        .collect())
}

/// kiln-py's default features that name a `[workspace.metadata.kiln.runtime]` entry.
fn runtime_features(pins: &Pins, kiln_py_manifest: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(kiln_py_manifest)
        .with_context(|| format!("reading {}", kiln_py_manifest.display()))?;
    let doc: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing {}", kiln_py_manifest.display()))?;
    let defaults = doc
        .get("features")
        .and_then(|f| f.get("default"))
        .and_then(|d| d.as_array())
        .with_context(|| {
            format!(
                "{} has no [features] default list",
                kiln_py_manifest.display()
            )
        })?;
    let mut reqs = Vec::new();
    for feature in defaults.iter().filter_map(|v| v.as_str()) {
        if pins.runtime.contains_key(feature) {
            reqs.push(feature.to_string());
        }
    }
    if reqs.is_empty() {
        bail!("no default feature of kiln-py names a [workspace.metadata.kiln.runtime] library");
    }
    Ok(reqs)
}

fn maturin_build(layout: &Layout, pins: &Pins, root: &Path) -> Result<PathBuf> {
    // A fresh directory, so the one wheel in it is the one just built.
    let staging = target_dir().join("wheels-maturin");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    std::fs::create_dir_all(&staging)?;
    let mut cmd = Command::new(layout.py_site().join("bin/maturin"));
    cmd.current_dir(root)
        .args([
            "build",
            "--release",
            "--locked",
            "--manifest-path",
            "crates/kiln-py/Cargo.toml",
        ])
        .args(["--compatibility", MANYLINUX])
        .arg("--out")
        .arg(&staging);
    layout.apply(&mut cmd);
    // Reproducible zip timestamps: the commit's time (maturin honours SOURCE_DATE_EPOCH).
    if std::env::var_os("SOURCE_DATE_EPOCH").is_none() {
        if let Ok(out) = Command::new("git")
            .current_dir(root)
            .args(["log", "-1", "--format=%ct"])
            .output()
        {
            let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !t.is_empty() {
                cmd.env("SOURCE_DATE_EPOCH", t);
            }
        }
    }
    for (k, v) in reproducible_env(root) {
        cmd.env(k, v);
    }
    eprintln!(
        "building the wheel: maturin {} build --release --compatibility {MANYLINUX}",
        pins.toolchain.maturin
    );
    let status = cmd
        .status()
        .context("cannot start maturin (run `cargo xtask bootstrap`)")?;
    if !status.success() {
        bail!("maturin build failed ({status})");
    }
    let wheels: Vec<PathBuf> = std::fs::read_dir(&staging)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        other => bail!(
            "maturin left {} wheels in {}",
            other.len(),
            staging.display()
        ),
    }
}

/// What makes two builds of one commit byte-identical wherever they run: paths mapped to fixed
/// prefixes (the checkout, cargo's registry, the target directory), and the commit recorded in
/// the build manifest passed explicitly rather than left to each build script's `git` call.
fn reproducible_env(root: &Path) -> Vec<(&'static str, String)> {
    let cargo_home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap_or_default()));
    let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
    for (from, to) in [
        (target_dir().display().to_string(), "/kiln/target"),
        (root.display().to_string(), "/kiln"),
        (cargo_home, "/cargo"),
    ] {
        flags.push_str(&format!(" --remap-path-prefix={from}={to}"));
    }
    let mut env = vec![("RUSTFLAGS", flags.trim().to_string())];
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
    };
    if std::env::var_os("KILN_BUILD_COMMIT").is_none() {
        if let Some(out) = git(&["rev-parse", "HEAD"]) {
            env.push((
                "KILN_BUILD_COMMIT",
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
            ));
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|o| !o.stdout.is_empty());
            env.push((
                "KILN_BUILD_DIRTY",
                if dirty { "1" } else { "0" }.to_string(),
            ));
        }
    }
    env
}

/// `kiln audit WHEEL --policy Cargo.toml` when the `kiln` binary crate exists; findings fail.
fn audit(layout: &Layout, root: &Path, wheel: &Path) -> Result<()> {
    if !root.join("crates/kiln/Cargo.toml").exists() {
        eprintln!("note: kiln audit skipped: crates/kiln (the `kiln` binary) does not exist yet");
        return Ok(());
    }
    let kiln = build_kiln_binary(layout, root)?;
    let help = Command::new(&kiln)
        .arg("--help")
        .output()
        .context("running kiln --help")?;
    if !String::from_utf8_lossy(&help.stdout).contains("audit") {
        eprintln!("note: kiln audit skipped: `kiln` has no audit subcommand yet");
        return Ok(());
    }
    eprintln!(
        "auditing: kiln audit {} --policy Cargo.toml",
        wheel.display()
    );
    let status = Command::new(&kiln)
        .current_dir(root)
        .arg("audit")
        .arg(wheel)
        .args(["--policy", "Cargo.toml"])
        .status()
        .context("running kiln audit")?;
    match status.code() {
        Some(0) => Ok(()),
        Some(1) => bail!(
            "kiln audit found problems in {} (see above)",
            wheel.display()
        ),
        _ => bail!("kiln audit could not run on {} ({status})", wheel.display()),
    }
}

/// Builds the `kiln` binary (release) and returns its path.
pub fn build_kiln_binary(layout: &Layout, root: &Path) -> Result<PathBuf> {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(root).args([
        "build",
        "--release",
        "--locked",
        "-p",
        "kiln",
        "--bin",
        "kiln",
    ]);
    layout.apply(&mut cargo);
    run_checked(&mut cargo).context("building the kiln binary")?;
    Ok(target_dir().join("release/kiln"))
}
