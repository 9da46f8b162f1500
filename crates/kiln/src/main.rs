//! `kiln`: the command line. Each subcommand lives in `commands/<name>.rs` and returns its
//! exit code: 0 clean, 1 findings, 2 could not run.

mod commands;

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
    /// Post-process a wheel maturin built: Requires-Dist and SBOM from the pins (`finalize`).
    Wheel(commands::wheel::Args),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Audit(args) => commands::audit::run(args),
        Command::Doctor(args) => commands::doctor::run(args),
        Command::Wheel(args) => commands::wheel::run(args),
        Command::Bootstrap(args) => commands::bootstrap::run(args),
    };
    std::process::exit(code);
}
