//! `cargo xtask test`: every test, with the pinned toolchain bootstrapped first.

use std::process::Command;

use anyhow::{bail, Result};

use crate::bootstrap;
use crate::toolchain::repo_root;

#[derive(clap::Args)]
pub struct Args {
    /// Extra arguments for `cargo test`.
    #[arg(trailing_var_arg = true)]
    pub cargo_args: Vec<String>,
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure()?;
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(repo_root()).args(["test", "--workspace"]).args(&args.cargo_args);
    layout.apply(&mut cargo);
    eprintln!("running: cargo test --workspace {}", args.cargo_args.join(" "));
    let status = cargo.status()?;
    if !status.success() {
        bail!("cargo test failed ({status})");
    }
    Ok(())
}
