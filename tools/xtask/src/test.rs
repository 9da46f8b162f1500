//! `cargo xtask test`: every test, with the pinned toolchain bootstrapped first.
//!
//! Suites run in order, each timed; a failing suite does not stop the others, and the summary
//! at the end lists what failed. `--only NAME` runs one suite; `--skip NAME` leaves one out.

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
/// `repro` built, so CI builds the release wheel through `cargo xtask wheel` only twice.
const SUITES: &[Suite] = &[
    Suite { name: "nix", what: "flake: parse, nixpkgs-fmt, deadnix, lock, facts about the locked nixpkgs, eval against the doubles", command: &["xtask", "nix-check"] },
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
        what: "kiln doctor on this build machine (no GPU expected; the driver link is waived)",
        command: &["cargo", "run", "--locked", "--quiet", "-p", "kiln", "--", "doctor", "--build-only", "--skip", "link.driver-api"],
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
    let mut results = Vec::new();
    let mut wheel = None;
    for suite in selected {
        eprintln!("\n=== {}: {}", suite.name, suite.what);
        let t = Instant::now();
        let ok = run_suite(&layout, suite, &mut wheel);
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "=== {}: {} in {secs:.0} s",
            suite.name,
            if ok { "passed" } else { "FAILED" }
        );
        results.push((suite.name, ok, secs));
    }
    eprintln!("\nsummary ({:.0} s):", started.elapsed().as_secs_f64());
    for (name, ok, secs) in &results {
        eprintln!(
            "  {:<8} {:<6} {secs:>5.0} s",
            name,
            if *ok { "ok" } else { "FAILED" }
        );
    }
    let failed: Vec<&str> = results.iter().filter(|r| !r.1).map(|r| r.0).collect();
    if !failed.is_empty() {
        bail!("failed suites: {}", failed.join(", "));
    }
    Ok(())
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
