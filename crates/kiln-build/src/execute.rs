//! The local executor of a [`BuildPlan`]: each stage's jobs in parallel under the jobserver,
//! each through the one cache prologue ([`Cache::produce`]) and the one progress line.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cache::{Cache, Outcome};
use crate::error::BuildError;
use crate::job::{Job, Stage};
use crate::plan::BuildPlan;
use crate::pool;
use crate::progress::{self, Summary};

/// How jobs are run: the jobserver, and whether progress lines are printed.
pub(crate) struct Executor<'a> {
    pub client: &'a jobserver::Client,
    pub progress: bool,
    pub prebuilt: Option<&'a crate::prebuilt::Prebuilt>,
}

/// Writes a job's output to the staging path it is given.
pub(crate) type Make<'a> = Box<dyn Fn(&std::path::Path) -> Result<(), BuildError> + Sync + 'a>;

/// One runnable job: how it appears in progress lines, its cache key and extension, how
/// expensive it is expected to be, and what writes its output.
pub(crate) struct Task<'a> {
    /// The job's plan id (`compile:affine.cu:sm_80`), as `--emit-plan` and prebuilt outputs
    /// name it.
    pub id: String,
    /// The key the plan (and a prebuilt output's producer) has for the job; `key` differs only
    /// for links, which run under their inputs' bytes.
    pub plan_key: String,
    pub verb: &'static str,
    pub what: String,
    pub target: String,
    pub key: String,
    pub ext: &'static str,
    pub cost: u64,
    pub kind: Counted,
    pub make: Make<'a>,
}

/// Which summary count a job belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    Compile,
    Link,
    Rust,
    /// The Rust PTX appended to a `+PTX` target's linked PTX: a Rust kernel job in the
    /// summary, but not a Rust compile (a C++ edit reruns it).
    Merge,
}

/// What ran: each task's kind and outcome, in plan order, and the seconds the jobs that ran
/// took, by verb ("compiled", "linked", …).
#[derive(Default)]
pub(crate) struct Ran(
    pub Vec<(Counted, Outcome)>,
    pub std::collections::BTreeMap<String, f64>,
);

impl Ran {
    pub fn count(&self, kind: Counted, cached: bool) -> usize {
        (self.0.iter())
            .filter(|(k, o)| *k == kind && o.cached == cached)
            .count()
    }

    /// Fills the job counts of `summary`.
    pub fn summarize(&self, summary: &mut Summary) {
        summary.compiled = self.count(Counted::Compile, false);
        summary.cached = self.count(Counted::Compile, true);
        summary.compile_jobs = summary.compiled + summary.cached;
        summary.linked = self.count(Counted::Link, false);
        summary.link_jobs = summary.linked + self.count(Counted::Link, true);
        summary.rust_merged = self.count(Counted::Merge, false);
        summary.rust_compiled = self.count(Counted::Rust, false) + summary.rust_merged;
        summary.prebuilt = self.0.iter().filter(|(_, o)| o.prebuilt).count();
        summary.job_seconds = self.1.clone();
        summary.rust_jobs = summary.rust_compiled
            + self.count(Counted::Rust, true)
            + self.count(Counted::Merge, true);
    }
}

impl Executor<'_> {
    /// Runs one stage's tasks (costliest first), reporting each one that did not come from the
    /// cache; every failing task's error, not only the first.
    pub fn stage(
        &self,
        cache: &Cache,
        tasks: &[Task<'_>],
        ran: &mut Ran,
    ) -> Result<(), BuildError> {
        let total = tasks.len();
        let finished = AtomicUsize::new(0);
        let results = pool::run_costliest_first(
            tasks,
            self.client,
            |t| t.cost,
            |t| self.run(cache, t),
            |t, r| {
                let n = finished.fetch_add(1, Ordering::SeqCst) + 1;
                if let (true, Ok(o)) = (self.progress, r) {
                    if !o.cached {
                        progress::job_line(n, total, t.verb, &t.what, &t.target, o.elapsed);
                    }
                }
            },
        );
        let outcomes = all_or_errors(results)?;
        for (t, o) in tasks.iter().zip(&outcomes) {
            if !o.cached {
                *ran.1.entry(t.verb.to_string()).or_default() += o.elapsed.as_secs_f64();
            }
        }
        ran.0.extend(tasks.iter().map(|t| t.kind).zip(outcomes));
        Ok(())
    }
}

impl Executor<'_> {
    /// A prebuilt output whose recorded key is the plan's (refused when it is not), else the
    /// cache or a run.
    fn run(&self, cache: &Cache, t: &Task<'_>) -> Result<Outcome, BuildError> {
        if let Some(p) = self.prebuilt {
            if let Some(output) = p.take(&t.id, &t.plan_key)? {
                let dest = cache.path(&t.key, t.ext);
                crate::cache::alias(&output, &dest)?;
                return Ok(Outcome {
                    output: dest,
                    cached: true,
                    elapsed: std::time::Duration::ZERO,
                    prebuilt: true,
                });
            }
        }
        cache.produce(&t.key, t.ext, &t.make)
    }
}

impl<'a> Task<'a> {
    /// A job's task: its id, key, target and extension from the job itself.
    fn of(
        job: &dyn Job,
        verb: &'static str,
        what: String,
        cost: u64,
        kind: Counted,
        make: Make<'a>,
    ) -> Task<'a> {
        Task {
            id: job.id().to_string(),
            plan_key: job.key().to_string(),
            verb,
            what,
            target: job.target_text(),
            key: job.key().to_string(),
            ext: job.ext(),
            cost,
            kind,
            make,
        }
    }
}

/// The tasks of one stage of `plan` ([`Stage::Combine`] has none: the caller combines after
/// the manifest check). Built when the stage starts, so a link is keyed by the bytes the
/// compiles before it wrote.
pub(crate) fn tasks<'a>(
    plan: &'a BuildPlan,
    stage: Stage,
    client: &'a jobserver::Client,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<Vec<Task<'a>>, BuildError> {
    let tasks = match stage {
        Stage::Compile => compile_tasks(plan, client),
        Stage::Assemble => assemble_tasks(plan),
        Stage::Link => link_tasks(plan, wanted)?,
        Stage::Merge => merge_tasks(plan),
        Stage::Combine => Vec::new(),
    };
    Ok(tasks.into_iter().filter(|t| wanted(&t.id)).collect())
}

/// Expected cost of a compile: the bytes the front end reads (source + headers).
fn bytes(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// The Rust PTX first (the longest job: it may build `core` first), nvcc's compiles, the host
/// compiles (every target in one process: the longest C++ jobs).
fn compile_tasks<'a>(plan: &'a BuildPlan, client: &'a jobserver::Client) -> Vec<Task<'a>> {
    let (tk, cache, flags) = (&plan.toolkit, &plan.cache, &plan.flags);
    let mut tasks = Vec::new();
    if let Some(r) = &plan.rust {
        let make: Make<'a> = Box::new(move |s| r.ptx.produce(&r.rustc, cache, client, s));
        let what = crate::rust::CRATE_DIR.into();
        tasks.push(Task::of(
            &r.ptx,
            "compiled",
            what,
            u64::MAX,
            Counted::Rust,
            make,
        ));
    }
    tasks.extend(plan.compiles.iter().map(|j| {
        let cost = bytes(&j.source) + j.headers.iter().map(|h| bytes(h)).sum::<u64>();
        let make: Make<'a> = Box::new(move |s| j.produce(tk, flags, cache, s));
        Task::of(j, "compiled", j.name.clone(), cost, Counted::Compile, make)
    }));
    tasks.extend(plan.hosts.iter().map(|j| {
        let make: Make<'a> = Box::new(move |s| j.produce(tk, flags, cache, s));
        let mut t = Task::of(
            j,
            "compiled",
            j.name.clone(),
            u64::MAX / 2,
            Counted::Compile,
            make,
        );
        t.target = "host+device".into();
        t
    }));
    tasks
}

/// A `+PTX` entry's SASS assembled from its PTX, and the Rust PTX's object per SASS target.
fn assemble_tasks(plan: &BuildPlan) -> Vec<Task<'_>> {
    let tk = &plan.toolkit;
    let mut tasks: Vec<Task<'_>> = (plan.assembles.iter())
        .map(|j| {
            let make: Make<'_> = Box::new(move |s| j.produce(tk, s));
            Task::of(
                j,
                "assembled",
                j.name.clone(),
                bytes(&j.ptx),
                Counted::Compile,
                make,
            )
        })
        .collect();
    tasks.extend(plan.rust.iter().flat_map(|r| &r.ptxas).map(|j| {
        let make: Make<'_> = Box::new(move |s| j.produce(tk, s));
        Task::of(j, "ptxas", "rust".into(), 0, Counted::Rust, make)
    }));
    tasks
}

/// nvlink per target, run under its inputs' bytes (only the wanted ones are keyed: keying
/// reads every input).
fn link_tasks<'a>(
    plan: &'a BuildPlan,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<Vec<Task<'a>>, BuildError> {
    let (tk, cache) = (&plan.toolkit, &plan.cache);
    (plan.links.iter())
        .filter(|j| wanted(&j.id().to_string()))
        .map(|j| {
            let key = j.bytes_key(tk)?;
            // Output an outside executor put at the plan's path (keyed by the inputs' keys,
            // so by the same inputs): the link is done.
            let (by_plan, by_bytes) = (cache.path(&j.key, j.ext()), cache.path(&key, j.ext()));
            if !by_bytes.is_file() && by_plan.is_file() {
                crate::cache::alias(&by_plan, &by_bytes)?;
            }
            let make: Make<'a> = Box::new(move |s| j.produce(tk, cache, s));
            let mut t = Task::of(j, "linked", "nvlink".into(), 0, Counted::Link, make);
            t.key = key;
            Ok(t)
        })
        .collect()
}

/// The Rust PTX appended to each `+PTX` target's linked PTX.
fn merge_tasks(plan: &BuildPlan) -> Vec<Task<'_>> {
    let (tk, cache) = (&plan.toolkit, &plan.cache);
    (plan.rust.iter().flat_map(|r| &r.merges))
        .map(|j| {
            let make: Make<'_> = Box::new(move |s| j.produce(tk, cache, s));
            Task::of(j, "merged", "rust ptx".into(), 0, Counted::Merge, make)
        })
        .collect()
}

/// Every failing job's error, not only the first: a syntax error in two files shows both.
fn all_or_errors(results: Vec<Result<Outcome, BuildError>>) -> Result<Vec<Outcome>, BuildError> {
    let mut errors: Vec<String> = Vec::new();
    let mut ok = Vec::new();
    let mut first = None;
    for r in results {
        match r {
            Ok(o) => ok.push(o),
            Err(e) => {
                let text = e.to_string();
                if !errors.contains(&text) {
                    errors.push(text);
                }
                first.get_or_insert(e);
            }
        }
    }
    match first {
        None => Ok(ok),
        Some(e) if errors.len() == 1 => Err(e),
        Some(_) => Err(BuildError::Tool {
            tool: "nvcc".into(),
            message: errors.join("\n\n"),
        }),
    }
}
