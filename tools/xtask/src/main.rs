//! `cargo xtask <command>`: everything that is not a plain cargo command.

mod audit_bench;
mod audit_fixture;
mod audit_mutations;
mod bench_kernels;
mod bench_model;
mod bootstrap;
mod cli_wheel;
mod consumer;
mod gpu_bundle;
mod image;
mod kernels;
mod nix_check;
mod packaged;
mod readme_doctor;
mod repro;
mod sandbox;
mod test;
mod toolchain;
mod wheel;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "kiln's build, check and bootstrap tasks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install the pinned toolchain (CUDA, libclang, maturin, cuobjdump) into .toolchain/ without Nix.
    Bootstrap(bootstrap::Args),
    /// Build the kernels for the whole arch matrix and print the per-target summary.
    Kernels(kernels::Args),
    /// Time kiln-build against one nvcc call with every -gencode flag (and with --threads 0).
    BenchKernels(bench_kernels::Args),
    /// Run every test: bootstrap, then the workspace tests with the pinned toolchain.
    Test(test::Args),
    /// Damage a good wheel in 19 ways with real tools; each must be caught by its own audit rule.
    AuditMutations(audit_mutations::Args),
    /// Time `kiln audit` against unzip + cuobjdump and `auditwheel show` on real CUDA wheels.
    BenchAudit(audit_bench::Args),
    /// One route of bench-audit, run as its own process (internal).
    #[command(hide = true)]
    BenchAuditRoute(audit_bench::RouteArgs),
    /// Build the `kiln` wheel (maturin, Requires-Dist from the pins), audit it with `kiln audit`.
    Wheel(wheel::Args),
    /// The `kiln` CLI as a pip-installable wheel (kiln-cuda-cli, manylinux_2_28): built, installed
    /// into a fresh venv, `kiln audit --json` run from there on WHEEL, checked against the schema.
    CliWheel(cli_wheel::Args),
    /// Make the GPU bundle: the wheel, the Rust GPU tests and benchmarks, `kiln`, and run.sh.
    GpuBundle(gpu_bundle::Args),
    /// Build the wheel twice from clean target directories and require identical bytes.
    Repro(repro::Args),
    /// Check the flake offline: parse, fmt, deadnix, lock, facts, eval against the test doubles.
    NixCheck(nix_check::Args),
    /// The flake's test and wheel commands without Nix, as its sandbox runs them: the flake's
    /// source set, HOME unwritable, cargo offline, CUDA from the environment.
    Sandbox(sandbox::Args),
    /// kiln used by another project: README's build-dependency route run as written on a fresh
    /// copy of checks/consumer (its own matrix, its wheel audited clean), then a deliberate break.
    Consumer(consumer::Args),
    /// README's `kiln doctor` command, read from README.md and run as written (`kiln` = this
    /// checkout's build); it must exit 0 on a bootstrapped machine, GPU or not.
    ReadmeDoctor,
    /// kiln's container image without Nix: a debootstrap base, Python, the wheel and its runtime
    /// wheels, the CLI, no libcuda; loaded into Docker and checked without a GPU (`--consumer`:
    /// checks/consumer's kernels built in a container with no driver, the cache on a volume).
    Image(image::Args),
    /// kiln as the crates registry would serve it: `cargo package` of every published crate,
    /// then checks/consumer and the `kiln` CLI built from the unpacked `.crate` files.
    Packaged(packaged::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bootstrap(args) => bootstrap::run(args).map(|_| ()),
        Command::Kernels(args) => kernels::run(args),
        Command::BenchKernels(args) => bench_kernels::run(args),
        Command::Test(args) => test::run(args),
        Command::AuditMutations(args) => audit_mutations::run(args),
        Command::BenchAudit(args) => audit_bench::run(args),
        Command::BenchAuditRoute(args) => audit_bench::route(args),
        Command::NixCheck(args) => nix_check::run(args),
        Command::Repro(args) => repro::run(args),
        Command::Wheel(args) => wheel::run(args),
        Command::CliWheel(args) => {
            bootstrap::ensure().and_then(|layout| cli_wheel::run(args, &layout))
        }
        Command::GpuBundle(args) => gpu_bundle::run(args),
        Command::Consumer(args) => {
            bootstrap::ensure().and_then(|layout| consumer::run(args, &layout))
        }
        Command::ReadmeDoctor => bootstrap::ensure().and_then(|layout| readme_doctor::run(&layout)),
        Command::Packaged(args) => {
            bootstrap::ensure().and_then(|layout| packaged::run(args, &layout))
        }
        Command::Image(args) => bootstrap::ensure().and_then(|layout| image::run(args, &layout)),
        Command::Sandbox(args) => {
            bootstrap::ensure().and_then(|layout| sandbox::run(args, &layout))
        }
    };
    if let Err(err) = result {
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}
