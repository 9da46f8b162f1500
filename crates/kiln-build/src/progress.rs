//! Progress lines while compiling and the one-paragraph summary after.

use std::fmt;
use std::time::Duration;

/// Counts for one kernel build.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Summary {
    /// The `.cu` sources built (each compiled once per target).
    pub sources: usize,
    /// "sm_80", …, "compute_120"
    pub targets: Vec<String>,
    /// nvcc compile jobs in the plan (`compiled` + `cached`).
    pub compile_jobs: usize,
    /// Compile jobs that ran.
    pub compiled: usize,
    /// Compile jobs whose output came from the cache.
    pub cached: usize,
    /// nvlink jobs in the plan (`linked` + the cached ones).
    pub link_jobs: usize,
    /// nvlink jobs that ran (the rest came from the cache).
    pub linked: usize,
    /// Jobs of the Rust kernel crate (its PTX, ptxas per SASS target, PTX merges; 0 without
    /// kernels/rust), and how many of them ran (not from the cache).
    #[serde(default)]
    pub rust_jobs: usize,
    /// How many of `rust_jobs` ran rather than came from the cache (merges included).
    #[serde(default)]
    pub rust_compiled: usize,
    /// Of `rust_compiled`, the PTX merges: a merge joins the Rust PTX to a `+PTX` target's
    /// linked C++ PTX, so it reruns after a C++ edit too (no Rust compile does).
    #[serde(default)]
    pub rust_merged: usize,
    /// Jobs whose output came from a prebuilt directory (counted as cached too).
    #[serde(default)]
    pub prebuilt: usize,
    /// Seconds the jobs that ran took, summed by kind ("compiled", "assembled", "linked",
    /// "ptxas", "merged"), and "describe+combine" (reading the outputs for the manifest, then
    /// fatbinary): where a build spends its time.
    #[serde(default)]
    pub job_seconds: std::collections::BTreeMap<String, f64>,
    /// Wall-clock seconds for the whole build.
    pub wall_seconds: f64,
    /// Size of the combined fatbin.
    pub fatbin_bytes: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kiln-build: {} sources x {} targets ({}): {} compile jobs, {} compiled, {} cached{}; {} of {} links run; {} of {} Rust kernel jobs run; fatbin {} bytes; {:.2} s",
            self.sources,
            self.targets.len(),
            self.targets.join(" "),
            self.compile_jobs,
            self.compiled,
            self.cached,
            if self.prebuilt > 0 {
                format!(" ({} jobs prebuilt)", self.prebuilt)
            } else {
                String::new()
            },
            self.linked,
            self.link_jobs,
            self.rust_compiled,
            self.rust_jobs,
            self.fatbin_bytes,
            self.wall_seconds
        )
    }
}

/// One line per finished job, on stderr.
pub fn job_line(
    done: usize,
    total: usize,
    verb: &str,
    what: &str,
    target: &str,
    elapsed: Duration,
) {
    let status = format!("{verb:<8}");
    eprintln!(
        "[{done:>3}/{total}] {status} {target:<12} {what} ({:.2} s)",
        elapsed.as_secs_f64()
    );
}
