//! `cargo xtask kernels`: the main job for now — build kernels/ for the whole matrix with
//! live progress, print what each target holds, then build the kiln-kernels crate (which
//! reuses every compiled job from the shared cache).

use std::process::Command;

use anyhow::{Context, Result};

use crate::bootstrap;
use crate::toolchain::{pins, repo_root, run_checked};

#[derive(clap::Args)]
pub struct Args {
    /// Print the manifest as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure_in_process()?;
    let pins = pins()?;
    let root = repo_root();
    let target_dir = root.join("target");
    let out_dir = target_dir.join("kiln-kernels");
    let build = kiln_build::KernelBuild::new(pins, root.join("kernels"), out_dir)
        .cache_dir(target_dir.join("kiln-kernel-cache"))
        .bindgen(false)
        .run()?;
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
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(&root)
        .args(["build", "--release", "-p", "kiln-kernels"]);
    layout.apply(&mut cargo);
    run_checked(&mut cargo).context("building the kiln-kernels crate")?;
    eprintln!("kiln-kernels crate built (target/release)");
    Ok(())
}
