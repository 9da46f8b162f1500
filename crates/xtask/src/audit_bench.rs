//! `cargo xtask bench-audit`: real CUDA wheels from PyPI (cached under target/audit-bench),
//! timed side by side in one run: `kiln audit`, unzip + `cuobjdump --list-elf` over every
//! shared library, and `auditwheel show`. Reported as ratios to kiln, with what each reported.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::bootstrap;
use crate::toolchain::{repo_root, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// Wheels to fetch with pip (exact pins; cached under target/audit-bench/wheels).
    #[arg(long = "wheel", default_values_t = [
        "cupy-cuda13x==14.2.0".to_string(),
        "nvidia-nccl-cu13==2.30.7".to_string(),
        "jax-cuda13-plugin==0.10.2".to_string(),
    ])]
    pub wheels: Vec<String>,
    /// Python version whose wheels are fetched.
    #[arg(long, default_value = "3.12")]
    pub python_version: String,
    /// Rounds per tool and wheel, order rotating; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

struct Row {
    wheel: String,
    size: u64,
    kiln: Duration,
    kiln_headers: Duration,
    kiln_report: String,
    cuobjdump: Duration,
    cuobjdump_report: String,
    auditwheel: Duration,
    auditwheel_report: String,
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure()?;
    let dir = repo_root().join("target/audit-bench");
    let wheels = fetch(&dir.join("wheels"), &args)?;
    let kiln = build_kiln(&layout)?;
    let cuobjdump = layout.cuda_tools_bin().join("cuobjdump");
    let auditwheel = layout.py_site().join("bin/auditwheel");
    if !auditwheel.exists() {
        bail!("auditwheel missing at {}: add it to [workspace.metadata.kiln.test-tools] and run `cargo xtask bootstrap`", auditwheel.display());
    }
    let mut rows = Vec::new();
    for w in &wheels {
        let name = w
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        eprintln!("timing {name}");
        let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        let mut reports = [String::new(), String::new(), String::new(), String::new()];
        for round in 0..args.rounds.max(1) {
            for i in 0..4 {
                let which = (i + round) % 4;
                let start = Instant::now();
                reports[which] = match which {
                    0 => run_kiln(&kiln, w, false)?,
                    1 => run_cuobjdump(&cuobjdump, w, &dir.join("unzipped"))?,
                    2 => run_auditwheel(&layout, &auditwheel, w)?,
                    _ => run_kiln(&kiln, w, true)?,
                };
                t[which].push(start.elapsed());
            }
        }
        let [k, c, a, kh] = t.map(median);
        let [kr, cr, ar, _] = reports;
        rows.push(Row {
            wheel: name,
            size: std::fs::metadata(w)?.len(),
            kiln: k,
            kiln_headers: kh,
            kiln_report: kr,
            cuobjdump: c,
            cuobjdump_report: cr,
            auditwheel: a,
            auditwheel_report: ar,
        });
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "\nbench-audit: median of {} rounds, {cores} cores; ratio = tool time / kiln time",
        args.rounds.max(1)
    );
    println!("(kiln: full audit with kernel listing; kiln-hdr: --no-kernels, fatbin headers only — still every ELF, every entry, RECORD)");
    println!(
        "{:<58} {:>6} {:>7} {:>9} {:>12} {:>7} {:>13} {:>7}",
        "wheel", "MB", "kiln s", "kiln-hdr s", "cuobjdump s", "ratio", "auditwheel s", "ratio"
    );
    for r in &rows {
        println!(
            "{:<58} {:>6.1} {:>7.2} {:>9.2} {:>12.2} {:>6.1}x {:>13.2} {:>6.1}x",
            r.wheel,
            r.size as f64 / 1e6,
            r.kiln.as_secs_f64(),
            r.kiln_headers.as_secs_f64(),
            r.cuobjdump.as_secs_f64(),
            r.cuobjdump.as_secs_f64() / r.kiln.as_secs_f64(),
            r.auditwheel.as_secs_f64(),
            r.auditwheel.as_secs_f64() / r.kiln.as_secs_f64()
        );
    }
    println!("\nwhat each reported:");
    for r in &rows {
        println!(
            "  {}\n    kiln:       {}\n    cuobjdump:  {}\n    auditwheel: {}",
            r.wheel, r.kiln_report, r.cuobjdump_report, r.auditwheel_report
        );
    }
    Ok(())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// pip download of the pinned wheels (no deps, binary only); pip skips files already there.
fn fetch(dir: &Path, args: &Args) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = Command::new("python3");
    cmd.args([
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        &args.python_version,
        "--dest",
    ])
    .arg(dir);
    // manylinux wheels are tagged with the oldest glibc they support: accept 2.17 .. 2.28.
    cmd.args(["--platform", "manylinux2014_x86_64"]);
    for minor in 17..=28 {
        cmd.arg("--platform")
            .arg(format!("manylinux_2_{minor}_x86_64"));
    }
    cmd.args(&args.wheels);
    let out = cmd.output().context("running pip download")?;
    if !out.status.success() {
        bail!(
            "pip download failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut found = Vec::new();
    for spec in &args.wheels {
        let (name, version) = spec
            .split_once("==")
            .context("--wheel takes NAME==VERSION")?;
        let prefix = format!("{}-{version}-", name.replace('-', "_"));
        let hit = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name().is_some_and(|n| {
                    n.to_string_lossy()
                        .to_lowercase()
                        .starts_with(&prefix.to_lowercase())
                })
            });
        found.push(hit.with_context(|| {
            format!("pip did not leave a wheel for {spec} in {}", dir.display())
        })?);
    }
    Ok(found)
}

fn build_kiln(layout: &Layout) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(repo_root()).args([
        "build",
        "--release",
        "-q",
        "-p",
        "kiln",
        "--message-format=json",
    ]);
    layout.apply(&mut cmd);
    let out = cmd.output().context("cargo build --release -p kiln")?;
    if !out.status.success() {
        bail!(
            "building kiln failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact" && v["target"]["name"] == "kiln" {
            if let Some(exe) = v["executable"].as_str() {
                return Ok(PathBuf::from(exe));
            }
        }
    }
    bail!("cargo did not report the kiln executable")
}

fn run_kiln(kiln: &Path, wheel: &Path, headers_only: bool) -> Result<String> {
    let mut cmd = Command::new(kiln);
    cmd.arg("audit").arg(wheel).arg("--json");
    if headers_only {
        cmd.arg("--no-kernels");
    }
    let out = cmd.output()?;
    if out.status.code() == Some(2) {
        bail!(
            "kiln audit could not read {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("kiln audit --json")?;
    let c = &v["counts"];
    let resolved = v["linkage"].as_array().map(|a| a.len()).unwrap_or(0);
    Ok(format!(
        "{} ELF, {} with device code, {} containers, {} cubins + {} PTX with exact targets, {} kernels, {} NEEDED/dlopen resolutions, {} findings, RECORD verified",
        c["binaries"], c["binaries_with_device_code"], c["fatbin_containers"], c["cubins"], c["ptx"], c["kernels"], resolved,
        v["findings"].as_array().map(|a| a.len()).unwrap_or(0)
    ))
}

/// The manual route: unzip, then `cuobjdump --list-elf` on every shared library, on every core.
fn run_cuobjdump(cuobjdump: &Path, wheel: &Path, scratch: &Path) -> Result<String> {
    if scratch.exists() {
        std::fs::remove_dir_all(scratch)?;
    }
    std::fs::create_dir_all(scratch)?;
    let status = Command::new("unzip")
        .args(["-q", "-o"])
        .arg(wheel)
        .arg("-d")
        .arg(scratch)
        .status()
        .context("running unzip")?;
    if !status.success() {
        bail!("unzip {} failed", wheel.display());
    }
    let mut libs = Vec::new();
    let mut stack = vec![scratch.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.ends_with(".so") || n.contains(".so.")
            }) {
                libs.push(p);
            }
        }
    }
    let next = AtomicUsize::new(0);
    let elf_lines = AtomicUsize::new(0);
    let failures = Mutex::new(0usize);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(lib) = libs.get(i) else { break };
                match Command::new(cuobjdump).arg("--list-elf").arg(lib).output() {
                    Ok(o) => {
                        let n = String::from_utf8_lossy(&o.stdout)
                            .lines()
                            .filter(|l| l.starts_with("ELF file"))
                            .count();
                        elf_lines.fetch_add(n, Ordering::Relaxed);
                        if !o.status.success()
                            && n == 0
                            && !String::from_utf8_lossy(&o.stderr)
                                .contains("does not contain device code")
                        {
                            *failures.lock().unwrap() += 1;
                        }
                    }
                    Err(_) => *failures.lock().unwrap() += 1,
                }
            });
        }
    });
    std::fs::remove_dir_all(scratch)?;
    Ok(format!(
        "{} shared libraries, {} cubins listed (no PTX, no kernels, `f` suffix lost), {} cuobjdump failures",
        libs.len(),
        elf_lines.load(Ordering::Relaxed),
        failures.into_inner().unwrap()
    ))
}

fn run_auditwheel(layout: &Layout, auditwheel: &Path, wheel: &Path) -> Result<String> {
    let mut cmd = Command::new(auditwheel);
    layout.apply(&mut cmd);
    let out = cmd
        .arg("show")
        .arg(wheel)
        .output()
        .context("running auditwheel show")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text
        .split("\n\n")
        .find(|p| p.contains("is consistent") || p.contains("platform tag"))
        .unwrap_or("")
        .replace('\n', " ");
    Ok(format!(
        "exit {}: {}",
        out.status.code().unwrap_or(-1),
        first.chars().take(160).collect::<String>()
    ))
}
