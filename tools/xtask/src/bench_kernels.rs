//! `cargo xtask bench-kernels`: kernels/ built three ways, side by side in one run:
//! kiln-build (per (file, target) jobs + nvlink + fatbinary), one nvcc call per source with
//! every -gencode flag, and that with `--threads 0`. Reported as ratios to kiln-build.
//! `--project DIR` benches another project's kernels the same way (its own table: matrix,
//! kernels dir, include dirs, definitions, module layout), e.g. `checks/kernel-library`.
//!
//! Like for like: both sides build the CUDA C++ sources (`kernels/*.cu` + `kernels/include/`),
//! copied into a scratch directory; the Rust kernel crate has no nvcc counterpart and is left
//! out. Three figures: a clean build, a rebuild after editing one source, a no-op rebuild.
//! nvcc has no cache: its edit figure is one call for the edited source (what a make rule would
//! rerun), its no-op figure the full build a plain build script repeats.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kiln_pins::{Pins, TargetKind};

use crate::bootstrap;
use crate::toolchain::{copy_tree, pins, repo_root, run_checked};

/// The source edited for the one-file rebuild of kiln's kernels (the largest one, the worst
/// case); for another project, its largest source.
const EDITED: &str = "softmax.cu";

#[derive(clap::Args)]
pub struct Args {
    /// Bench this project (a directory with a Cargo.toml holding a kiln table) instead of
    /// kiln's own kernels.
    #[arg(long)]
    pub project: Option<std::path::PathBuf>,
    /// Rounds; each round runs all three once, in rotating order. The median is reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    #[arg(long)]
    pub json: bool,
    /// Instead of the comparison: the scale model (a generated library of `--model-sources`
    /// sources x 6 targets; bench_model.rs).
    #[arg(long)]
    pub model: bool,
    /// Sources of the scale model's library.
    #[arg(long, default_value_t = 60)]
    pub model_sources: usize,
    /// After the rounds, one more clean build each way (kiln-build, nvcc --threads 0) with
    /// nvcc's `-time` report, and the CPU seconds per phase side by side.
    #[arg(long)]
    pub phases: bool,
}

/// Seconds of one kind of build, each way.
#[derive(Default)]
struct Times {
    kiln: Vec<Duration>,
    nvcc: Vec<Duration>,
    nvcc0: Vec<Duration>,
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure_in_process()?;
    let nvcc = layout.cuda_home().join("bin/nvcc");
    if args.model {
        return crate::bench_model::run(&nvcc, args.model_sources);
    }
    let scratch = tempfile::tempdir()?;
    let (pins, kernels) = match &args.project {
        None => {
            let kernels = scratch.path().join("kernels");
            copy_cuda_sources(&repo_root().join("kernels"), &kernels)?;
            (pins()?, kernels)
        }
        Some(dir) => {
            let root = scratch.path().join("project");
            copy_tree(dir, &root, &["target", "cache"])?;
            let pins = Pins::load(&root.join("Cargo.toml"))?;
            let kernels = root.join(&pins.kernels.dir);
            (pins, kernels)
        }
    };
    let edited = match &args.project {
        None => EDITED.to_string(),
        Some(_) => largest_source(&kernels)?,
    };
    let env_nvcc = nvcc.clone();
    let kiln = |out: &Path, cache: &Path| -> Result<kiln_build::Summary> {
        let nvcc = env_nvcc.clone();
        Ok(
            kiln_build::KernelBuild::new(pins.clone(), kernels.clone(), out.to_path_buf())
                .cache_dir(cache.to_path_buf())
                .env(move |k| match k {
                    "KILN_NVCC" => Some(nvcc.clone().into_os_string()),
                    _ => std::env::var_os(k),
                })
                .bindgen(false)
                .progress(false)
                .run()?
                .summary,
        )
    };
    let (mut clean, mut edit, mut noop) = (Times::default(), Times::default(), Times::default());
    for round in 0..args.rounds.max(1) {
        for i in 0..3 {
            let which = (i + round) % 3;
            let tmp = tempfile::tempdir()?;
            let (out, cache) = (tmp.path().join("out"), tmp.path().join("cache"));
            match which {
                0 => {
                    clean.kiln.push(timed(|| kiln(&out, &cache).map(drop))?);
                    let s = timed_with(|| kiln(&out, &cache))?;
                    anyhow::ensure!(s.1.compiled == 0, "no-op rebuild compiled {}", s.1.compiled);
                    noop.kiln.push(s.0);
                    let edited = kernels.join(&edited);
                    let original = std::fs::read(&edited)?;
                    // A real edit (a comment would leave the objects' bytes, and so the link, as
                    // they were): one more definition the compiler must see.
                    std::fs::write(
                        &edited,
                        [
                            &original[..],
                            format!("\n#define KILN_BENCH_EDIT_{round} 1\n").as_bytes(),
                        ]
                        .concat(),
                    )?;
                    let s = timed_with(|| kiln(&out, &cache));
                    std::fs::write(&edited, &original)?;
                    let s = s?;
                    let per_source = s.1.compile_jobs / s.1.sources;
                    anyhow::ensure!(
                        s.1.compiled == per_source,
                        "one-file edit compiled {} jobs, expected {per_source}",
                        s.1.compiled
                    );
                    edit.kiln.push(s.0);
                }
                _ => {
                    let t0 = which == 2;
                    let c = timed(|| monolithic(&nvcc, &pins, &kernels, tmp.path(), t0, None))?;
                    let e = timed(|| {
                        monolithic(&nvcc, &pins, &kernels, tmp.path(), t0, Some(&edited))
                    })?;
                    let (cv, ev, nv) = if t0 {
                        (&mut clean.nvcc0, &mut edit.nvcc0, &mut noop.nvcc0)
                    } else {
                        (&mut clean.nvcc, &mut edit.nvcc, &mut noop.nvcc)
                    };
                    cv.push(c);
                    ev.push(e);
                    nv.push(c);
                }
            }
        }
    }
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let rows = [("clean", clean), ("edit", edit), ("noop", noop)]
        .map(|(name, mut t)| (name, med(&mut t.kiln), med(&mut t.nvcc), med(&mut t.nvcc0)));
    if args.json {
        let mut j = serde_json::json!({"rounds": args.rounds, "cpus": cpus, "edited": edited,
            "project": args.project.as_ref().map(|p| p.display().to_string())});
        for (name, k, n, n0) in rows {
            j[name] = serde_json::json!({"kiln_build_s": k, "nvcc_gencode_s": n,
                "nvcc_gencode_threads0_s": n0, "ratio_kiln_over_nvcc": k / n,
                "ratio_kiln_over_threads0": k / n0});
        }
        println!("{j}");
    } else {
        let what = match &args.project {
            Some(p) => format!("{} [{}]", p.display(), pins.matrix),
            None => "kiln's CUDA C++ sources".to_string(),
        };
        println!(
            "kernel builds ({what}), median of {} rounds, {cpus} CPUs; ratio = kiln-build / nvcc:",
            args.rounds
        );
        println!(
            "  {:<24} {:>10} {:>22} {:>22}",
            "", "kiln-build", "nvcc all -gencode", "nvcc --threads 0"
        );
        for (name, k, n, n0) in rows {
            let label = match name {
                "clean" => "clean build".to_string(),
                "edit" => format!("edit {edited}"),
                _ => "no-op rebuild".to_string(),
            };
            println!(
                "  {label:<24} {k:>8.2} s {n:>10.2} s ({:>5.2}x) {n0:>10.2} s ({:>5.2}x)",
                k / n,
                k / n0
            );
        }
        println!("  (nvcc has no cache: its no-op figure is the full rebuild a plain build script repeats)");
    }
    if args.phases {
        let tmp = tempfile::tempdir()?;
        let (kiln_csv, nvcc_csv) = (tmp.path().join("kiln.csv"), tmp.path().join("nvcc.csv"));
        let time_flag = format!("-time {}", kiln_csv.display());
        let t = Instant::now();
        let summary =
            kiln_build::KernelBuild::new(pins.clone(), kernels.clone(), tmp.path().join("out"))
                .cache_dir(tmp.path().join("cache"))
                .env(move |k| match k {
                    "KILN_NVCC" => Some(env_nvcc.clone().into_os_string()),
                    "NVCC_APPEND_FLAGS" => Some(time_flag.clone().into()),
                    _ => std::env::var_os(k),
                })
                .bindgen(false)
                .progress(false)
                .run()?
                .summary;
        let kiln_wall = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let extra = vec!["-time".to_string(), nvcc_csv.display().to_string()];
        monolithic_with(&nvcc, &pins, &kernels, tmp.path(), true, None, &extra)?;
        let nvcc_wall = t.elapsed().as_secs_f64();
        let (k, n) = (phase_seconds(&kiln_csv)?, phase_seconds(&nvcc_csv)?);
        let compiled = summary.job_seconds.get("compiled").copied().unwrap_or(0.0);
        let in_nvcc: f64 = k.values().sum();
        println!(
            "phases of one clean build, CPU seconds summed over jobs (nvcc -time), {cpus} CPUs:"
        );
        println!(
            "  {:<34} {:>10} {:>16}",
            "", "kiln-build", "nvcc --threads 0"
        );
        let names: std::collections::BTreeSet<&String> = k.keys().chain(n.keys()).collect();
        for name in names {
            println!(
                "  {name:<34} {:>8.2} s {:>14.2} s",
                k.get(name).copied().unwrap_or(0.0),
                n.get(name).copied().unwrap_or(0.0)
            );
        }
        println!(
            "  {:<34} {:>8.2} s {:>14}",
            "nvcc processes outside its phases",
            (compiled - in_nvcc).max(0.0),
            "-"
        );
        for (verb, label) in [
            ("assembled", "ptxas (+PTX SASS from PTX)"),
            ("linked", "nvlink (one module per target)"),
            ("ptxas", "ptxas (Rust kernels)"),
            ("merged", "PTX merge (Rust kernels)"),
            ("describe+combine", "manifest + fatbinary"),
        ] {
            if let Some(s) = summary.job_seconds.get(verb) {
                println!("  {label:<34} {s:>8.2} s {:>14}", "-");
            }
        }
        println!("  {:<34} {kiln_wall:>8.2} s {nvcc_wall:>14.2} s", "wall");
    }
    Ok(())
}

/// nvcc's `-time` CSV summed per phase, in seconds ("gcc (preprocessing 1)" -> "preprocessing").
fn phase_seconds(csv: &Path) -> Result<std::collections::BTreeMap<String, f64>> {
    let text =
        std::fs::read_to_string(csv).with_context(|| format!("reading {}", csv.display()))?;
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        // Lines of parallel jobs can interleave: take only well-formed ones.
        if cols.len() < 8 || cols[7] != "ms" {
            continue;
        }
        let Ok(ms) = cols[6].parse::<f64>() else {
            continue;
        };
        let phase = if cols[1].starts_with("gcc (preprocessing") {
            "preprocessing".to_string()
        } else if cols[1].is_empty() {
            "(unnamed by nvcc)".to_string()
        } else {
            cols[1].to_string()
        };
        *out.entry(phase).or_default() += ms / 1000.0;
    }
    Ok(out)
}

fn med(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

fn timed(f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

fn timed_with<T>(f: impl FnOnce() -> Result<T>) -> Result<(Duration, T)> {
    let t = Instant::now();
    let v = f()?;
    Ok((t.elapsed(), v))
}

/// `*.cu` and `include/` of `from` into `to` (no Rust crate).
fn copy_cuda_sources(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to.join("include"))?;
    for dir in ["", "include"] {
        for e in std::fs::read_dir(from.join(dir))
            .with_context(|| format!("reading {}", from.display()))?
        {
            let p = e?.path();
            if p.is_file() {
                std::fs::copy(&p, to.join(dir).join(p.file_name().unwrap()))?;
            }
        }
    }
    Ok(())
}

/// The largest `.cu` in `kernels` (the worst one-file edit).
fn largest_source(kernels: &Path) -> Result<String> {
    let mut best: Option<(u64, String)> = None;
    for e in std::fs::read_dir(kernels)?.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "cu") {
            let len = e.metadata()?.len();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if best.as_ref().is_none_or(|(l, _)| len > *l) {
                best = Some((len, name));
            }
        }
    }
    best.map(|(_, n)| n).context("no .cu source to edit")
}

/// One nvcc call per source with every target's -gencode, the way most build scripts do it
/// (`only`: just that source, the rerun after an edit).
fn monolithic(
    nvcc: &Path,
    pins: &Pins,
    kernels: &Path,
    out: &Path,
    threads0: bool,
    only: Option<&str>,
) -> Result<()> {
    monolithic_with(nvcc, pins, kernels, out, threads0, only, &[])
}

fn monolithic_with(
    nvcc: &Path,
    pins: &Pins,
    kernels: &Path,
    out: &Path,
    threads0: bool,
    only: Option<&str>,
    extra: &[String],
) -> Result<()> {
    let mut sources: Vec<_> = std::fs::read_dir(kernels)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .filter(|p| only.is_none_or(|o| p.file_name().is_some_and(|n| n == o)))
        .collect();
    sources.sort();
    for (i, src) in sources.iter().enumerate() {
        let mut cmd = Command::new(nvcc);
        cmd.args(["-std=c++17", "-O3", "-fatbin"])
            .arg(format!("-I{}", kernels.join("include").display()));
        // The project's own flags, as kiln-build passes them.
        let k = &pins.kernels;
        for d in &k.include_dirs {
            cmd.arg(format!("-I{}", pins.root().join(d).display()));
        }
        cmd.args(k.defines.iter().map(|d| format!("-D{d}")));
        cmd.args(&k.nvcc_flags);
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
        cmd.args(extra);
        cmd.arg("-o").arg(out.join(format!("{i}.fatbin"))).arg(src);
        run_checked(&mut cmd)?;
    }
    Ok(())
}
