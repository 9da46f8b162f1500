//! `cargo xtask wheel`: the `kiln` wheel, built by maturin from crates/kiln-py, finalized by
//! kiln-wheel (Requires-Dist and the SBOM's runtime wheels from the pins — the same step Nix runs
//! as `kiln wheel finalize`), then audited by `kiln audit`.
//!
//! The manylinux level and the Requires-Dist rule live in `[workspace.metadata.kiln.wheel]`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use kiln_pins::Pins;
use kiln_wheel::finalize::Recipe;

use crate::bootstrap;
use crate::toolchain::{cargo_build, git, pins, repo_root, run_status, single_wheel, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// Where the wheel goes (default: <target dir>/wheels).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip `kiln audit`.
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
    run_status(&mut cmd, "the no-GPU wheel check failed")
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

    let recipe = recipe(&pins, &root)?;
    let raw = maturin_build(&layout, &pins, &recipe, &root)?;
    let (wheel, tags) = finalize(&raw, &out_dir, &recipe)?;
    let _ = std::fs::remove_file(&raw);
    if !tags.iter().all(|t| t.starts_with("cp39-abi3-")) {
        bail!(
            "{} has tags {tags:?}; expected cp39-abi3-{}_x86_64",
            wheel.display(),
            recipe.manylinux
        );
    }
    if args.no_audit {
        eprintln!("note: kiln audit skipped (--no-audit)");
    } else {
        audit(&layout, &root, &wheel)?;
    }
    Ok(Built {
        wheel,
        requires_dist: recipe.requires,
        tags,
    })
}

/// The target directory cargo uses for this workspace (CARGO_TARGET_DIR or ./target).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// What finalizing adds to the wheel of the checkout at `root`, from its pins.
pub fn recipe(pins: &Pins, root: &Path) -> Result<Recipe> {
    Recipe::from_pins(pins, root).context("the wheel recipe ([workspace.metadata.kiln.wheel])")
}

/// The xtask route of the post-processing step (Nix runs the same as `kiln wheel finalize`):
/// `raw` finalized into `out_dir`; the wheel's path and tags.
pub fn finalize(raw: &Path, out_dir: &Path, recipe: &Recipe) -> Result<(PathBuf, Vec<String>)> {
    let name = raw.file_name().context("maturin output has no file name")?;
    let wheel = out_dir.join(name);
    let tags = kiln_wheel::finalize::finalize(raw, &wheel, recipe)
        .with_context(|| format!("finalizing {}", raw.display()))?;
    Ok((wheel, tags))
}

fn maturin_build(layout: &Layout, pins: &Pins, recipe: &Recipe, root: &Path) -> Result<PathBuf> {
    // A fresh directory, so the one wheel in it is the one just built.
    let staging = target_dir().join("wheels-maturin");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    std::fs::create_dir_all(&staging)?;
    let mut cmd = Command::new(layout.py_site().join("bin/maturin"));
    // Not from the checkout: cargo-zigbuild hands bindgen the include directories `zig cc -v`
    // prints, and zig prints them relative to the current directory when its lib dir lies below
    // it (.toolchain/py/ziglang/lib); kiln-kernels' build script runs in its own directory, where
    // those relative paths lead nowhere ("'stdint.h' file not found"). From the staging
    // directory they are absolute. Cargo still finds the checkout's .cargo/config.toml above it.
    cmd.current_dir(&staging)
        .args(["build", "--release", "--locked", "--manifest-path"])
        .arg(root.join("crates/kiln-py/Cargo.toml"))
        // zig links against the glibc of the manylinux level (symbol versions <= 2.28), not
        // the build host's; nix/wheel-build.sh does the same. zig is the pinned PyPI ziglang
        // (test-tools), found by maturin through PYTHONPATH (the layout's .toolchain/py).
        .arg("--zig")
        .args(["--compatibility", &recipe.manylinux])
        .arg("--out")
        .arg(&staging);
    layout.apply(&mut cmd);
    // Reproducible zip timestamps: the commit's time (maturin honours SOURCE_DATE_EPOCH).
    if std::env::var_os("SOURCE_DATE_EPOCH").is_none() {
        if let Some(t) = git(root, &["log", "-1", "--format=%ct"]).filter(|t| !t.is_empty()) {
            cmd.env("SOURCE_DATE_EPOCH", t);
        }
    }
    for (k, v) in reproducible_env(root) {
        cmd.env(k, v);
    }
    // cargo-zigbuild (maturin --zig) keeps its wrappers under $XDG_CACHE_HOME, else
    // $HOME/.cache; the paths never reach the wheel's bytes (`cargo xtask repro`).
    eprintln!(
        "building the wheel: maturin {} build --release --zig --compatibility {}",
        pins.toolchain.maturin, recipe.manylinux
    );
    let status = cmd
        .status()
        .context("cannot start maturin (run `cargo xtask bootstrap`)")?;
    if !status.success() {
        bail!("maturin build failed ({status})");
    }
    single_wheel(&staging)
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
    if std::env::var_os("KILN_BUILD_COMMIT").is_none() {
        if let Some(commit) = git(root, &["rev-parse", "HEAD"]) {
            env.push(("KILN_BUILD_COMMIT", commit));
            let dirty = git(root, &["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|o| !o.is_empty());
            env.push((
                "KILN_BUILD_DIRTY",
                if dirty { "1" } else { "0" }.to_string(),
            ));
        }
    }
    env
}

/// `kiln audit WHEEL --policy Cargo.toml`; findings fail.
fn audit(layout: &Layout, root: &Path, wheel: &Path) -> Result<()> {
    let kiln = build_kiln_binary(layout, root)?;
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
    let args = ["--release", "--locked", "-p", "kiln", "--bin", "kiln"];
    let mut built =
        cargo_build(layout, root, &args, &["kiln"]).context("building the kiln binary")?;
    Ok(built.remove(0))
}
