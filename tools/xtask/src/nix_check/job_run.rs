//! The job derivations' commands run without Nix (`nix-check --run-jobs`): each job of
//! nix/kernel-jobs.nix as its derivation runs it — a project holding exactly the job's files
//! and the Cargo.toml Nix wrote for it, a `--prebuilt` farm of the jobs it reads, and
//! `kiln-kernel-job` — for the chains of one SASS target and of the `+PTX` target (compiles, the
//! Rust PTX, ptxas, links, the merge). Every key must be the key kiln-build's plan of the whole
//! workspace has for that job, and a build of the workspace narrowed to those targets must take
//! every job from the farm and compile nothing: what the kernels, wheel, clippy and nextest
//! derivations rely on. The tool itself is built as its derivation builds it, from kiln-build's
//! dependency closure under the Cargo.toml files Nix writes. The toolchain is this machine's (nvcc from the pins, Debian's kernel
//! rustc with -Zbuild-std), not Nix's; the layouts and commands are the derivations'.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::outputs::NO_IFD;
use super::{nix_error, tools::Tools, Flake};
use crate::toolchain::copy_tree;

/// What nix/kernel-jobs.nix says one job's derivation sees (`passthru.layout`).
#[derive(serde::Deserialize)]
struct Layout {
    files: Vec<String>,
    #[serde(rename = "cargoToml")]
    cargo_toml: String,
    rust: bool,
    deps: Vec<String>,
}

/// The narrowed matrix the step builds: the first SASS entry and the `+PTX` one.
const ARCHS: &str = "8.0 12.0+PTX";
/// The jobs whose chains are run (with everything they read).
const ROOTS: [&str; 3] = ["link:sm_80", "link:sm_120", "merge:compute_120"];
/// What every derivation that runs nvcc sets (nix/fatbin-compression.nix).
const NIX_ENV: (&str, &str) = ("NIX_CUDA_DONT_COMPRESS_FATBINS", "1");

fn layouts(tools: &Tools, flake: &Flake) -> Result<BTreeMap<String, Layout>> {
    let out = tools
        .nix()
        .args(["eval", "--json", "--offline"])
        .args(NO_IFD)
        .args(flake.overrides())
        .arg(format!(
            "{}#lib.x86_64-linux.kernelJobs.jobs",
            flake.flake_ref
        ))
        .args(["--apply", "js: builtins.mapAttrs (_: j: j.layout) js"])
        .output()
        .context("running nix eval")?;
    if !out.status.success() {
        bail!("lib.x86_64-linux.kernelJobs.jobs: {}", nix_error(&out));
    }
    serde_json::from_slice(&out.stdout).context("the job layouts are not the expected JSON")
}

/// What nix/kernel-jobs.nix builds the job tool from: kiln-build's dependency closure and the
/// Cargo.toml files it writes for them.
#[derive(serde::Deserialize)]
struct ToolSource {
    crates: Vec<String>,
    manifests: BTreeMap<String, String>,
}

/// kiln-kernel-job built as its derivation builds it: the closure's crates and the workspace's
/// Cargo.lock copied, the Nix-written Cargo.toml files over them, `cargo build --offline`
/// (this workspace's target directory, so registry crates are not compiled again).
fn build_tool(tools: &Tools, flake: &Flake, dir: &Path) -> Result<PathBuf> {
    let out = tools
        .nix()
        .args(["eval", "--json", "--offline"])
        .args(NO_IFD)
        .args(flake.overrides())
        .arg(format!(
            "{}#lib.x86_64-linux.kernelJobs.tool",
            flake.flake_ref
        ))
        .args([
            "--apply",
            "t: { crates = t.toolCrates; manifests = t.toolManifests; }",
        ])
        .output()
        .context("running nix eval")?;
    if !out.status.success() {
        bail!("lib.x86_64-linux.kernelJobs.tool: {}", nix_error(&out));
    }
    let src: ToolSource = serde_json::from_slice(&out.stdout).context("the tool's source")?;
    std::fs::create_dir_all(dir)?;
    std::fs::copy(flake.root.join("Cargo.lock"), dir.join("Cargo.lock"))?;
    for c in &src.crates {
        let to = dir.join(c);
        std::fs::create_dir_all(to.parent().context("a crate's parent")?)?;
        let status = Command::new("cp")
            .arg("-a")
            .arg(flake.root.join(c))
            .arg(&to)
            .status()?;
        if !status.success() {
            bail!("copying {c} into {}", dir.display());
        }
    }
    for (path, text) in &src.manifests {
        std::fs::write(dir.join(path), text)?;
    }
    // This workspace's target directory: registry crates are not compiled again (the path
    // crates are, their source being elsewhere). The binary is copied out at once.
    let target = flake.root.join("target");
    let status = Command::new("cargo")
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target)
        .args([
            "build",
            "--quiet",
            "--offline",
            "-p",
            "kiln-build",
            "--bin",
            "kiln-kernel-job",
        ])
        .status()
        .context("building kiln-kernel-job")?;
    if !status.success() {
        bail!(
            "kiln-kernel-job does not build from the workspace nix/kernel-jobs.nix writes for it ({})",
            dir.display()
        );
    }
    let tool = dir.join("kiln-kernel-job");
    std::fs::copy(target.join("debug/kiln-kernel-job"), &tool)?;
    Ok(tool)
}

/// The step.
pub fn check(tools: &Tools, flake: &Flake) -> Result<String> {
    let all = layouts(tools, flake)?;
    let mut chosen: BTreeSet<&str> = BTreeSet::new();
    for root in ROOTS {
        let l = all
            .get(root)
            .with_context(|| format!("no job {root} in the Nix plan"))?;
        chosen.insert(root);
        chosen.extend(l.deps.iter().map(String::as_str));
    }
    let scratch = tempfile::tempdir()?;
    let tool = build_tool(tools, flake, &scratch.path().join("tool"))?;
    let outs = scratch.path().join("jobs");
    // Jobs in dependency order: a job's closure is strictly larger than any of its inputs'.
    let mut order: Vec<&str> = chosen.iter().copied().collect();
    order.sort_by_key(|id| all[*id].deps.len());
    for id in &order {
        let l = &all[*id];
        let dir = scratch.path().join("work").join(id.replace(':', "_"));
        let project = dir.join("project");
        for f in &l.files {
            copy_tree(&flake.root.join(f), &project.join(f), &["target"])?;
        }
        std::fs::write(project.join("Cargo.toml"), &l.cargo_toml)?;
        let farm = dir.join("farm");
        for d in &l.deps {
            let link = farm.join(d.replace(':', "/"));
            std::fs::create_dir_all(link.parent().context("a farm entry's parent")?)?;
            std::os::unix::fs::symlink(outs.join(d.replace(':', "/")), &link)?;
        }
        let mut cmd = Command::new(&tool);
        cmd.args(["--project"])
            .arg(&project)
            .arg("--job")
            .arg(id)
            .arg("--out")
            .arg(outs.join(id.replace(':', "/")))
            .env(NIX_ENV.0, NIX_ENV.1);
        if !l.deps.is_empty() {
            cmd.arg("--prebuilt").arg(&farm);
        }
        // The derivations set a CARGO_HOME of their own (the nightly's prebuilt core needs no
        // crates.io source); -Zbuild-std here (Debian's rustc) resolves std's crates from the
        // user's CARGO_HOME, which the tool keeps.
        let _ = l.rust;
        let out = cmd
            .output()
            .with_context(|| format!("running {}", tool.display()))?;
        if !out.status.success() {
            bail!(
                "{id}, run as its derivation runs it, failed:\n{}",
                String::from_utf8_lossy(&out.stderr).trim_end()
            );
        }
    }
    // The keys the whole workspace's plan has, with the same environment.
    let env = |k: &str| {
        if k == NIX_ENV.0 {
            Some(NIX_ENV.1.into())
        } else {
            std::env::var_os(k)
        }
    };
    let pins = kiln_build::Pins::load(&flake.root.join("Cargo.toml"))?;
    let plan = kiln_build::KernelBuild::new(
        pins.clone(),
        flake.root.join("kernels"),
        scratch.path().join("plan-out"),
    )
    .cache_dir(scratch.path().join("plan-cache"))
    .env(env)
    .bindgen(false)
    .progress(false)
    .plan()?;
    let keys: BTreeMap<&str, &str> = plan
        .jobs
        .iter()
        .map(|j| (j.id.as_str(), j.key.as_str()))
        .collect();
    for id in &order {
        let got = std::fs::read_to_string(outs.join(id.replace(':', "/")).join("key"))?;
        let want = keys
            .get(id)
            .with_context(|| format!("kiln-build's plan has no {id}"))?;
        if got.trim() != *want {
            bail!("{id}: the derivation's key {} is not the workspace plan's {want}: the kernels derivation would refuse it", got.trim());
        }
    }
    // The narrowed build takes every job from the farm.
    let narrowed = move |k: &str| {
        if k == kiln_pins::MATRIX_OVERRIDE_VAR {
            Some(ARCHS.into())
        } else {
            env(k)
        }
    };
    let built = kiln_build::KernelBuild::new(
        pins,
        flake.root.join("kernels"),
        scratch.path().join("build-out"),
    )
    .cache_dir(scratch.path().join("build-cache"))
    .prebuilt(outs.clone())
    .env(narrowed)
    .bindgen(false)
    .progress(false)
    .run()?;
    let s = &built.summary;
    if s.compiled != 0 || s.rust_compiled != 0 {
        bail!("the build with the jobs' outputs as prebuilt still compiled: {s}");
    }
    Ok(format!(
        "kiln-kernel-job built from the workspace Nix writes for it; {} jobs run as their derivations run them (chains of {}), every key = the workspace plan's; KILN_ARCHS=\"{ARCHS}\" build took them all, compiled 0",
        order.len(),
        ROOTS.join(", ")
    ))
}
