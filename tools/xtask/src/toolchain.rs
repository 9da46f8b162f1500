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
