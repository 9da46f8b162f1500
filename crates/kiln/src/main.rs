//! `kiln`: the command line. Each subcommand lives in `commands/<name>.rs`; its `run` returns
//! the exit code of a run that completed (0 clean, 1 findings) or the error that stopped it,
//! which `main` prints — the one error path — and exits 2 for.

mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kiln",
    version,
    about = "Reproducible Rust+CUDA toolchain: audit artifacts, check the machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prove what a wheel, shared library or directory contains (linkage, device code, metadata).
    Audit(commands::audit::Args),
    /// Check the machine before a long build: toolchain, driver and GPUs, loader traps, link preflight.
    Doctor(commands::doctor::Args),
    /// Install the pinned toolchain (CUDA, libclang, maturin) for this project, without Nix or a kiln checkout.
    Bootstrap(commands::bootstrap::Args),
    /// Wheels: post-process one maturin built (`finalize`: Requires-Dist and SBOM from the pins);
    /// compare two member by member (`diff`).
    Wheel(commands::wheel::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (name, result) = run(cli.command);
    match result {
        Ok(code) => code,
        Err(err) => {
            // `{:#}`: the context chain on one line, "writing the report: Broken pipe".
            eprintln!("kiln {name}: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs one subcommand; returns its name (the error prefix) and its outcome.
fn run(command: Command) -> (&'static str, anyhow::Result<ExitCode>) {
    match command {
        Command::Audit(args) => ("audit", commands::audit::run(args)),
        Command::Doctor(args) => ("doctor", commands::doctor::run(args)),
        Command::Wheel(args) => commands::wheel::run(args),
        Command::Bootstrap(args) => ("bootstrap", commands::bootstrap::run(args)),
    }
}
