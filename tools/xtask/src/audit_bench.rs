//! `cargo xtask bench-audit`: real CUDA wheels from PyPI (cached under target/audit-bench),
//! timed side by side in one run, each tool a child process with its wall time and peak RSS:
//! `kiln audit`, the floor (inflate + SHA-256 of every member on every core), unzip +
//! `cuobjdump --list-elf` over every shared library, and `auditwheel show`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::bootstrap;
use crate::toolchain::{cargo_build, repo_root, run_status, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// Wheels to fetch with pip (exact pins; cached under target/audit-bench/wheels).
    #[arg(long = "wheel", default_values_t = [
        "cupy-cuda13x==14.2.0".to_string(),
        "nvidia-nccl-cu13==2.30.7".to_string(),
        "jax-cuda13-plugin==0.10.2".to_string(),
        "nvidia-cudnn-cu13==9.22.0.52".to_string(),
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
    kiln: Measured,
    kiln_headers: Measured,
    kiln_report: String,
    floor: Measured,
    floor_report: String,
    decode: Measured,
    decode_report: String,
    cuobjdump: Measured,
    cuobjdump_report: String,
    auditwheel: Measured,
    auditwheel_report: String,
}

/// Median wall time and the largest peak RSS over the rounds of one tool.
#[derive(Clone, Copy, Default)]
struct Measured {
    wall: Duration,
    rss_kib: u64,
}

impl Measured {
    fn of(runs: &[(Duration, u64)]) -> Measured {
        let mut walls: Vec<Duration> = runs.iter().map(|r| r.0).collect();
        walls.sort();
        Measured {
            wall: walls[walls.len() / 2],
            rss_kib: runs.iter().map(|r| r.1).max().unwrap_or(0),
        }
    }
    fn secs(&self) -> f64 {
        self.wall.as_secs_f64()
    }
    fn mb(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }
}

/// The hidden routes `bench-audit` runs as child processes, so that each gets its own wall
/// time and peak RSS (wait4's ru_maxrss covers the route's own children too).
#[derive(clap::Args)]
pub struct RouteArgs {
    /// floor: inflate every member and SHA-256 it, on every core (what RECORD verification
    /// cannot skip). decode: the floor, then every `.nv_fatbin` entry of every ELF decoded, on
    /// every core (what listing kernels cannot skip). cuobjdump: unzip, then
    /// `cuobjdump --list-elf` on every shared library.
    /// measure: run the command after `--` and write "<wall ns> <peak RSS KiB> <exit>" to
    /// --report; a child forked from this small process carries no large parent's RSS into
    /// its ru_maxrss (Linux copies the parent's high-water mark into the child at fork).
    #[arg(value_parser = ["floor", "decode", "cuobjdump", "measure"])]
    pub route: String,
    /// The wheel (floor, decode, cuobjdump).
    pub wheel: Option<PathBuf>,
    /// Scratch directory for the unzip of the cuobjdump route.
    #[arg(long)]
    pub scratch: Option<PathBuf>,
    /// Where `measure` writes its numbers.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The command `measure` runs.
    #[arg(last = true)]
    pub command: Vec<String>,
}

pub fn route(args: RouteArgs) -> Result<()> {
    if args.route == "measure" {
        let (program, rest) = args
            .command
            .split_first()
            .context("measure needs -- COMMAND")?;
        let report = args.report.context("measure needs --report")?;
        let (wall, rss, code) = wait_measured(Command::new(program).args(rest))?;
        std::fs::write(
            report,
            format!("{} {rss} {}", wall.as_nanos(), code.unwrap_or(-1)),
        )?;
        return Ok(());
    }
    let wheel = args.wheel.context("the route needs a wheel")?;
    let report = match args.route.as_str() {
        "floor" => inflate_and_hash(&wheel, false)?.0,
        "decode" => inflate_hash_and_decode(&wheel)?,
        _ => {
            let layout = bootstrap::ensure()?;
            let scratch = args
                .scratch
                .context("--scratch is required for cuobjdump")?;
            run_cuobjdump(&layout.cuda_tools_bin().join("cuobjdump"), &wheel, &scratch)?
        }
    };
    println!("{report}");
    Ok(())
}

/// Spawns `cmd` (stdio inherited) and waits: wall time, peak RSS in KiB of it and its
/// waited-for descendants, exit code.
fn wait_measured(cmd: &mut Command) -> Result<(Duration, u64, Option<i32>)> {
    let start = Instant::now();
    let child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child; status and usage are valid for writes.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Ok((start.elapsed(), usage.ru_maxrss as u64, code))
}

/// Runs `cmd` through the `measure` route of `xtask` (release), stdout into a file (a pipe
/// could fill): wall time, peak RSS in KiB, exit code, and the stdout file's path.
fn measure(
    xtask: &Path,
    cmd: &Command,
    scratch: &Path,
) -> Result<(Duration, u64, Option<i32>, PathBuf)> {
    std::fs::create_dir_all(scratch)?;
    let out_path = scratch.join("stdout");
    let report = scratch.join("measured");
    let mut launcher = Command::new(xtask);
    launcher
        .args(["bench-audit-route", "measure", "--report"])
        .arg(&report)
        .arg("--")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::process::Stdio::inherit());
    let status = launcher.status().context("running the measure route")?;
    if !status.success() {
        bail!("measuring {cmd:?} failed");
    }
    // Untimed: flush what this tool wrote (the route unzips ~900 MB for cuDNN, kiln writes a
    // 64 MB report), so that its writeback does not run during the next tool's measurement.
    Command::new("sync").status().context("running sync")?;
    let text = std::fs::read_to_string(&report)?;
    let mut it = text.split_whitespace().map(|w| w.parse::<i64>());
    let (Some(Ok(ns)), Some(Ok(rss)), Some(Ok(code))) = (it.next(), it.next(), it.next()) else {
        bail!("bad measure report {text:?}");
    };
    let code = (code >= 0).then_some(code as i32);
    Ok((Duration::from_nanos(ns as u64), rss as u64, code, out_path))
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure()?;
    let dir = repo_root().join("target/audit-bench");
    let wheels = fetch(&dir.join("wheels"), &args)?;
    let (kiln, xtask) = build_release(&layout)?;
    let auditwheel = layout.py_site().join("bin/auditwheel");
    if !auditwheel.exists() {
        bail!("auditwheel missing at {}: add it to [workspace.metadata.kiln.test-tools] and run `cargo xtask bootstrap`", auditwheel.display());
    }
    let scratch = dir.join("scratch");
    let mut rows = Vec::new();
    for w in &wheels {
        let name = w
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        eprintln!("timing {name}");
        const TOOLS: usize = 6;
        let mut runs: [Vec<(Duration, u64)>; TOOLS] = Default::default();
        let mut reports: [String; TOOLS] = Default::default();
        for round in 0..args.rounds.max(1) {
            for i in 0..TOOLS {
                let which = (i + round) % TOOLS;
                let cmd = match which {
                    0 | 1 => {
                        let mut c = Command::new(&kiln);
                        c.arg("audit").arg(w).arg("--json");
                        if which == 1 {
                            c.arg("--no-kernels");
                        }
                        c
                    }
                    2 => {
                        let mut c = Command::new(&xtask);
                        c.args(["bench-audit-route", "floor"]).arg(w);
                        c
                    }
                    3 => {
                        let mut c = Command::new(&xtask);
                        c.args(["bench-audit-route", "decode"]).arg(w);
                        c
                    }
                    4 => {
                        let mut c = Command::new(&xtask);
                        c.args(["bench-audit-route", "cuobjdump"])
                            .arg(w)
                            .arg("--scratch")
                            .arg(dir.join("unzipped"));
                        c
                    }
                    _ => {
                        let mut c = Command::new(&auditwheel);
                        layout.apply(&mut c);
                        c.arg("show").arg(w);
                        c
                    }
                };
                let (wall, rss, code, out) = measure(&xtask, &cmd, &scratch)?;
                runs[which].push((wall, rss));
                reports[which] = match which {
                    0 | 1 => kiln_summary(w, code, &out)?,
                    2..=4 if code != Some(0) => bail!("{cmd:?} exited {code:?}"),
                    _ => {
                        let text = std::fs::read(&out)?;
                        if which == 5 {
                            auditwheel_summary(code, &text)
                        } else {
                            String::from_utf8_lossy(&text).trim().to_string()
                        }
                    }
                };
            }
        }
        let [k, kh, f, d, c, a] = runs.map(|r| Measured::of(&r));
        let [kr, _, fr, dr, cr, ar] = reports;
        rows.push(Row {
            wheel: name,
            size: std::fs::metadata(w)?.len(),
            kiln: k,
            kiln_headers: kh,
            kiln_report: kr,
            floor: f,
            floor_report: fr,
            decode: d,
            decode_report: dr,
            cuobjdump: c,
            cuobjdump_report: cr,
            auditwheel: a,
            auditwheel_report: ar,
        });
    }
    let cores = cores();
    println!(
        "\nbench-audit: median wall of {} rounds (tools interleaved, order rotating), largest peak RSS, {cores} cores",
        args.rounds.max(1)
    );
    println!("each run starts after `sync` (the previous tool's writes flushed, untimed)");
    println!("kiln: full audit with kernel listing, --json; kiln-hdr: --no-kernels (fatbin headers only; still every ELF, entry, RECORD)");
    println!("floor: inflate + SHA-256 of every member on every core (the work RECORD verification cannot skip); +decode: the floor, then every fatbin entry decoded on every core, in .nv_fatbin and in containers other data sections hold (what kernel listing cannot skip); route: unzip + cuobjdump --list-elf per library");
    println!(
        "\n| wheel | MB | kiln s | kiln MB RSS | kiln-hdr s | kiln-hdr MB RSS | floor s | floor MB RSS | kiln/floor | kiln-hdr/floor | floor+decode s | kiln/(floor+decode) | cuobjdump route s | route MB RSS | route/kiln | auditwheel s | auditwheel MB RSS |"
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &rows {
        println!(
            "| {} | {:.1} | {:.2} | {:.0} | {:.2} | {:.0} | {:.2} | {:.0} | {:.2}x | {:.2}x | {:.2} | {:.2}x | {:.2} | {:.0} | {:.1}x | {:.2} | {:.0} |",
            r.wheel,
            r.size as f64 / 1e6,
            r.kiln.secs(),
            r.kiln.mb(),
            r.kiln_headers.secs(),
            r.kiln_headers.mb(),
            r.floor.secs(),
            r.floor.mb(),
            r.kiln.secs() / r.floor.secs(),
            r.kiln_headers.secs() / r.floor.secs(),
            r.decode.secs(),
            r.kiln.secs() / r.decode.secs(),
            r.cuobjdump.secs(),
            r.cuobjdump.mb(),
            r.cuobjdump.secs() / r.kiln.secs(),
            r.auditwheel.secs(),
            r.auditwheel.mb(),
        );
    }
    println!("\ntargets (issue 26): kiln/(floor+decode) <= 1.10x on every wheel; kiln-hdr/floor <= 1.30x; route/kiln >= 3.0x on wheels over 100 MB; kiln peak RSS <= 256 MB");
    for r in &rows {
        let checks = [
            (
                "kiln/(floor+decode) <= 1.10",
                r.kiln.secs() / r.decode.secs() <= 1.10,
            ),
            (
                "kiln-hdr/floor <= 1.30",
                r.kiln_headers.secs() / r.floor.secs() <= 1.30,
            ),
            (
                "route/kiln >= 3.0 (over 100 MB)",
                r.size <= 100_000_000 || r.cuobjdump.secs() / r.kiln.secs() >= 3.0,
            ),
            (
                "RSS <= 256 MB",
                r.kiln.mb().max(r.kiln_headers.mb()) <= 256.0,
            ),
        ];
        let missed: Vec<&str> = checks.iter().filter(|c| !c.1).map(|c| c.0).collect();
        println!(
            "  {}: {}",
            r.wheel,
            if missed.is_empty() {
                "all met".to_string()
            } else {
                format!("NOT met: {}", missed.join("; "))
            }
        );
    }
    println!("\nwhat each reported:");
    for r in &rows {
        println!(
            "  {}\n    kiln:       {}\n    floor:      {}\n    +decode:    {}\n    cuobjdump:  {}\n    auditwheel: {}",
            r.wheel, r.kiln_report, r.floor_report, r.decode_report, r.cuobjdump_report, r.auditwheel_report
        );
    }
    Ok(())
}

/// Every member inflated and hashed, members shared out to one worker per core; with
/// `keep_elf`, the ELF members' bytes are returned too.
fn inflate_and_hash(wheel: &Path, keep_elf: bool) -> Result<(String, Vec<Vec<u8>>)> {
    use sha2::Digest;
    let count = zip::ZipArchive::new(std::fs::File::open(wheel)?)?.len();
    let next = AtomicUsize::new(0);
    let bytes = std::sync::atomic::AtomicU64::new(0);
    let elves = Mutex::new(Vec::new());
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..cores())
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    let mut ar = zip::ZipArchive::new(std::fs::File::open(wheel)?)?;
                    let mut buf = vec![0u8; 1 << 20];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= count {
                            return Ok(());
                        }
                        let mut member = ar.by_index(i)?;
                        let mut h = sha2::Sha256::new();
                        let mut kept = Vec::new();
                        loop {
                            let n = std::io::Read::read(&mut member, &mut buf)?;
                            if n == 0 {
                                break;
                            }
                            h.update(&buf[..n]);
                            if keep_elf {
                                kept.extend_from_slice(&buf[..n]);
                            }
                            bytes.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        std::hint::black_box(h.finalize());
                        if kept.starts_with(b"\x7fELF") {
                            elves.lock().expect("no worker panicked").push(kept);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("floor worker panicked")?;
        }
        Ok(())
    })?;
    Ok((
        format!(
            "{count} members, {} MB inflated and hashed",
            bytes.load(Ordering::Relaxed) / 1_000_000
        ),
        elves.into_inner().expect("no worker panicked"),
    ))
}

/// The floor, then every `.nv_fatbin` entry of every ELF decoded (zstd or LZ4), entries shared
/// out to one worker per core: the part of kernel listing no reader can skip. The two phases
/// run one after the other, so an audit that overlaps them can come in under this.
fn inflate_hash_and_decode(wheel: &Path) -> Result<String> {
    use object::{Object, ObjectSection};
    let (floor, elves) = inflate_and_hash(wheel, true)?;
    let files: Vec<object::File> = elves
        .iter()
        .filter_map(|e| object::File::parse(e.as_slice()).ok())
        .collect();
    let sections: Vec<&[u8]> = files
        .iter()
        .filter_map(|f| f.section_by_name(".nv_fatbin")?.data().ok())
        .collect();
    let mut entries: Vec<kiln_fatbin::container::Entry> = sections
        .iter()
        .filter_map(|s| kiln_fatbin::container::parse(s).ok())
        .flatten()
        .flat_map(|c| c.entries)
        .collect();
    // Containers a library keeps in other data sections and loads itself (cuDNN's
    // `.cask_resource`): listing their kernels needs their decode too, so the floor has it.
    // `__nv_relfatbin` is never loaded, and kiln reads only its headers.
    let magic = kiln_fatbin::container::MAGIC.to_le_bytes();
    for f in &files {
        for section in f.sections() {
            let name = section.name().unwrap_or("");
            if matches!(name, ".nv_fatbin" | "__nv_relfatbin")
                || section.kind() != object::SectionKind::ReadOnlyData
                    && section.kind() != object::SectionKind::Data
            {
                continue;
            }
            let Ok(data) = section.data() else { continue };
            let mut at = 0;
            while let Some(hit) = memchr::memmem::find(&data[at..], &magic) {
                let o = at + hit;
                match kiln_fatbin::container::parse_one(data, o) {
                    Ok((c, end)) if !c.entries.is_empty() => {
                        entries.extend(c.entries);
                        at = end;
                    }
                    _ => at = o + 1,
                }
            }
        }
    }
    let next = AtomicUsize::new(0);
    let decoded = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..cores() {
            s.spawn(|| {
                let mut buf = Vec::new();
                while let Some(e) = entries.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Ok(out) = e.decompress_with(&mut buf) {
                        decoded.fetch_add(out.len() as u64, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    Ok(format!(
        "{floor}; {} fatbin entries, {} MB decoded",
        entries.len(),
        decoded.load(Ordering::Relaxed) / 1_000_000
    ))
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
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

/// Release builds of `kiln` and of this xtask (the floor and the measuring launcher must be
/// optimized too: a debug floor would flatter kiln). Returns (kiln, xtask).
fn build_release(layout: &Layout) -> Result<(PathBuf, PathBuf)> {
    let args = ["--release", "-p", "kiln", "-p", "xtask"];
    let mut built = cargo_build(layout, &repo_root(), &args, &["kiln", "xtask"])?;
    Ok((built.remove(0), built.remove(0)))
}

fn kiln_summary(wheel: &Path, code: Option<i32>, stdout: &Path) -> Result<String> {
    use serde::de::IgnoredAny;
    if code == Some(2) || code.is_none() {
        bail!(
            "kiln audit could not read {} (exit {code:?})",
            wheel.display()
        );
    }
    // Only the counts and list lengths: the whole report (64 MB for cuDNN) is never held.
    #[derive(serde::Deserialize)]
    struct Summary {
        counts: serde_json::Map<String, serde_json::Value>,
        findings: Vec<IgnoredAny>,
        linkage: Vec<IgnoredAny>,
    }
    let v: Summary = serde_json::from_reader(std::io::BufReader::new(std::fs::File::open(stdout)?))
        .context("kiln audit --json")?;
    let c = |k: &str| v.counts.get(k).cloned().unwrap_or_default();
    Ok(format!(
        "{} ELF, {} with device code, {} containers, {} cubins + {} PTX with exact targets, {} kernels, {} NEEDED/dlopen resolutions, {} findings, RECORD verified",
        c("binaries"), c("binaries_with_device_code"), c("fatbin_containers"), c("cubins"), c("ptx"), c("kernels"), v.linkage.len(),
        v.findings.len()
    ))
}

/// The manual route: unzip, then `cuobjdump --list-elf` on every shared library, on every core.
fn run_cuobjdump(cuobjdump: &Path, wheel: &Path, scratch: &Path) -> Result<String> {
    if scratch.exists() {
        std::fs::remove_dir_all(scratch)?;
    }
    std::fs::create_dir_all(scratch)?;
    run_status(
        Command::new("unzip")
            .args(["-q", "-o"])
            .arg(wheel)
            .arg("-d")
            .arg(scratch),
        format_args!("unzip {} failed", wheel.display()),
    )?;
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
    std::thread::scope(|s| {
        for _ in 0..cores() {
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

fn auditwheel_summary(code: Option<i32>, stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let first = text
        .split("\n\n")
        .find(|p| p.contains("is consistent") || p.contains("platform tag"))
        .unwrap_or("")
        .replace('\n', " ");
    format!(
        "exit {}: {}",
        code.unwrap_or(-1),
        first.chars().take(160).collect::<String>()
    )
}
