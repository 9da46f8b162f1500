//! `cargo xtask nix-check`: everything about the flake that can be checked without fetching
//! nixpkgs.
//!
//! 1. every `.nix` file parses (`nix-instantiate --parse`);
//! 2. `nixpkgs-fmt --check` and `deadnix --fail` are clean;
//! 3. flake.lock is consistent with flake.nix (our own comparison, with a precise message,
//!    then `nix flake metadata --offline --no-update-lock-file`);
//! 4. the facts about the locked nixpkgs (checks/nix/doubles/nixpkgs/facts.toml, which the
//!    nixpkgs double is made of) describe flake.lock's revision, agree with the pins, and no pin
//!    is newer than the lock (nix_check/facts.rs);
//! 5. every flake output evaluates (`nix flake check --no-build --all-systems`) against the
//!    strict test doubles of nixpkgs, crane and rust-overlay in checks/nix/doubles, passed with
//!    `--override-input`;
//! 6. every output of both systems (packages, devShells, checks, formatter, the `lib` entry
//!    points, `overlays.default` applied) evaluates to a drvPath with import-from-derivation
//!    forbidden, one `nix eval` each so a failure names its output (nix_check/outputs.rs).
//!
//! With `--real-crane DIR --real-rust-overlay DIR` (unpacked `git archive`s of the locked
//! revisions, never committed) it also checks the locked narHashes against those trees,
//! compares the doubles with the real sources (checks/nix/real-surface.nix), and runs step 6
//! with the REAL crane and rust-overlay (nixpkgs: the double plus checks/nix/real-inputs).
//!
//! Nix 2.34, nixpkgs-fmt and deadnix are installed into `.toolchain/` when missing.

pub mod facts;
mod job_run;
mod kernel_jobs;
mod lock;
mod outputs;
mod tools;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// The system whose source set `cargo xtask sandbox` takes.
const EVAL_SYSTEM: &str = "x86_64-linux";
/// The flake inputs that have a test double in checks/nix/doubles/<name>.
pub const DOUBLED_INPUTS: [&str; 3] = ["nixpkgs", "crane", "rust-overlay"];

#[derive(clap::Args)]
pub struct Args {
    /// The flake to check (a kiln checkout); defaults to this workspace.
    #[arg(long)]
    pub repo: Option<PathBuf>,
    /// Where Nix, nixpkgs-fmt and deadnix are kept (installed when missing); defaults to this
    /// workspace's `.toolchain`.
    #[arg(long)]
    pub toolchain: Option<PathBuf>,
    /// Also run the job derivations' commands without Nix for two targets' chains
    /// (nix_check/job_run.rs): each key must be the workspace plan's (needs nvcc and the
    /// kernel rustc; a minute or two).
    #[arg(long)]
    pub run_jobs: bool,
    /// Install (or find) the tools and stop.
    #[arg(long)]
    pub tools_only: bool,
    /// Real crane source: an unpacked `git archive` of the locked revision.
    #[arg(long, requires = "real_rust_overlay")]
    pub real_crane: Option<PathBuf>,
    /// Real rust-overlay source: an unpacked `git archive` of the locked revision.
    #[arg(long, requires = "real_crane")]
    pub real_rust_overlay: Option<PathBuf>,
    /// JSON from checks/nix/facts-eval.nix evaluated against the REAL nixpkgs at the locked
    /// revision (the networked workflow makes it): every difference from the committed facts
    /// fails, named.
    #[arg(long)]
    pub evaluated_facts: Option<PathBuf>,
}

/// One step's outcome: a name for the summary, and the error (a clear, short message) if any.
struct Step {
    name: &'static str,
    result: Result<String>,
    secs: f64,
}

pub fn run(args: Args) -> Result<()> {
    let start = Instant::now();
    let ws = crate::toolchain::repo_root();
    let repo = match &args.repo {
        Some(r) => r
            .canonicalize()
            .with_context(|| format!("--repo {}", r.display()))?,
        None => ws.clone(),
    };
    let toolchain = args
        .toolchain
        .clone()
        .unwrap_or_else(|| ws.join(".toolchain"));
    let tools = tools::Tools::ensure(&ws, &toolchain)?;
    eprintln!(
        "nix-check: {} ({}), nixpkgs-fmt and deadnix from {}",
        tools.nix_version,
        tools.nix_bin.display(),
        tools.fmt_bin.parent().unwrap_or(Path::new(".")).display()
    );
    if args.tools_only {
        return Ok(());
    }

    let flake = Flake::new(&repo)?;
    let mut steps = Vec::new();
    let mut step = |name: &'static str, f: &dyn Fn() -> Result<String>| {
        let t = Instant::now();
        let result = f();
        let secs = t.elapsed().as_secs_f64();
        match &result {
            Ok(note) => eprintln!(
                "nix-check: ok     {name} ({secs:.1} s){}",
                if note.is_empty() {
                    String::new()
                } else {
                    format!(": {note}")
                }
            ),
            Err(e) => eprintln!(
                "nix-check: FAILED {name} ({secs:.1} s)\n{}",
                indent(&format!("{e:#}"))
            ),
        }
        steps.push(Step { name, result, secs });
    };

    step("parse every .nix file", &|| parse_all(&tools, &flake));
    step("nixpkgs-fmt --check", &|| fmt_check(&tools, &flake));
    step("deadnix --fail", &|| deadnix(&tools, &flake));
    step("flake.lock matches flake.nix", &|| {
        lock::check(&tools, &flake)
    });
    step(
        "facts about the locked nixpkgs agree with flake.lock and the pins",
        &|| facts::check(&flake.root),
    );
    step("the nixpkgs double is what the facts say", &|| {
        facts_of_double(&tools, &flake)
    });
    if let Some(file) = &args.evaluated_facts {
        step("the facts are what the REAL nixpkgs evaluates to", &|| {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            let evaluated: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", file.display()))?;
            let diff = facts::compare_evaluated(&facts::load(&flake.root)?, &evaluated);
            if diff.is_empty() {
                Ok(format!(
                    "{} attributes agree",
                    evaluated.as_object().map_or(0, |o| o.len())
                ))
            } else {
                bail!(
                    "{} differs from the real nixpkgs (update it from {}):\n{}",
                    facts::FACTS_FILE,
                    file.display(),
                    diff.join("\n")
                )
            }
        });
    }
    step("flake outputs evaluate against the test doubles", &|| {
        eval_doubles(&tools, &flake)
    });
    step(
        "every output of both systems evaluates without import-from-derivation (test doubles)",
        &|| {
            let mut overrides = vec!["--offline".to_string()];
            overrides.extend(flake.overrides());
            let inputs = outputs::Inputs {
                label: "test doubles",
                overrides,
                nixpkgs_for_overlay: flake.doubles.join("nixpkgs").display().to_string(),
            };
            Ok(outputs::summary(&outputs::every_output(
                &tools, &flake, &inputs,
            )?))
        },
    );
    step(
        "one derivation per kernel job (compiles, Rust PTX, ptxas, links, merges), planned from source text, ids = kiln-build's plan (both systems, IFD forbidden)",
        &|| kernel_jobs::check(&tools, &flake),
    );
    if args.run_jobs {
        step(
            "the job derivations' commands, run without Nix, give the keys kiln-build's plan has",
            &|| job_run::check(&tools, &flake),
        );
    }
    if let (Some(crane), Some(ro)) = (&args.real_crane, &args.real_rust_overlay) {
        step("locked narHash of the real crane and rust-overlay", &|| {
            lock::check_real_hashes(&tools, &flake, crane, ro)
        });
        step(
            "test doubles match the real crane and rust-overlay",
            &|| real_surface(&tools, &flake, crane, ro),
        );
        step(
            "flake outputs evaluate with the REAL crane and rust-overlay",
            &|| eval_real_inputs(&tools, &flake),
        );
    }

    let failed: Vec<&Step> = steps.iter().filter(|s| s.result.is_err()).collect();
    let total = start.elapsed().as_secs_f64();
    if failed.is_empty() {
        eprintln!(
            "nix-check: all {} steps passed in {total:.1} s",
            steps.len()
        );
        return Ok(());
    }
    let mut msg = format!(
        "{} of {} nix-check steps failed ({total:.1} s):",
        failed.len(),
        steps.len()
    );
    for s in &failed {
        let e = s.result.as_ref().expect_err("failed step");
        let _ = write!(
            msg,
            "\n  - {} ({:.1} s): {}",
            s.name,
            s.secs,
            first_line(&format!("{e:#}"))
        );
    }
    bail!(msg)
}

/// The flake under test and the facts about it every step needs.
pub struct Flake {
    pub root: PathBuf,
    /// What to pass to `nix`: the git checkout itself (so only tracked files are seen, as a
    /// user's `nix flake check` would) or `path:` for a plain directory.
    pub flake_ref: String,
    pub nix_files: Vec<PathBuf>,
    pub doubles: PathBuf,
}

impl Flake {
    fn new(root: &Path) -> Result<Self> {
        if !root.join("flake.nix").is_file() {
            bail!("{} has no flake.nix", root.display());
        }
        let doubles = root.join("checks/nix/doubles");
        for d in DOUBLED_INPUTS {
            if !doubles.join(d).join("flake.nix").is_file() {
                bail!(
                    "test double {} is missing (checks/nix/doubles/{d}/flake.nix)",
                    d
                );
            }
        }
        let is_git = root.join(".git").exists();
        if !is_git {
            // A plain directory is copied into the store whole, build outputs and all (and a
            // private store under .toolchain/ would then contain itself).
            for big in [".toolchain", "target"] {
                if root.join(big).exists() {
                    bail!(
                        "{} is not a git checkout and holds {big}/, which nix would copy into the store; \
                         check a git checkout, or a copy without {big}/",
                        root.display()
                    );
                }
            }
        }
        let nix_files = if is_git {
            git_nix_files(root)?
        } else {
            walk_nix_files(root)?
        };
        let flake_ref = if is_git {
            root.display().to_string()
        } else {
            format!("path:{}", root.display())
        };
        Ok(Flake {
            root: root.to_path_buf(),
            flake_ref,
            nix_files,
            doubles,
        })
    }

    fn overrides(&self) -> Vec<String> {
        let mut v = vec!["--no-write-lock-file".to_string()];
        for d in DOUBLED_INPUTS {
            v.push("--override-input".into());
            v.push(d.into());
            v.push(format!("path:{}", self.doubles.join(d).display()));
        }
        v
    }
}

fn git_nix_files(root: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            "*.nix",
        ])
        .output()
        .context("running git ls-files")?;
    if !out.status.success() {
        bail!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let untracked = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "--others",
            "--exclude-standard",
            "--",
            "*.nix",
            "flake.lock",
            "nix",
            "checks/nix",
        ])
        .output()?;
    let untracked = String::from_utf8_lossy(&untracked.stdout);
    if !untracked.trim().is_empty() {
        eprintln!(
            "nix-check: warning: untracked files are invisible to the flake (git add them):\n{}",
            indent(untracked.trim())
        );
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
        .filter(|p| p.exists())
        .collect())
}

fn walk_nix_files(root: &Path) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if entry.file_type()?.is_dir() {
                if !matches!(name.as_ref(), "target" | ".toolchain" | ".git" | "result") {
                    walk(&path, out)?;
                }
            } else if name.ends_with(".nix") {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, &mut out)?;
    out.sort();
    Ok(out)
}

fn parse_all(tools: &tools::Tools, flake: &Flake) -> Result<String> {
    let mut errors = Vec::new();
    for f in &flake.nix_files {
        let out = tools.nix_instantiate().arg("--parse").arg(f).output()?;
        if !out.status.success() {
            errors.push(format!("{}: {}", rel(&flake.root, f), nix_error(&out)));
        }
    }
    if errors.is_empty() {
        Ok(format!("{} files", flake.nix_files.len()))
    } else {
        bail!("{}", errors.join("\n"))
    }
}

fn fmt_check(tools: &tools::Tools, flake: &Flake) -> Result<String> {
    let out = Command::new(&tools.fmt_bin)
        .current_dir(&flake.root)
        .arg("--check")
        .args(rel_all(flake))
        .output()?;
    if out.status.success() {
        return Ok(String::new());
    }
    let listed = String::from_utf8_lossy(&out.stdout);
    let files: Vec<&str> = listed.lines().filter(|l| l.ends_with(".nix")).collect();
    bail!(
        "not formatted (run `nix fmt` or {} FILE): {}\n{}",
        tools.fmt_bin.display(),
        files.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

fn deadnix(tools: &tools::Tools, flake: &Flake) -> Result<String> {
    let out = Command::new(&tools.deadnix_bin)
        .current_dir(&flake.root)
        .args(["--fail", "--output-format", "json"])
        .args(rel_all(flake))
        .output()?;
    if out.status.success() {
        return Ok(String::new());
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let file = v["file"].as_str().unwrap_or("?");
        for r in v["results"].as_array().into_iter().flatten() {
            found.push(format!(
                "{file}:{}:{}: {}",
                r["line"],
                r["column"],
                r["message"].as_str().unwrap_or("unused")
            ));
        }
    }
    if found.is_empty() {
        found.push(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    bail!("unused Nix code:\n{}", found.join("\n"))
}

fn eval_doubles(tools: &tools::Tools, flake: &Flake) -> Result<String> {
    let mut check = tools.nix();
    check
        .args(["flake", "check", "--no-build", "--offline", "--all-systems"])
        .args(outputs::NO_IFD)
        .args(flake.overrides())
        .arg(&flake.flake_ref);
    let out = check.output()?;
    if !out.status.success() {
        bail!(
            "nix flake check --no-build (test doubles): {}",
            nix_error(&out)
        );
    }
    let checked = String::from_utf8_lossy(&out.stderr)
        .matches("derivation evaluated to")
        .count();
    Ok(format!("{checked} derivations"))
}

/// checks/nix/facts-eval.nix over the double: what the double gives must be the facts.
fn facts_of_double(tools: &tools::Tools, flake: &Flake) -> Result<String> {
    let expr = format!(
        "import {}/checks/nix/facts-eval.nix {{ nixpkgs = {}/nixpkgs; facts = {}/{}; }}",
        flake.root.display(),
        flake.doubles.display(),
        flake.root.display(),
        facts::FACTS_FILE
    );
    let out = tools
        .nix()
        .args(["eval", "--impure", "--json", "--expr", &expr])
        .output()?;
    if !out.status.success() {
        bail!(
            "evaluating checks/nix/facts-eval.nix on the double: {}",
            nix_error(&out)
        );
    }
    let evaluated: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let diff = facts::compare_evaluated(&facts::load(&flake.root)?, &evaluated);
    if diff.is_empty() {
        Ok(format!(
            "{} attributes",
            evaluated.as_object().map_or(0, |o| o.len())
        ))
    } else {
        bail!("{}", diff.join("\n"))
    }
}

fn real_surface(
    tools: &tools::Tools,
    flake: &Flake,
    crane: &Path,
    rust_overlay: &Path,
) -> Result<String> {
    let expr = format!(
        "import {}/checks/nix/real-surface.nix {{ crane = {}; rustOverlay = {}; doubles = {}; cargoToml = {}/Cargo.toml; }}",
        flake.root.display(),
        crane.canonicalize()?.display(),
        rust_overlay.canonicalize()?.display(),
        flake.doubles.display(),
        flake.root.display()
    );
    let out = tools
        .nix()
        .args(["eval", "--impure", "--json", "--expr", &expr])
        .output()?;
    if !out.status.success() {
        bail!(
            "evaluating checks/nix/real-surface.nix: {}",
            nix_error(&out)
        );
    }
    let problems: Vec<String> =
        serde_json::from_slice(&out.stdout).context("real-surface.nix output")?;
    if problems.is_empty() {
        Ok("crane mkLib/scope/argument patterns and rust-overlay overlay/nightly dates/components agree".into())
    } else {
        bail!("{}", problems.join("\n"))
    }
}

/// Every flake output with crane and rust-overlay as flake.lock has them (the real sources,
/// resolvable offline once `check_real_hashes` added them to the store) and, for nixpkgs, the
/// double extended by the lib and scope functions those two read
/// (checks/nix/real-inputs/nixpkgs-shim). The nightly then comes out of the real rust-overlay
/// (its real component URLs and hashes), and the crates out of the real crane (its real
/// vendoring of Cargo.lock, dependency-only build, clippy/fmt/nextest derivations).
fn eval_real_inputs(tools: &tools::Tools, flake: &Flake) -> Result<String> {
    let shim_dir = flake.root.join("checks/nix/real-inputs/nixpkgs-shim");
    let shim = match flake.flake_ref.strip_prefix("path:") {
        Some(p) => format!("path:{p}?dir=checks/nix/real-inputs/nixpkgs-shim"),
        None => format!(
            "git+file://{}?dir=checks/nix/real-inputs/nixpkgs-shim",
            flake.root.display()
        ),
    };
    let overrides: Vec<String> = [
        "--offline",
        "--no-write-lock-file",
        "--override-input",
        "nixpkgs",
        &shim,
    ]
    .map(String::from)
    .to_vec();
    let out = tools
        .nix()
        .args(["flake", "check", "--no-build", "--all-systems"])
        .args(outputs::NO_IFD)
        .args(&overrides)
        .arg(&flake.flake_ref)
        .output()?;
    if !out.status.success() {
        bail!(
            "nix flake check --no-build (real crane and rust-overlay, IFD forbidden): {}",
            nix_error(&out)
        );
    }
    let checked = String::from_utf8_lossy(&out.stderr)
        .matches("derivation evaluated to")
        .count();
    let inputs = outputs::Inputs {
        label: "real crane and rust-overlay",
        overrides,
        nixpkgs_for_overlay: shim_dir.display().to_string(),
    };
    let done = outputs::every_output(tools, flake, &inputs)?;
    Ok(format!(
        "nix flake check: {checked} derivations; {}",
        outputs::summary(&done)
    ))
}

/// The source set the flake's derivations build from (crane's `src`, nix/crates.nix's fileset),
/// evaluated with Nix against the test doubles and returned as a directory on disk (in the
/// private store when Nix is the bootstrapped one). `cargo xtask sandbox` builds from a copy of
/// it, so CI builds exactly the files a Nix build would see.
pub fn flake_source(repo: &Path) -> Result<PathBuf> {
    let ws = crate::toolchain::repo_root();
    let tools = tools::Tools::ensure(&ws, &ws.join(".toolchain"))?;
    let flake = Flake::new(repo)?;
    let attr = format!("packages.{EVAL_SYSTEM}.wheel.src");
    let out = tools
        .nix()
        .args(["eval", "--offline", "--raw"])
        .args(flake.overrides())
        .arg(format!("{}#{attr}", flake.flake_ref))
        .output()?;
    if !out.status.success() {
        bail!("nix eval {attr} (test doubles): {}", nix_error(&out));
    }
    let store_path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // A private store (get-nix.sh: `store = local?root=…/store`) keeps /nix/store/… under its root.
    let private = tools.nix_bin.parent().map(|p| {
        p.join("store")
            .join(store_path.strip_prefix("/").unwrap_or(&store_path))
    });
    [Some(store_path.clone()), private]
        .into_iter()
        .flatten()
        .find(|p| p.join("Cargo.toml").is_file())
        .with_context(|| format!("{attr} = {} is not on disk", store_path.display()))
}

/// The part of Nix's stderr that says what went wrong: from the last `error:` on, without the
/// trace noise.
pub fn nix_error(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let tail = match err.rfind("error:") {
        Some(i) => &err[i..],
        None => err.trim(),
    };
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let text = lines.join("\n");
    if text.is_empty() {
        format!("exit status {}", out.status)
    } else {
        text
    }
}

fn rel_all(flake: &Flake) -> Vec<String> {
    flake
        .nix_files
        .iter()
        .map(|f| rel(&flake.root, f))
        .collect()
}

fn rel(root: &Path, f: &Path) -> String {
    f.strip_prefix(root).unwrap_or(f).display().to_string()
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn first_line(s: &str) -> String {
    // Nix errors start with "error:"; the line after a bare "error:" is the message.
    let lines: Vec<&str> = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "error:")
        .collect();
    lines
        .iter()
        .find(|l| l.contains("kiln:"))
        .or(lines.first())
        .map(|l| l.to_string())
        .unwrap_or_default()
}
