//! The build as data: every job of a kernel build — nvcc compiles per (source, target), the Rust
//! kernel crate's PTX, `ptxas` per SASS target, `nvlink` per target, the Rust PTX appended to a
//! `+PTX` target's module, and the `fatbinary` combine — built once ([`BuildPlan::new`]), run by
//! [`crate::KernelBuild::run`] and printed by [`crate::KernelBuild::plan`] (`--emit-plan`), so an
//! executor other than kiln-build (a CI matrix, a build farm) can run the same jobs.
//!
//! Outputs are named by their cache key, which is known before anything runs (a job's key is
//! built from its inputs' keys): an executor that runs the jobs and puts each output at its path
//! hands the work back — kiln-build then finds every job cached, compiles nothing, and combines
//! the same bytes into the same fatbin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::{Target, TargetKind};
use serde::{Deserialize, Serialize};

use crate::cache::Cache;
use crate::error::BuildError;
use crate::job::{Job, JobContext, JobId};
use crate::jobs::{AssembleJob, CompileJob, CompileMode, CompileSettings, LinkJob};
use crate::rust::{self, KernelRustc, MergeJob, PtxasJob, RustPtxJob};
use crate::toolkit::Toolkit;

pub use crate::job::Stage;

/// One job of a [`Plan`], self-contained: what it reads, the exact command, where it writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedJob {
    /// `compile:<source>:<target>`, `rust:ptx`, `ptxas:<target>`, `link:<target>`,
    /// `merge:<target>` or `combine`.
    pub id: String,
    /// The stage it runs in; jobs of one stage can run in parallel.
    pub stage: Stage,
    /// The target ("sm_80" …); the PTX's CPU for `rust:ptx`; empty for `combine`.
    pub target: String,
    /// Files the command reads (sources and headers, the objects it links, …).
    pub inputs: Vec<PathBuf>,
    /// argv, program first. For `builtin: ptx-merge` it is the check run on the output after
    /// the builtin wrote it.
    pub command: Vec<String>,
    /// Variables the command runs with (the Rust job's). An executor also drops the outer
    /// cargo's CARGO_* (but CARGO_HOME, CARGO_NET_OFFLINE), RUSTC*, RUSTFLAGS, RUSTDOCFLAGS,
    /// TARGET, HOST and OUT_DIR, as kiln-build does.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// `ptx-merge`: write `output` = `inputs[0]` with trailing whitespace trimmed, a blank
    /// line, the comment line kiln-build writes, then every line of `inputs[1]` but its
    /// `.version`/`.target`/`.address_size` lines ([`rust::merge_ptx_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<String>,
    /// Where the command writes; inside the cache its file name is `<cache key>.<ext>`.
    pub output: PathBuf,
    /// The job's input key ([`crate::cache::KeyBuilder`]): what a prebuilt output of this job
    /// records (`KILN_PREBUILT_KERNELS`, [`crate::prebuilt`]). Empty for the combine.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
}

/// A kernel build as data (`--emit-plan`): the jobs for an outside executor to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Version of the plan's JSON layout (currently 3: jobs carry their input key).
    pub format: u32,
    /// The cache directory the outputs belong in (`KernelBuild::cache_dir` of the final build).
    pub cache_dir: PathBuf,
    /// Every job, stage by stage ([`Stage`]); run the stages in order.
    pub jobs: Vec<PlannedJob>,
}

impl Plan {
    /// The plan as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan serializes")
    }
}

/// The Rust kernel crate's jobs.
#[derive(Debug, Clone)]
pub struct RustJobs {
    /// The kernel rustc (and its cargo) that builds the crate.
    pub rustc: KernelRustc,
    /// The crate's one PTX compile.
    pub ptx: RustPtxJob,
    /// `ptxas -c` of that PTX for each SASS target, to link with the C++ objects.
    pub ptxas: Vec<PtxasJob>,
    /// The Rust PTX appended to each `+PTX` target's linked PTX.
    pub merges: Vec<MergeJob>,
}

/// One build's jobs, typed: what `run` executes and `plan` prints.
#[derive(Debug, Clone)]
pub struct BuildPlan {
    /// The verified nvcc (and fatbinary, nvlink) every job runs.
    pub toolkit: Toolkit,
    /// The nvcc flags every compile job shares.
    pub flags: Vec<String>,
    /// How every source is compiled; [`CompileMode::Whole`] means one module per source.
    pub mode: CompileMode,
    /// The cache the jobs' outputs are keyed into.
    pub cache: Cache,
    /// The `.cu` sources, one compile per target each.
    pub sources: Vec<PathBuf>,
    /// The kernels directory (source names are relative to it).
    pub kernels_dir: PathBuf,
    /// The matrix's targets: SASS ones and `+PTX` ones.
    pub targets: Vec<Target>,
    /// nvcc compiles, one per (source, target) — but the SASS of a `+PTX` entry in a
    /// whole-program build, which is [`BuildPlan::assembles`].
    pub compiles: Vec<CompileJob>,
    /// `ptxas` of a `+PTX` entry's PTX for its SASS target (whole-program builds).
    pub assembles: Vec<AssembleJob>,
    /// Host-launched sources (`host-sources`), each compiled with its host code for every
    /// target; archived into [`BuildPlan::static_lib`].
    pub hosts: Vec<crate::host::HostJob>,
    /// `lib<name>.a` in the output directory, when there are host sources.
    pub static_lib: Option<PathBuf>,
    /// The Rust kernel crate's jobs, if there is a `kernels/rust`.
    pub rust: Option<RustJobs>,
    /// nvlink jobs, one per target.
    pub links: Vec<LinkJob>,
    /// Where the combined fatbin is written.
    pub fatbin: PathBuf,
}

/// What [`BuildPlan::new`] is built from: the located tools, the scanned sources.
pub struct PlanInputs<'a> {
    /// The verified nvcc (and fatbinary, nvlink) beside it.
    pub toolkit: Toolkit,
    /// The nvcc flags every compile job gets.
    pub flags: Vec<String>,
    /// nvcc's own environment variables ([`crate::jobs::NVCC_ENV`]) as the jobs run with them.
    pub nvcc_env: Vec<(String, Option<String>)>,
    /// How the sources are compiled (and so whether there is a device link).
    pub mode: CompileMode,
    /// The cache the jobs' outputs are keyed into.
    pub cache: Cache,
    /// The kernels directory; paths under it are keyed relative to it.
    pub kernels_dir: &'a Path,
    /// The project root; include directories and headers under it are keyed relative to it.
    pub root: &'a Path,
    /// Each source with the project headers it reads.
    pub sources: Vec<(PathBuf, Vec<PathBuf>)>,
    /// Host-launched sources with their headers, and the static library's path.
    pub host_sources: Vec<(PathBuf, Vec<PathBuf>)>,
    /// Where the static library of the host sources goes.
    pub static_lib: PathBuf,
    /// The targets to build, from the arch matrix.
    pub targets: Vec<Target>,
    /// The Rust kernel crate and the kernel rustc for it, if there is a `kernels/rust`.
    pub rust: Option<(rust::RustCrate, KernelRustc)>,
    /// Where the combined fatbin goes.
    pub fatbin: PathBuf,
}

impl BuildPlan {
    /// Keys every job (reading every source and header), without running anything.
    pub fn new(mut i: PlanInputs<'_>) -> Result<BuildPlan, BuildError> {
        if i.mode == CompileMode::Whole && i.rust.is_some() {
            return Err(BuildError::Env(
                "modules = \"per-source\" with a kernels/rust crate is not supported yet: \
                 build the Rust kernels in one module (the default)"
                    .into(),
            ));
        }
        let (compiles, assembles) = plan_compiles(&i)?;
        let hosts = plan_hosts(&i)?;
        let rust = plan_rust(&mut i)?;
        let static_lib = (!hosts.is_empty()).then(|| i.static_lib.clone());
        let links = match i.mode {
            CompileMode::Whole => Vec::new(),
            _ if compiles.is_empty() && rust.is_none() => Vec::new(),
            _ => link_jobs(&i, &compiles, rust.as_ref()),
        };
        let mut plan = BuildPlan {
            toolkit: i.toolkit,
            flags: i.flags,
            mode: i.mode,
            cache: i.cache,
            sources: i.sources.into_iter().map(|(s, _)| s).collect(),
            kernels_dir: i.kernels_dir.to_path_buf(),
            targets: i.targets,
            compiles,
            assembles,
            hosts,
            static_lib,
            rust,
            links,
            fatbin: i.fatbin,
        };
        if let Some(r) = plan.rust.as_mut() {
            r.merges = (plan.links.iter())
                .filter(|l| l.target.kind == TargetKind::Ptx)
                .map(|l| MergeJob::new(l, &r.ptx, &plan.cache, &plan.toolkit))
                .collect();
        }
        Ok(plan)
    }

    /// Each target's final module: the merged PTX where the Rust PTX is appended, else the
    /// linked output.
    pub fn modules(&self) -> Vec<(Target, PathBuf)> {
        let merges = self.rust.iter().flat_map(|r| &r.merges);
        (self.links.iter())
            .map(|l| match merges.clone().find(|m| m.target == l.target) {
                Some(m) => (l.target, self.cache.path(&m.key, "ptx")),
                None => (l.target, self.cache.path(&l.key, l.ext())),
            })
            .collect()
    }

    /// Per-source modules ([`CompileMode::Whole`]): each source's name, stem and its targets'
    /// outputs, in source order.
    pub fn source_modules(&self) -> Vec<SourceModule> {
        (self.sources.iter())
            .map(|src| {
                let compiled = (self.compiles.iter())
                    .filter(|j| &j.source == src)
                    .map(|j| (j.target, self.cache.path(&j.key, j.ext())));
                let assembled = (self.assembles.iter())
                    .filter(|j| &j.source == src)
                    .map(|j| (j.target, self.cache.path(&j.key, "cubin")));
                let mut outputs: Vec<(Target, PathBuf)> = compiled.chain(assembled).collect();
                // Matrix order (SASS then PTX), as a one-module fatbin lists its images.
                outputs.sort_by_key(|(t, _)| self.targets.iter().position(|x| x == t));
                SourceModule {
                    name: source_name(src, &self.kernels_dir),
                    stem: module_stem(src, &self.kernels_dir),
                    outputs,
                }
            })
            .collect()
    }

    /// Where a per-source module's fatbin is written: beside the combined fatbin, under
    /// `modules/<stem>.fatbin`.
    pub fn module_fatbin(&self, stem: &str) -> PathBuf {
        let dir = self.fatbin.parent().unwrap_or(Path::new("."));
        dir.join("modules").join(format!("{stem}.fatbin"))
    }

    /// What the jobs' commands need from this build.
    pub(crate) fn context(&self) -> JobContext<'_> {
        JobContext {
            toolkit: &self.toolkit,
            flags: &self.flags,
            cache: &self.cache,
            rustc: self.rust.as_ref().map(|r| &r.rustc),
        }
    }

    /// Every job but the combine, in plan order: compiles, assemblies, host compiles, the Rust
    /// PTX and its ptxas, links, merges.
    pub(crate) fn jobs(&self) -> Vec<&dyn Job> {
        let mut jobs: Vec<&dyn Job> = Vec::new();
        jobs.extend(self.compiles.iter().map(|j| j as &dyn Job));
        jobs.extend(self.assembles.iter().map(|j| j as &dyn Job));
        jobs.extend(self.hosts.iter().map(|j| j as &dyn Job));
        if let Some(r) = &self.rust {
            jobs.push(&r.ptx);
            jobs.extend(r.ptxas.iter().map(|j| j as &dyn Job));
        }
        jobs.extend(self.links.iter().map(|j| j as &dyn Job));
        jobs.extend(
            self.rust
                .iter()
                .flat_map(|r| &r.merges)
                .map(|j| j as &dyn Job),
        );
        jobs
    }

    /// The plan as data, every job with its exact command.
    pub fn to_plan(&self) -> Result<Plan, BuildError> {
        let cx = self.context();
        let mut jobs = Vec::new();
        for j in self.jobs() {
            let output = self.cache.path(j.key(), j.ext());
            let cmd = j.command(&cx, &output)?;
            let id = j.id();
            let merge = matches!(id, JobId::Merge { .. });
            let mut p = planned(id, j.target_text(), j.inputs(&cx), &cmd, output);
            if merge {
                p.builtin = Some("ptx-merge".into());
            }
            jobs.push(p);
        }
        match self.mode {
            CompileMode::Whole => {
                for m in self.source_modules() {
                    let out = self.module_fatbin(&m.stem);
                    jobs.push(self.combine_job(Some(m.name), m.outputs, out));
                }
            }
            _ => jobs.push(self.combine_job(None, self.modules(), self.fatbin.clone())),
        }
        Ok(Plan {
            format: 3,
            cache_dir: self.cache.dir.clone(),
            jobs,
        })
    }

    fn combine_job(
        &self,
        module: Option<String>,
        modules: Vec<(Target, PathBuf)>,
        out: PathBuf,
    ) -> PlannedJob {
        let cmd = crate::fatbin::command(&self.toolkit, &modules, &out);
        let inputs = modules.into_iter().map(|(_, p)| p).collect();
        planned(JobId::Combine { module }, String::new(), inputs, &cmd, out)
    }
}

/// One source's module in a per-source build.
#[derive(Debug, Clone)]
pub struct SourceModule {
    /// The source's name relative to the kernels directory ("sub/softmax.cu").
    pub name: String,
    /// The module's name: the relative path without `.cu`, `/` as `_` ("sub_softmax").
    pub stem: String,
    /// Each target's whole-program output.
    pub outputs: Vec<(Target, PathBuf)>,
}

fn module_stem(source: &Path, kernels_dir: &Path) -> String {
    let rel = source.strip_prefix(kernels_dir).unwrap_or(source);
    rel.with_extension("")
        .display()
        .to_string()
        .replace(['/', '\\'], "_")
}

/// What every compile of the build shares.
fn settings<'a>(i: &'a PlanInputs<'_>) -> CompileSettings<'a> {
    CompileSettings {
        flags: &i.flags,
        env: &i.nvcc_env,
        mode: i.mode,
        kernels_dir: i.kernels_dir,
        root: i.root,
    }
}

/// nvcc per (source, target); in a whole-program build a `+PTX` entry's SASS is assembled
/// from its PTX instead (one front end for both).
fn plan_compiles(i: &PlanInputs<'_>) -> Result<(Vec<CompileJob>, Vec<AssembleJob>), BuildError> {
    let settings = settings(i);
    let from_ptx = |t: &Target| {
        i.mode == CompileMode::Whole
            && t.kind == TargetKind::Sass
            && i.targets.contains(&Target::ptx(t.arch))
    };
    let (mut compiles, mut assembles) = (Vec::new(), Vec::new());
    for (source, headers) in &i.sources {
        let name = source_name(source, i.kernels_dir);
        for t in i.targets.iter().filter(|t| !from_ptx(t)) {
            let job = CompileJob::new(source, &name, headers.clone(), *t, &settings, &i.toolkit)?;
            compiles.push(job);
        }
        for t in i.targets.iter().filter(|t| from_ptx(t)) {
            let ptx_job = (compiles.iter().rev())
                .find(|j| j.source == *source && j.target == Target::ptx(t.arch))
                .expect("the +PTX entry's PTX compile was planned above");
            assembles.push(AssembleJob::new(*t, ptx_job, &i.cache, &i.toolkit));
        }
    }
    Ok((compiles, assembles))
}

/// Host-launched sources, each compiled with its host code for every target.
fn plan_hosts(i: &PlanInputs<'_>) -> Result<Vec<crate::host::HostJob>, BuildError> {
    let settings = settings(i);
    (i.host_sources.iter())
        .map(|(source, headers)| {
            let name = source_name(source, i.kernels_dir);
            crate::host::HostJob::new(
                source,
                &name,
                headers.clone(),
                &i.targets,
                &settings,
                &i.toolkit,
            )
        })
        .collect()
}

/// The Rust crate's PTX and its ptxas per SASS target (the merges follow the links).
fn plan_rust(i: &mut PlanInputs<'_>) -> Result<Option<RustJobs>, BuildError> {
    let Some((krate, rustc)) = i.rust.take() else {
        return Ok(None);
    };
    let ptx = RustPtxJob::new(krate, &rustc, i.kernels_dir)?;
    let ptxas = (i.targets.iter())
        .filter(|t| t.kind == TargetKind::Sass)
        .map(|t| PtxasJob::new(*t, &ptx, &i.cache, &i.toolkit))
        .collect();
    Ok(Some(RustJobs {
        rustc,
        ptx,
        ptxas,
        merges: Vec::new(),
    }))
}

/// Per target: the C++ objects of that target, then the Rust object for a SASS target.
fn link_jobs(i: &PlanInputs<'_>, compiles: &[CompileJob], rust: Option<&RustJobs>) -> Vec<LinkJob> {
    let rust_objects = |t: Target| {
        (rust.into_iter().flat_map(|r| &r.ptxas))
            .filter(move |j| j.target == t)
            .map(|j| (j.key.clone(), i.cache.path(&j.key, "rs.o")))
    };
    (i.targets.iter())
        .map(|t| {
            let inputs = (compiles.iter())
                .filter(|j| j.target == *t)
                .map(|j| (j.key.clone(), i.cache.path(&j.key, j.ext())))
                .chain(rust_objects(*t))
                .collect();
            LinkJob::new(*t, inputs, &i.toolkit)
        })
        .collect()
}

fn planned(
    id: JobId,
    target: String,
    inputs: Vec<PathBuf>,
    cmd: &Command,
    output: PathBuf,
) -> PlannedJob {
    let env = (cmd.get_envs())
        .filter_map(|(k, v)| Some((k.to_string_lossy().into(), v?.to_string_lossy().into())))
        .collect();
    // The cache names every job's output `<key>.<ext>`: the key is the file name's stem.
    let key = (output.file_name().and_then(|n| n.to_str()))
        .and_then(|n| n.split('.').next())
        .filter(|k| k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_default()
        .to_string();
    PlannedJob {
        stage: id.stage(),
        id: id.to_string(),
        target,
        inputs,
        command: argv(cmd),
        env,
        builtin: None,
        output,
        key,
    }
}

/// A source's name relative to the kernels directory (messages, job ids, the manifest).
pub(crate) fn source_name(source: &Path, kernels_dir: &Path) -> String {
    source
        .strip_prefix(kernels_dir)
        .unwrap_or(source)
        .display()
        .to_string()
}

pub(crate) fn argv(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}
