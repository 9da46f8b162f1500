//! The checkout, its pins, and where `cargo xtask bootstrap` puts the pinned toolchain.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use kiln_pins::Pins;

/// The repository root (where the workspace Cargo.toml is).
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(2)
        .expect("tools/xtask sits two levels below the root")
        .to_path_buf()
}

pub fn pins() -> Result<Pins> {
    Pins::load(&repo_root().join("Cargo.toml")).context("reading [workspace.metadata.kiln]")
}

/// Where `cargo xtask bootstrap` puts the toolchain: the checkout's `.toolchain/`
/// ([`kiln_toolchain::Layout`]).
pub use kiln_toolchain::Layout;

/// The checkout's `.toolchain/` layout.
pub fn checkout_layout() -> Layout {
    Layout::in_checkout(&repo_root())
}

/// Runs a command to completion; on failure the error carries its stderr.
pub fn run_checked(cmd: &mut Command) -> Result<std::process::Output> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    if !out.status.success() {
        anyhow::bail!(
            "{:?} failed ({}):\n{}{}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}

/// `from` — a file, or a directory with everything below it except entries named in `skip` —
/// copied to `to` (links followed: their targets' bytes are copied).
pub fn copy_tree(from: &Path, to: &Path, skip: &[&str]) -> Result<()> {
    if from.is_dir() {
        std::fs::create_dir_all(to)?;
        for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
            let name = e?.file_name();
            if !skip.iter().any(|s| name == *s) {
                copy_tree(&from.join(&name), &to.join(&name), skip)?;
            }
        }
    } else {
        std::fs::create_dir_all(to.parent().context("a path with a parent")?)?;
        std::fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    }
    Ok(())
}

/// Runs a command, its output on the terminal; unless it succeeds, fails with `failed` and its
/// exit status.
pub fn run_status(cmd: &mut Command, failed: impl std::fmt::Display) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    anyhow::ensure!(status.success(), "{failed} ({status})");
    Ok(())
}

/// `git ARGS` in `root`: its trimmed stdout, or None when git is missing or fails.
pub fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The cargo running this xtask (`$CARGO`), else `cargo` from PATH.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `cargo build -q --message-format=json ARGS` in `dir` with the toolchain's environment; the
/// executables cargo reports for the binary targets `names`, in that order.
pub fn cargo_build(
    layout: &Layout,
    dir: &Path,
    args: &[&str],
    names: &[&str],
) -> Result<Vec<PathBuf>> {
    let mut cmd = cargo();
    cmd.current_dir(dir)
        .args(["build", "-q", "--message-format=json"])
        .args(args);
    layout.apply(&mut cmd);
    let out = run_checked(&mut cmd)?;
    let reported: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["reason"] == "compiler-artifact")
        .collect();
    names
        .iter()
        .map(|name| {
            reported
                .iter()
                .find(|v| v["target"]["name"] == *name && v["executable"].is_string())
                .map(|v| PathBuf::from(v["executable"].as_str().unwrap_or_default()))
                .with_context(|| format!("cargo did not report the {name} executable"))
        })
        .collect()
}

/// The one `.whl` file in `dir` (a fresh `maturin build --out` directory).
pub fn single_wheel(dir: &Path) -> Result<PathBuf> {
    let wheels: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    match wheels.as_slice() {
        [w] => Ok(w.clone()),
        _ => anyhow::bail!("expected one wheel in {}, found {wheels:?}", dir.display()),
    }
}
