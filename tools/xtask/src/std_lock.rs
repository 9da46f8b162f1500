//! `cargo xtask std-lock`: the committed standard-library lockfile of the pinned nightly
//! (nix/std-lock/<date>.Cargo.lock, read by the flake instead of the toolchain's copy, which
//! would be import-from-derivation) against the rust-src of that nightly, where one is
//! installed: `--check` compares, `--write` copies. Nix users get the same comparison at build
//! time (checks.<system>.std-lock).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::nix_check::workspace_root;

#[derive(clap::Args)]
pub struct Args {
    /// Copy the toolchain's lockfile over the committed one instead of comparing.
    #[arg(long)]
    pub write: bool,
    /// The nightly's sysroot (`rustc --print sysroot`); by default rustup's
    /// `nightly-<rust-nightly>` toolchain.
    #[arg(long)]
    pub sysroot: Option<PathBuf>,
}

fn pinned_nightly(ws: &Path) -> Result<String> {
    let text = std::fs::read_to_string(ws.join("Cargo.toml"))?;
    let doc: toml::Table = toml::from_str(&text).context("Cargo.toml")?;
    doc.get("workspace")
        .and_then(|w| w.get("metadata"))
        .and_then(|m| m.get("kiln"))
        .and_then(|k| k.get("toolchain"))
        .and_then(|t| t.get("rust-nightly"))
        .and_then(|n| n.as_str())
        .map(String::from)
        .context("Cargo.toml [workspace.metadata.kiln.toolchain] has no rust-nightly")
}

pub fn run(args: Args) -> Result<()> {
    let ws = workspace_root();
    let nightly = pinned_nightly(&ws)?;
    let committed = ws.join(format!("nix/std-lock/{nightly}.Cargo.lock"));
    let sysroot = match args.sysroot {
        Some(s) => s,
        None => {
            let out = Command::new("rustup")
                .args([
                    "run",
                    &format!("nightly-{nightly}"),
                    "rustc",
                    "--print",
                    "sysroot",
                ])
                .output()
                .context("running rustup")?;
            if !out.status.success() {
                bail!(
                    "no nightly-{nightly} toolchain here (rustup toolchain install nightly-{nightly} \
                     --component rust-src, or --sysroot DIR): {}",
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .trim()
                );
            }
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
    };
    let of_toolchain = sysroot.join("lib/rustlib/src/rust/library/Cargo.lock");
    let theirs = std::fs::read(&of_toolchain).with_context(|| {
        format!(
            "{} (the nightly needs the rust-src component)",
            of_toolchain.display()
        )
    })?;
    if args.write {
        std::fs::write(&committed, &theirs)?;
        eprintln!(
            "std-lock: wrote {} from {}",
            committed.display(),
            of_toolchain.display()
        );
        return Ok(());
    }
    let ours = std::fs::read(&committed).with_context(|| {
        format!(
            "{} (no committed lock for this nightly)",
            committed.display()
        )
    })?;
    if ours != theirs {
        bail!(
            "{} is not {} (cargo xtask std-lock --write)",
            committed.display(),
            of_toolchain.display()
        );
    }
    eprintln!("std-lock: {} is the nightly's own", committed.display());
    Ok(())
}
