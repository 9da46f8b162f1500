//! `cargo xtask test`: every test, with the pinned toolchain bootstrapped first.
//!
//! Suites run in order, each timed; a failing suite does not stop the others, and the summary
//! at the end lists what failed, with each suite's wall and CPU seconds (see [`summary`]).
//! `--only NAME` runs one suite; `--skip NAME` leaves one out.
//!
//! # What CI compiles, and why no build is there twice for the same reason
//!
//! CI's time is mostly compiling. Every build below was checked for a second one it could be;
//! a build stays where reusing another would change what a suite proves.
//!
//! - `cargo run -p xtask` (dev), paid by the first xtask suite and reused by every later one
//!   and by `unit`'s deps (measured: `nix`, which is nearly all this compile, 268 CPU s).
//! - `clippy`: check-mode units (metadata only), which no codegen build can reuse nor feed.
//!   Its build scripts do run, so it fills `target/kiln-kernel-cache`, which every later
//!   non-clean build (the sandbox's tests and wheel, hostile) hits instead of running nvcc.
//! - `unit`'s incremental test builds a copy of the kernel crates in its own target dir, on
//!   purpose: cargo names a workspace member's units by its path *relative to the workspace
//!   root*, so the copy's kiln-kernels (built from a nonce-edited .cu and Rust kernel) would get
//!   the same unit names as the checkout's in a shared target dir, and a later checkout build
//!   would take the edited artifacts as fresh (its own sources are older). Checked with two
//!   one-crate workspaces and one CARGO_TARGET_DIR: the second's artifact was `Fresh` for the
//!   first. Sharing would save only registry dependencies' dev compile.
//! - `sandbox`: the flake's source set, copied with new mtimes, so every workspace member is
//!   rebuilt (in dev) under the checkout's unit names — that rebuild is the check (the source
//!   set alone builds and passes); registry dependencies and the kernel cache are shared. Its
//!   wheel cannot be one of `repro`'s two: it is linked by zig (`maturin --zig`, for the
//!   x86_64 triple, its own target subdir) where `cargo xtask wheel` links with the host cc, it
//!   has no path remapping and no commit (no .git in the source set), and it is not clean (the
//!   kernel cache). Its release `kiln` (`build_kiln_binary`) is the one `audit` and `hostile`
//!   (its tests `cargo build --release -p kiln`) reuse.
//! - `doctor` builds the dev `kiln` that `mutations` (`cargo build -p kiln`) reuses.
//! - `repro`: two clean builds by design — the second must see neither the first's target dir
//!   nor its kernel cache, or nondeterminism in cached work goes unseen; they run minutes apart,
//!   so a time that leaks into the bytes shows. Its first wheel serves `audit`, `wheel`,
//!   `resolve` and `mutations`, so the release wheel is built through `cargo xtask wheel` only
//!   twice.
//! - `image`: builds nothing of kiln: it takes `repro`'s wheel and the release `kiln` the
//!   sandbox built. Its consumer part is two debug builds of checks/consumer in containers, the
//!   cargo target directory on a volume that keeps the dependencies built and the consumer crate
//!   cleaned in it before each build (the second, its build script run again, proves the kernel
//!   cache volume alone makes it compile no kernel). The base and the runtime wheels' layer are
//!   cached in `target/image/` and, for a fresh clone, as the engine's `kiln-base:bookworm` and
//!   `kiln-runtime:bookworm` labelled with their keys; the wheels in `~/.cache/kiln/`.
//! - `consumer`: another project (its own lock and workspace, kiln-build by a path outside it,
//!   so other unit names), the README's route as written; nothing of it is kiln's build.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Result};

use crate::bootstrap;
use crate::toolchain::{repo_root, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// Run only these suites (repeatable): see the list printed at the start.
    #[arg(long)]
    pub only: Vec<String>,
    /// Leave these suites out (repeatable).
    #[arg(long)]
    pub skip: Vec<String>,
}

struct Suite {
    name: &'static str,
    what: &'static str,
    /// "cargo …" runs cargo, "xtask …" this xtask binary, anything else that program; an
    /// argument "{wheel}" is the wheel the `repro` suite built (built on demand without it).
    command: &'static [&'static str],
}

/// In dependency order: `nix` installs the Nix tools that `sandbox` (it evaluates the flake's
/// source set) and the xtask tests use; `fmt`, `clippy` and `sandbox` are the commands of the
/// flake's checks (nix/checks/*.nix) run without Nix; `wheel` and `mutations` take the wheel
/// `repro` built, so CI builds the release wheel through `cargo xtask wheel` only twice; the
/// suites after `sandbox` that run `kiln` in release take its build (see the module docs).
const SUITES: &[Suite] = &[
    Suite { name: "nix", what: "flake: parse, nixpkgs-fmt, deadnix, lock, facts about the locked nixpkgs, eval against the doubles, the kernel job derivations' commands run without Nix", command: &["xtask", "nix-check", "--run-jobs"] },
    Suite { name: "fmt", what: "rustfmt check (the flake's `rustfmt` check)", command: &["cargo", "fmt", "--all", "--", "--check"] },
    Suite {
        name: "clippy",
        what: "clippy, every target, warnings denied (the flake's `clippy` check)",
        command: &["cargo", "clippy", "--workspace", "--all-targets", "--locked", "--", "--deny", "warnings"],
    },
    Suite {
        name: "machete",
        what: "cargo-machete: no dependency declared and unused (installed into .toolchain/cargo-machete when missing)",
        command: &["machete"],
    },
    Suite { name: "unit", what: "cargo test -p xtask (the tools' own tests, incl. the flake's deliberate breaks)", command: &["cargo", "test", "-p", "xtask", "--locked"] },
    Suite {
        name: "sandbox",
        what: "the flake's nextest, wheel and audit commands on its source set: HOME unwritable, offline, CUDA from the environment",
        command: &["xtask", "sandbox"],
    },
    Suite {
        name: "doctor",
        what: "README's `kiln doctor` command, read from README.md, run as written on this machine: exit 0 (no GPU expected; nothing waived)",
        command: &["xtask", "readme-doctor"],
    },
    Suite { name: "repro", what: "two clean wheel builds, byte-identical", command: &["xtask", "repro"] },
    Suite {
        name: "audit",
        what: "kiln audit of the wheel against the pins (the release gate)",
        command: &["cargo", "run", "--locked", "--quiet", "--release", "-p", "kiln", "--", "audit", "{wheel}", "--policy", "Cargo.toml"],
    },
    Suite {
        name: "cli-wheel",
        what: "the kiln CLI wheel (kiln-cuda-cli, maturin bin, manylinux_2_28): pip install into a fresh venv, kiln audit --json from it on the CLI wheel and on kiln's wheel, declared vs computed glibc, reports validated against docs/audit-json-schema.json",
        command: &["xtask", "cli-wheel", "{wheel}"],
    },
    Suite {
        name: "consumer",
        what: "another project (checks/consumer, its own matrix): README's build-dependency route from a fresh dir, its wheel audited clean, a kernel compiled out for sm_89 caught",
        command: &["xtask", "consumer"],
    },
    Suite {
        name: "packaged",
        what: "cargo package (no verify) of every published crate; checks/consumer and the kiln CLI built from the unpacked .crate files, the consumer's library audited by that CLI",
        command: &["xtask", "packaged"],
    },
    Suite {
        name: "hostile",
        what: "kiln-hostile: the generated hostile inputs through kiln audit under time/RSS/output limits, and the pip/zipfile and ld.so differentials",
        command: &["cargo", "test", "--locked", "--release", "-p", "kiln-hostile", "--", "--include-ignored"],
    },
    Suite {
        name: "wheel",
        what: "the wheel on a machine without a GPU: fresh venv, pip install, import, build_info, no-driver error",
        command: &["python3", "checks/wheel/check_no_gpu.py", "{wheel}", "--pins", "Cargo.toml"],
    },
    Suite {
        name: "image",
        what: "cargo xtask image: debootstrap base, runtime wheels, the wheel and kiln, no libcuda; loaded into Docker and run without a GPU (doctor --runtime-only, import kiln, kiln audit of its site-packages); checks/consumer's kernels built twice in a container with no driver, the second reusing every kernel from the cache volume",
        command: &["xtask", "image", "--wheel", "{wheel}", "--consumer"],
    },
    Suite {
        name: "resolve",
        what: "pip resolves the wheel beside the newest torch, torch 2.11, jax[cuda13], cupy-cuda13x: partner at its newest, one CUDA major (dry-run, one partner at a time)",
        command: &["python3", "checks/wheel/check_resolve.py", "{wheel}", "--pins", "Cargo.toml"],
    },
    Suite { name: "mutations", what: "audit mutation suite on the wheel: every damage caught by its rule", command: &["xtask", "audit-mutations", "--wheel", "{wheel}"] },
];

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure()?;
    let selected: Vec<&Suite> = SUITES
        .iter()
        .filter(|s| args.only.is_empty() || args.only.iter().any(|o| o == s.name))
        .filter(|s| !args.skip.iter().any(|o| o == s.name))
        .collect();
    for name in args.only.iter().chain(&args.skip) {
        if !SUITES.iter().any(|s| s.name == name) {
            let names: Vec<&str> = SUITES.iter().map(|s| s.name).collect();
            bail!("unknown suite {name:?} (suites: {})", names.join(", "));
        }
    }
    eprintln!(
        "suites: {}",
        selected
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let started = Instant::now();
    let cpu_started = children_cpu();
    let load_started = load_average();
    let mut results = Vec::new();
    let mut wheel = None;
    for suite in selected {
        eprintln!("\n=== {}: {}", suite.name, suite.what);
        let (t, cpu) = (Instant::now(), children_cpu());
        let ok = run_suite(&layout, suite, &mut wheel);
        let cost = Cost {
            wall: t.elapsed().as_secs_f64(),
            cpu: children_cpu() - cpu,
        };
        eprintln!(
            "=== {}: {} in {:.0} s ({:.0} CPU s)",
            suite.name,
            if ok { "passed" } else { "FAILED" },
            cost.wall,
            cost.cpu
        );
        results.push((suite.name, ok, cost));
    }
    let total = Cost {
        wall: started.elapsed().as_secs_f64(),
        cpu: children_cpu() - cpu_started,
    };
    eprint!("{}", summary(&results, total, cores()));
    // Whether the wall column means anything: a load above the core count was other work.
    if let (Some(a), Some(b)) = (load_started, load_average()) {
        eprintln!(
            "load average (1 min): {a:.1} at the start, {b:.1} at the end, on {} cores",
            cores()
        );
    }
    let failed: Vec<&str> = results.iter().filter(|r| !r.1).map(|r| r.0).collect();
    if !failed.is_empty() {
        bail!("failed suites: {}", failed.join(", "));
    }
    Ok(())
}

/// What one suite cost: wall seconds and CPU seconds.
#[derive(Clone, Copy)]
struct Cost {
    wall: f64,
    cpu: f64,
}

/// User + system CPU seconds of every child process this process has waited for, and of their
/// waited-for descendants (getrusage(RUSAGE_CHILDREN)): cargo waits for its rustc and build
/// scripts, maturin for cargo, so a suite's delta is all the work it caused. Unlike wall time it
/// hardly moves when other work shares the machine, so it is the number to compare between
/// runs on a busy machine.
fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// The 1-minute load average (/proc/loadavg), where there is one.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The table at the end: per suite wall s, CPU s and CPU s / cores.
///
/// CPU s / cores is a lower bound for the wall time of a suite's work on a quiet machine with
/// `cores` cores: no schedule finishes sooner than its CPU time spread over every core. A suite
/// whose wall time is far above it is serial (one rustc at the end of a dependency chain, a
/// download, a test that waits) or, on a shared machine, waited for other work; one close to it
/// is CPU-bound and only gets faster with less work. (CPU time itself grows somewhat on a busy
/// machine — shared caches and memory bandwidth — so a busy run's bound is a little high.)
fn summary(results: &[(&str, bool, Cost)], total: Cost, cores: usize) -> String {
    let n = cores as f64;
    let mut s = format!(
        "\nsummary ({:.0} s wall, {:.0} CPU s; CPU s/{cores} is a lower bound for the wall time \
         of parallel work on this {cores}-core machine, and the number to compare when it is busy):\n",
        total.wall, total.cpu
    );
    s.push_str(&format!(
        "  {:<10} {:<6} {:>7} {:>7} {:>9}\n",
        "suite",
        "result",
        "wall s",
        "CPU s",
        format!("CPU s/{cores}")
    ));
    for (name, ok, c) in results {
        s.push_str(&format!(
            "  {:<10} {:<6} {:>7.0} {:>7.0} {:>9.0}\n",
            name,
            if *ok { "ok" } else { "FAILED" },
            c.wall,
            c.cpu,
            c.cpu / n
        ));
    }
    s.push_str(&format!(
        "  {:<10} {:<6} {:>7.0} {:>7.0} {:>9.0}\n",
        "total",
        "",
        total.wall,
        total.cpu,
        total.cpu / n
    ));
    s
}

/// The cargo-machete release the `machete` suite runs.
const CARGO_MACHETE: &str = "0.9.2";

/// `.toolchain/cargo-machete/bin/cargo-machete`, installed (`cargo install --locked`) when absent.
fn cargo_machete(layout: &Layout) -> Result<PathBuf> {
    let root = layout.root.join("cargo-machete");
    let bin = root.join("bin/cargo-machete");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "install",
                "--locked",
                "--quiet",
                // It scans Cargo.toml files: the dev profile builds in half the CPU of release.
                "--debug",
                "cargo-machete",
                "--version",
            ])
            .arg(CARGO_MACHETE)
            .arg("--root")
            .arg(&root)
            .status()?;
        if !status.success() {
            bail!("cargo install cargo-machete {CARGO_MACHETE} failed");
        }
    }
    Ok(bin)
}

/// The wheel `cargo xtask repro` left (its first build), or a fresh `cargo xtask wheel`.
fn wheel_for_tests(layout: &Layout) -> Option<PathBuf> {
    let find = |dir: PathBuf| -> Option<PathBuf> {
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "whl"))
    };
    if let Some(w) = find(repo_root().join("target/repro/first/wheels")) {
        return Some(w);
    }
    let out = repo_root().join("target/ci-wheel");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(repo_root())
        .args([
            "run",
            "--quiet",
            "--locked",
            "-p",
            "xtask",
            "--",
            "wheel",
            "--no-audit",
            "--out",
        ])
        .arg(&out);
    layout.apply(&mut cmd);
    cmd.status().ok().filter(|s| s.success())?;
    find(out)
}

fn run_suite(layout: &Layout, suite: &Suite, wheel: &mut Option<PathBuf>) -> bool {
    let (program, rest) = suite.command.split_first().expect("suite has a command");
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    for a in rest {
        if *a == "{wheel}" {
            if wheel.is_none() {
                *wheel = wheel_for_tests(layout);
            }
            match wheel {
                Some(w) => args.push(w.clone().into_os_string()),
                None => {
                    eprintln!("no wheel to test: `cargo xtask wheel` failed");
                    return false;
                }
            }
        } else {
            args.push(a.into());
        }
    }
    let rest = args;
    let mut cmd = match *program {
        "cargo" => Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())),
        // Through cargo, not current_exe(): the unit suite rebuilds this very binary.
        "xtask" => {
            let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            c.args(["run", "--quiet", "--locked", "-p", "xtask", "--"]);
            c
        }
        "machete" => match cargo_machete(layout) {
            Ok(bin) => Command::new(bin),
            Err(e) => {
                eprintln!("{e:#}");
                return false;
            }
        },
        other => Command::new(other),
    };
    cmd.current_dir(repo_root()).args(rest);
    layout.apply(&mut cmd);
    match cmd.status() {
        Ok(s) => s.success(),
        Err(e) => {
            eprintln!("cannot start {program}: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU column counts the work of waited-for children: the delta around a child that
    /// spins is at least the CPU time the child reports for itself (`times`). With
    /// RUSAGE_SELF, or a delta read before the wait, it would be about zero.
    #[test]
    fn children_cpu_counts_a_childs_work() {
        let before = children_cpu();
        let out = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; times",
            ])
            .output()
            .unwrap();
        let delta = children_cpu() - before;
        assert!(out.status.success());
        // `times`' first line: the shell's own user and system time, as `0m0.620000s`.
        let text = String::from_utf8(out.stdout).unwrap();
        let own: f64 = text
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .map(|t| {
                let (m, s) = t.trim_end_matches('s').split_once('m').unwrap();
                m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
            })
            .sum();
        assert!(own > 0.05, "the spin took only {own} CPU s: {text}");
        // Other tests' children may add to the delta, never take from it; `times` rounds.
        assert!(
            delta >= own - 0.02,
            "delta {delta:.3} CPU s, the child reports {own:.3}"
        );
    }

    #[test]
    fn the_summary_has_wall_cpu_and_the_per_core_bound() {
        let c = |wall, cpu| Cost { wall, cpu };
        let s = summary(
            &[
                ("unit", true, c(100.0, 150.0)),
                ("repro", false, c(300.0, 500.0)),
            ],
            c(400.0, 650.0),
            2,
        );
        assert!(s.contains("CPU s/2 is a lower bound"), "{s}");
        let row = |name: &str| -> Vec<String> {
            let line = s
                .lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap();
            line.split_whitespace().map(String::from).collect()
        };
        assert_eq!(row("unit"), ["unit", "ok", "100", "150", "75"]);
        assert_eq!(row("repro"), ["repro", "FAILED", "300", "500", "250"]);
        assert_eq!(row("total"), ["total", "400", "650", "325"]);
    }
}
