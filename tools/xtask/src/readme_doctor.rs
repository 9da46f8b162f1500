//! `cargo xtask readme-doctor` (the `doctor` suite of `cargo xtask test`): README's doctor
//! command, read from README.md and run as written with bash, `kiln` being this checkout's
//! build. On a bootstrapped machine without a GPU it must exit 0: what cannot be checked there
//! (the driver, the GPUs, a driver-API link) is skipped or warns, never fails.

use std::process::Command;

use anyhow::{ensure, Context, Result};

use crate::consumer::block_after;
use crate::toolchain::{repo_root, run_status, Layout};

/// The marker line right above the README block this suite runs.
pub const MARKER: &str = "<!-- run by the doctor suite of `cargo xtask test` -->";

pub fn run(layout: &Layout) -> Result<()> {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).context("reading README.md")?;
    let block = block_after(&readme, MARKER)?;
    ensure!(
        block
            .lines()
            .any(|l| l.trim_start().starts_with("kiln doctor")),
        "README's doctor block runs no `kiln doctor`:\n{block}"
    );
    run_status(
        crate::toolchain::cargo()
            .current_dir(&root)
            .args(["build", "--locked", "--quiet", "-p", "kiln"]),
        "cargo build -p kiln failed",
    )?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("debug");
    eprintln!("doctor: README block:\n{block}");
    let mut sh = Command::new("bash");
    sh.args(["-euo", "pipefail", "-c", &block])
        .current_dir(&root);
    for (var, value) in layout.vars() {
        if var == "PATH" {
            // `kiln` is this checkout's build, ahead of the toolchain's PATH.
            let dirs = std::iter::once(bin.clone()).chain(std::env::split_paths(&value));
            sh.env(var, std::env::join_paths(dirs)?);
        } else {
            sh.env(var, value);
        }
    }
    run_status(
        &mut sh,
        "README's doctor command failed; on a bootstrapped machine (with or without a GPU) it must exit 0",
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_readme_doctor_block_is_the_plain_build_only_command() {
        let readme =
            std::fs::read_to_string(crate::toolchain::repo_root().join("README.md")).unwrap();
        let block = crate::consumer::block_after(&readme, super::MARKER).unwrap();
        assert!(block.contains("kiln doctor --build-only"), "{block}");
        // Nothing waived: the command users copy is the one that passes.
        assert!(!block.contains("--skip"), "{block}");
        assert!(
            !readme.contains("--skip link.driver-api"),
            "README still waives the link check"
        );
    }
}
