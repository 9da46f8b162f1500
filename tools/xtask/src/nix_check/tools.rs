//! Nix 2.34, nixpkgs-fmt and deadnix for `nix-check`, kept in `.toolchain/` and installed there
//! when missing, so that a fresh machine needs nothing but apt (for Nix) and cargo.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// The formatter and linter versions the checks are written against.
const NIXPKGS_FMT: (&str, &str) = ("nixpkgs-fmt", "1.3.0");
const DEADNIX: (&str, &str) = ("deadnix", "1.3.1");
/// Oldest Nix whose flake lock and evaluation semantics the flake is checked with.
const MIN_NIX: (u32, u32) = (2, 24);

pub struct Tools {
    /// Directory holding `nix` and `nix-instantiate`.
    pub nix_bin: PathBuf,
    pub nix_version: String,
    pub fmt_bin: PathBuf,
    pub deadnix_bin: PathBuf,
}

impl Tools {
    pub fn ensure(ws: &Path, toolchain: &Path) -> Result<Tools> {
        let (nix_bin, nix_version) = ensure_nix(ws, toolchain)?;
        let cargo_root = toolchain.join("cargo");
        let fmt_bin = ensure_cargo_tool(&cargo_root, NIXPKGS_FMT, "nixpkgs-fmt")?;
        let deadnix_bin = ensure_cargo_tool(&cargo_root, DEADNIX, "deadnix")?;
        Ok(Tools {
            nix_bin,
            nix_version,
            fmt_bin,
            deadnix_bin,
        })
    }

    /// `nix` with flakes enabled, whatever the host's configuration says.
    pub fn nix(&self) -> Command {
        let mut c = Command::new(self.nix_bin.join("nix"));
        c.args(["--extra-experimental-features", "nix-command flakes"]);
        c
    }

    pub fn nix_instantiate(&self) -> Command {
        Command::new(self.nix_bin.join("nix-instantiate"))
    }
}

fn nix_version(bin: &Path) -> Option<(String, (u32, u32))> {
    let out = Command::new(bin.join("nix"))
        .arg("--version")
        .output()
        .ok()?;
    if !out.status.success() || !bin.join("nix-instantiate").exists() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let ver = text.rsplit(' ').next()?;
    let mut parts = ver.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next()??;
    Some((text, (major, minor)))
}

/// `KILN_NIX_BIN`, then `.toolchain/nix/bin`, then a recent enough `nix` on PATH (a CI runner
/// with Nix installed), else install Nix 2.34 with checks/nix/get-nix.sh into `.toolchain/nix`.
fn ensure_nix(ws: &Path, toolchain: &Path) -> Result<(PathBuf, String)> {
    if let Some(dir) = std::env::var_os("KILN_NIX_BIN") {
        let dir = PathBuf::from(dir);
        let (v, _) = nix_version(&dir)
            .with_context(|| format!("KILN_NIX_BIN={} has no working nix", dir.display()))?;
        return Ok((dir, v));
    }
    let private = toolchain.join("nix");
    if let Some((v, _)) = nix_version(&private.join("bin")) {
        return Ok((private.join("bin"), v));
    }
    if let Some(path_nix) = which("nix") {
        let dir = path_nix.parent().expect("file has a parent").to_path_buf();
        if let Some((v, ver)) = nix_version(&dir) {
            if ver >= MIN_NIX {
                return Ok((dir, v));
            }
        }
    }
    let script = ws.join("checks/nix/get-nix.sh");
    eprintln!(
        "nix-check: installing Nix into {} ({})",
        private.display(),
        script.display()
    );
    let t = Instant::now();
    let status = Command::new("bash")
        .arg(&script)
        .arg(&private)
        .status()
        .context("running checks/nix/get-nix.sh")?;
    if !status.success() {
        bail!("checks/nix/get-nix.sh {} failed ({status}); set KILN_NIX_BIN to a directory with Nix >= {}.{}", private.display(), MIN_NIX.0, MIN_NIX.1);
    }
    eprintln!(
        "nix-check: Nix installed in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    let (v, _) = nix_version(&private.join("bin")).context("Nix was installed but does not run")?;
    Ok((private.join("bin"), v))
}

fn ensure_cargo_tool(root: &Path, (krate, version): (&str, &str), bin: &str) -> Result<PathBuf> {
    let path = root.join("bin").join(bin);
    let installed = |p: &Path| {
        Command::new(p)
            .arg("--version")
            .output()
            // nixpkgs-fmt 1.3.0 prints its version and exits with status 1: look at the text only.
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == format!("{bin} {version}"))
            .unwrap_or(false)
    };
    if installed(&path) {
        return Ok(path);
    }
    eprintln!(
        "nix-check: installing {krate} {version} into {} (cargo install --debug, about 1 min)",
        root.display()
    );
    let t = Instant::now();
    // --debug: these tools read a few small files, so optimised code buys nothing, while a
    // release build costs twice the CPU of the dev profile on a fresh CI machine (deadnix
    // 1.3.1: 64 against 32 CPU-s, measured 2026-12-03).
    let status = crate::toolchain::cargo()
        .args(["install", "--locked", "--quiet", "--debug", "--root"])
        .arg(root)
        .arg(format!("{krate}@{version}"))
        .status()
        .with_context(|| format!("cargo install {krate}"))?;
    if !status.success() || !installed(&path) {
        bail!(
            "cargo install --locked {krate}@{version} into {} failed",
            root.display()
        );
    }
    eprintln!(
        "nix-check: {krate} installed in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    Ok(path)
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
