//! The build as data: every compile and link job with its inputs, exact command and output, so
//! an executor other than kiln-build (a CI matrix, a build farm) can run them.
//!
//! Outputs are named by their content-hash cache key: an executor that runs the jobs and puts
//! each output at its path (or copies it into the cache directory of a later kiln-build) hands
//! the work back — kiln-build then finds every job cached, compiles nothing, and combines the
//! same bytes into the same fatbin.

use std::path::PathBuf;
use std::process::Command;

use serde::{Deserialize, Serialize};

/// Which step a job belongs to; every `Link` job's inputs are `Compile` outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Compile,
    Link,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedJob {
    /// `compile:<source>:<target>` or `link:<target>`.
    pub id: String,
    pub stage: Stage,
    pub target: String,
    /// Files the command reads (source and project headers, or the objects it links).
    pub inputs: Vec<PathBuf>,
    /// argv, program first.
    pub command: Vec<String>,
    /// Where the command writes; the file name is `<cache key>.<ext>`.
    pub output: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub format: u32,
    /// The cache directory the outputs belong in (`KernelBuild::cache_dir` of the final build).
    pub cache_dir: PathBuf,
    /// Run every `compile` job, then every `link` job; jobs of one stage are independent.
    pub jobs: Vec<PlannedJob>,
}

impl Plan {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan serializes")
    }
}

pub(crate) fn argv(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}
