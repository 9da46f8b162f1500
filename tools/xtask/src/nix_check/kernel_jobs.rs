//! The kernel build as one derivation per job (nix/kernel-jobs.nix), checked on both systems
//! with import-from-derivation forbidden: one derivation per (source, target) compile, and for
//! the Rust crate its PTX, ptxas per SASS target, a link per target and the `+PTX` merges — the
//! job ids kiln-build's own plan has — and each source's header set, read by Nix from the
//! source text, equal to kiln-build's include scan.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use kiln_build::job::JobId;

use super::outputs::{NO_IFD, SYSTEMS};
use super::{nix_error, tools::Tools, Flake};

/// What the flake's `lib.<system>.kernelJobs` evaluates to.
#[derive(serde::Deserialize)]
pub struct Evaluated {
    /// job id -> drvPath.
    pub jobs: BTreeMap<String, String>,
    /// source -> the headers it reads, relative to kernels/.
    pub headers: BTreeMap<String, Vec<String>>,
    pub sources: Vec<String>,
    pub targets: Vec<String>,
}

/// `lib.<system>.kernelJobs` evaluated (drvPaths forced) with the doubles and no IFD.
pub fn evaluate(tools: &Tools, flake: &Flake, system: &str) -> Result<Evaluated> {
    let out = tools
        .nix()
        .args(["eval", "--json", "--offline"])
        .args(NO_IFD)
        .args(flake.overrides())
        .arg(format!("{}#lib.{system}.kernelJobs", flake.flake_ref))
        .args([
            "--apply",
            "k: { jobs = builtins.mapAttrs (_: d: d.drvPath) k.jobs; inherit (k) headers sources targets; }",
        ])
        .output()
        .context("running nix eval")?;
    if !out.status.success() {
        bail!("lib.{system}.kernelJobs: {}", nix_error(&out));
    }
    serde_json::from_slice(&out.stdout).context("lib.kernelJobs is not the expected JSON")
}

/// The step: both systems, the count, and the header sets against kiln-build's scan.
pub fn check(tools: &Tools, flake: &Flake) -> Result<String> {
    let mut notes = Vec::new();
    for system in SYSTEMS {
        let e = evaluate(tools, flake, system)?;
        let want = e.sources.len() * e.targets.len();
        let compiles = e
            .jobs
            .keys()
            .filter(|id| id.starts_with("compile:"))
            .count();
        if compiles != want {
            bail!(
                "{system}: {compiles} compile job derivations, expected {} sources x {} targets = {want}",
                e.sources.len(),
                e.targets.len()
            );
        }
        // The ids as kiln-build writes them (kiln_build::job::JobId), every kind the Nix plan has.
        let mut expected = Vec::new();
        for t in &e.targets {
            let target = kiln_pins::Target::parse(t).with_context(|| {
                format!("{system}: the Nix plan's target {t:?} is not a target")
            })?;
            expected.push(JobId::Link { target });
            expected.extend(e.sources.iter().map(|s| JobId::Compile {
                source: s.clone(),
                target,
            }));
        }
        for id in expected.iter().map(JobId::to_string) {
            if !e.jobs.contains_key(&id) {
                bail!("{system}: no derivation for {id}");
            }
        }
        let mut distinct: Vec<&String> = e.jobs.values().collect();
        distinct.sort();
        distinct.dedup();
        if distinct.len() != e.jobs.len() {
            bail!("{system}: two jobs share a derivation");
        }
        if let Some(ids) = plan_ids(&flake.root)? {
            let nix: Vec<&String> = e.jobs.keys().collect();
            let plan: Vec<&String> = ids.iter().filter(|id| *id != "combine").collect();
            if nix != plan {
                bail!("{system}: the Nix job ids differ from kiln-build's plan (without its combine):\n  nix:  {nix:?}\n  plan: {plan:?}");
            }
        }
        let scan = scan_headers(&flake.root, &e.sources)?;
        for (s, nix) in &e.headers {
            let ours = scan.get(s).cloned().unwrap_or_default();
            if *nix != ours {
                bail!("{s}: the evaluation-time plan reads {nix:?}, kiln-build's include scan {ours:?}");
            }
        }
        notes.push(format!(
            "{system}: {} job derivations ({} sources x {} targets compiles, and {} links, Rust and merge jobs)",
            e.jobs.len(),
            e.sources.len(),
            e.targets.len(),
            e.jobs.len() - compiles
        ));
    }
    Ok(format!(
        "{}, IFD forbidden; every source's headers = kiln-build's include scan",
        notes.join("; ")
    ))
}

/// Every job id of kiln-build's own plan of `root`'s kernels (`--emit-plan`), sorted; None
/// where no nvcc is found (the plan keys every job with nvcc's version): said, not failed.
fn plan_ids(root: &Path) -> Result<Option<Vec<String>>> {
    let pins = kiln_build::Pins::load(&root.join("Cargo.toml"))?;
    let scratch = tempfile::tempdir()?;
    let plan = kiln_build::KernelBuild::new(pins, root.join("kernels"), scratch.path().join("out"))
        .cache_dir(scratch.path().join("cache"))
        .bindgen(false)
        .progress(false)
        .plan();
    match plan {
        Ok(p) => {
            let mut ids: Vec<String> = p.jobs.into_iter().map(|j| j.id).collect();
            ids.sort();
            Ok(Some(ids))
        }
        Err(e) => {
            eprintln!("nix-check: kiln-build's plan not compared with the Nix jobs ({e})");
            Ok(None)
        }
    }
}

/// kiln-build's own scan of each source, headers named relative to kernels/.
fn scan_headers(root: &Path, sources: &[String]) -> Result<BTreeMap<String, Vec<String>>> {
    let kernels = root.join("kernels");
    let include = format!("-I{}", kernels.join("include").display());
    // The text scan needs no nvcc; it is asked only for a computed include, which the Nix plan
    // refuses anyway.
    let no_nvcc = Path::new("/nonexistent/nvcc");
    let canon = kernels.canonicalize().unwrap_or(kernels.clone());
    let mut out = BTreeMap::new();
    for s in sources {
        let hs = kiln_build::deps::headers(
            no_nvcc,
            &kernels.join(s),
            std::slice::from_ref(&include),
            no_nvcc,
        )
        .with_context(|| format!("scanning {s}"))?;
        let rel: Vec<String> = hs
            .iter()
            .map(|h| h.strip_prefix(&canon).unwrap_or(h).display().to_string())
            .collect();
        out.insert(s.clone(), rel);
    }
    Ok(out)
}
