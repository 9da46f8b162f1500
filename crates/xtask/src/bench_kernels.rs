//! `cargo xtask bench-kernels`: a clean build of kernels/ three ways, side by side in one run:
//! kiln-build (per (file, target) jobs + nvlink + fatbinary), one nvcc call per source with
//! every -gencode flag, and that with `--threads 0`. Reported as ratios to kiln-build.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Result;
use kiln_pins::{Pins, TargetKind};

use crate::bootstrap;
use crate::toolchain::{pins, repo_root, run_checked};

#[derive(clap::Args)]
pub struct Args {
    /// Rounds; each round runs all three once, in rotating order. The median is reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure_in_process()?;
    let pins = pins()?;
    let kernels = repo_root().join("kernels");
    let nvcc = layout.cuda_home().join("bin/nvcc");
    let mut times: [Vec<Duration>; 3] = Default::default();
    for round in 0..args.rounds.max(1) {
        for i in 0..3 {
            let which = (i + round) % 3;
            let tmp = tempfile::tempdir()?;
            let t = Instant::now();
            match which {
                0 => {
                    kiln_build::KernelBuild::new(
                        pins.clone(),
                        kernels.clone(),
                        tmp.path().join("out"),
                    )
                    .bindgen(false)
                    .progress(false)
                    .run()?;
                }
                1 => monolithic(&nvcc, &pins, &kernels, tmp.path(), false)?,
                _ => monolithic(&nvcc, &pins, &kernels, tmp.path(), true)?,
            }
            times[which].push(t.elapsed());
        }
    }
    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64()
    };
    let (k, n, n0) = (med(&mut times[0]), med(&mut times[1]), med(&mut times[2]));
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if args.json {
        println!(
            "{}",
            serde_json::json!({"rounds": args.rounds, "cpus": cpus, "kiln_build_s": k, "nvcc_gencode_s": n,
                "nvcc_gencode_threads0_s": n0, "ratio_nvcc_over_kiln": n / k, "ratio_threads0_over_kiln": n0 / k})
        );
    } else {
        println!(
            "clean kernel build, median of {} rounds, {cpus} CPUs:",
            args.rounds
        );
        println!("  kiln-build (jobs + nvlink + fatbinary)  {k:>7.2} s  1.00x");
        println!(
            "  nvcc, all -gencode in one call          {n:>7.2} s  {:.2}x kiln-build",
            n / k
        );
        println!(
            "  nvcc, all -gencode, --threads 0         {n0:>7.2} s  {:.2}x kiln-build",
            n0 / k
        );
    }
    Ok(())
}

/// One nvcc call per source with every target's -gencode, the way most build scripts do it.
fn monolithic(nvcc: &Path, pins: &Pins, kernels: &Path, out: &Path, threads0: bool) -> Result<()> {
    let mut sources: Vec<_> = std::fs::read_dir(kernels)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();
    for (i, src) in sources.iter().enumerate() {
        let mut cmd = Command::new(nvcc);
        cmd.args(["-std=c++17", "-O3", "-fatbin"])
            .arg(format!("-I{}", kernels.join("include").display()));
        for t in pins.matrix.targets() {
            let a = t.arch;
            let code = match t.kind {
                TargetKind::Sass => a.sm(),
                TargetKind::Ptx => a.compute(),
            };
            cmd.arg("-gencode")
                .arg(format!("arch={},code={code}", a.compute()));
        }
        if threads0 {
            cmd.args(["--threads", "0"]);
        }
        cmd.arg("-o").arg(out.join(format!("{i}.fatbin"))).arg(src);
        run_checked(&mut cmd)?;
    }
    Ok(())
}
