//! `cargo xtask kernels`: the main job for now — build kernels/ for the whole matrix with
//! live progress, print what each target holds, then build the kiln-kernels crate (which
//! reuses every compiled job from the shared cache).

use anyhow::{Context, Result};

use crate::bootstrap;
use crate::toolchain::{pins, repo_root, run_checked};

#[derive(clap::Args)]
pub struct Args {
    /// Print the manifest as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print every job (inputs, command, output) as JSON and run nothing; an
    /// external executor runs them (checks/plan/run_plan.py is the minimal one) and a later
    /// `cargo xtask kernels --cache-dir DIR` combines their outputs. C++ and Rust kernels.
    #[arg(long)]
    pub emit_plan: bool,
    /// The kernel directory (default: the checkout's kernels/).
    #[arg(long)]
    pub kernels_dir: Option<std::path::PathBuf>,
    /// The job cache (default: target/kiln-kernel-cache); a plan's outputs belong there.
    #[arg(long)]
    pub cache_dir: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure_in_process()?;
    let pins = pins()?;
    let root = repo_root();
    let target_dir = root.join("target");
    let out_dir = target_dir.join("kiln-kernels");
    let kernels = args.kernels_dir.unwrap_or_else(|| root.join("kernels"));
    let custom = kernels != root.join("kernels");
    let build = kiln_build::KernelBuild::new(pins, kernels, out_dir)
        .cache_dir(
            args.cache_dir
                .unwrap_or_else(|| target_dir.join("kiln-kernel-cache")),
        )
        .bindgen(false);
    if args.emit_plan {
        println!("{}", build.plan()?.to_json());
        return Ok(());
    }
    let build = build.run()?;
    if args.json {
        println!("{}", build.manifest.to_json());
    } else {
        println!("{:<12} {:<6} {:>7}  kernels", "target", "kind", "count");
        for t in &build.manifest.targets {
            let isa = t
                .ptx_isa
                .as_deref()
                .map(|v| format!(" (PTX ISA {v})"))
                .unwrap_or_default();
            println!(
                "{:<12} {:<6} {:>7}  {}{isa}",
                t.target,
                t.kind,
                t.kernels.len(),
                t.kernels.join(" ")
            );
        }
        println!(
            "fatbin: {} ({} bytes)",
            build.fatbin.display(),
            build.summary.fatbin_bytes
        );
    }
    if custom {
        // The kiln-kernels crate embeds the checkout's kernels/, not this directory's.
        return Ok(());
    }
    let mut cargo = crate::toolchain::cargo();
    cargo
        .current_dir(&root)
        .args(["build", "--release", "-p", "kiln-kernels"]);
    layout.apply(&mut cargo);
    run_checked(&mut cargo).context("building the kiln-kernels crate")?;
    eprintln!("kiln-kernels crate built (target/release)");
    Ok(())
}
