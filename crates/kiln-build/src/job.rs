//! The one shape every job of a kernel build has: its id ([`JobId`], written and parsed in one
//! place), the stage it runs in, its target, its cache key and output extension, what it reads
//! and the command that writes its output ([`Job`]). The plan (`--emit-plan`), the executor,
//! prebuilt outputs and `kiln-kernel-job` all take a job's facts from here, and the Nix job
//! planner's ids are checked against the plan's (`cargo xtask nix-check`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::Target;
use serde::{Deserialize, Serialize};

use crate::cache::Cache;
use crate::error::BuildError;
use crate::host::HostJob;
use crate::jobs::{AssembleJob, CompileJob, LinkJob};
use crate::rust::{self, KernelRustc, MergeJob, PtxasJob, RustPtxJob};
use crate::toolkit::Toolkit;

/// Which step a job belongs to, in run order; the jobs of one stage are independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// nvcc per (source, target), and the Rust crate's one PTX.
    Compile,
    /// `ptxas -c` of the Rust PTX per SASS target.
    Assemble,
    /// nvlink per target.
    Link,
    /// The Rust PTX appended to a `+PTX` target's linked PTX (builtin `ptx-merge`).
    Merge,
    /// `fatbinary --image3` of every target's module.
    Combine,
}

impl Stage {
    /// Every stage, in run order.
    pub const ALL: [Stage; 5] = [
        Stage::Compile,
        Stage::Assemble,
        Stage::Link,
        Stage::Merge,
        Stage::Combine,
    ];
}

/// A job's id in the plan, in prebuilt directories (`:` as `/`) and in progress lines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum JobId {
    /// `compile:<source>:<target>`: nvcc, device-only, one source for one target.
    Compile {
        /// The source relative to the kernels directory.
        source: String,
        /// The target it is compiled for.
        target: Target,
    },
    /// `host:<source>`: a host-launched source with its host code, every target.
    Host {
        /// The source relative to the kernels directory.
        source: String,
    },
    /// `ptxas:<source>:<target>`: a `+PTX` entry's PTX assembled for its SASS target.
    Assemble {
        /// The source relative to the kernels directory.
        source: String,
        /// The SASS target.
        target: Target,
    },
    /// `rust:ptx`: the Rust kernel crate's one PTX.
    RustPtx,
    /// `ptxas:<target>`: the Rust PTX as an object for one SASS target.
    Ptxas {
        /// The SASS target.
        target: Target,
    },
    /// `link:<target>`: nvlink of one target's objects.
    Link {
        /// The target linked.
        target: Target,
    },
    /// `merge:<target>`: the Rust PTX appended to a `+PTX` target's linked PTX.
    Merge {
        /// The `+PTX` target.
        target: Target,
    },
    /// `combine` (one module) or `combine:<source>` (a per-source module): `fatbinary`.
    Combine {
        /// The source of a per-source module.
        module: Option<String>,
    },
}

impl JobId {
    /// The stage the job runs in.
    pub fn stage(&self) -> Stage {
        match self {
            JobId::Compile { .. } | JobId::Host { .. } | JobId::RustPtx => Stage::Compile,
            JobId::Assemble { .. } | JobId::Ptxas { .. } => Stage::Assemble,
            JobId::Link { .. } => Stage::Link,
            JobId::Merge { .. } => Stage::Merge,
            JobId::Combine { .. } => Stage::Combine,
        }
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobId::Compile { source, target } => write!(f, "compile:{source}:{}", target.name()),
            JobId::Host { source } => write!(f, "host:{source}"),
            JobId::Assemble { source, target } => write!(f, "ptxas:{source}:{}", target.name()),
            JobId::RustPtx => f.write_str("rust:ptx"),
            JobId::Ptxas { target } => write!(f, "ptxas:{}", target.name()),
            JobId::Link { target } => write!(f, "link:{}", target.name()),
            JobId::Merge { target } => write!(f, "merge:{}", target.name()),
            JobId::Combine { module: None } => f.write_str("combine"),
            JobId::Combine { module: Some(m) } => write!(f, "combine:{m}"),
        }
    }
}

/// What a job's command needs from its build: the tools, the shared flags, the cache.
pub(crate) struct JobContext<'a> {
    /// The verified nvcc, ptxas, nvlink.
    pub toolkit: &'a Toolkit,
    /// The nvcc flags every compile shares.
    pub flags: &'a [String],
    /// The cache every output is keyed into.
    pub cache: &'a Cache,
    /// The kernel rustc, when there is a Rust kernel crate.
    pub rustc: Option<&'a KernelRustc>,
}

/// What every job kind answers: the plan prints it, the executor runs it, a prebuilt output is
/// filed under it.
pub(crate) trait Job {
    /// Its id.
    fn id(&self) -> JobId;
    /// The target as the plan shows it ("sm_80"; the PTX's CPU for the Rust PTX; empty for a
    /// host compile, which builds every target).
    fn target_text(&self) -> String;
    /// Its input key: the name of its output in the cache, and what a prebuilt output records.
    fn key(&self) -> &str;
    /// Its output's extension in the cache.
    fn ext(&self) -> &'static str;
    /// The files the command reads.
    fn inputs(&self, cx: &JobContext<'_>) -> Vec<PathBuf>;
    /// The command writing the output to `output`.
    fn command(&self, cx: &JobContext<'_>, output: &Path) -> Result<Command, BuildError>;
}

impl Job for CompileJob {
    fn id(&self) -> JobId {
        JobId::Compile {
            source: self.name.clone(),
            target: self.target,
        }
    }
    fn target_text(&self) -> String {
        self.target.name()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn ext(&self) -> &'static str {
        CompileJob::ext(self)
    }
    fn inputs(&self, _: &JobContext<'_>) -> Vec<PathBuf> {
        std::iter::once(self.source.clone())
            .chain(self.headers.iter().cloned())
            .collect()
    }
    fn command(&self, cx: &JobContext<'_>, output: &Path) -> Result<Command, BuildError> {
        Ok(CompileJob::command(self, cx.toolkit, cx.flags, output))
    }
}

/// A host compile; kiln-build also strips the object's `tmpxft_…` file symbol
/// ([`crate::host`]), which an outside executor's output keeps (valid, not byte-identical).
impl Job for HostJob {
    fn id(&self) -> JobId {
        JobId::Host {
            source: self.name.clone(),
        }
    }
    fn target_text(&self) -> String {
        String::new()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn ext(&self) -> &'static str {
        "o"
    }
    fn inputs(&self, _: &JobContext<'_>) -> Vec<PathBuf> {
        std::iter::once(self.source.clone())
            .chain(self.headers.iter().cloned())
            .collect()
    }
    fn command(&self, cx: &JobContext<'_>, output: &Path) -> Result<Command, BuildError> {
        Ok(HostJob::command(self, cx.toolkit, cx.flags, output))
    }
}

impl Job for AssembleJob {
    fn id(&self) -> JobId {
        JobId::Assemble {
            source: self.name.clone(),
            target: self.target,
        }
    }
    fn target_text(&self) -> String {
        self.target.name()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn ext(&self) -> &'static str {
        "cubin"
    }
    fn inputs(&self, _: &JobContext<'_>) -> Vec<PathBuf> {
        vec![self.ptx.clone()]
    }
    fn command(&self, cx: &JobContext<'_>, output: &Path) -> Result<Command, BuildError> {
        Ok(AssembleJob::command(self, cx.toolkit, output))
    }
}

impl Job for RustPtxJob {
    fn id(&self) -> JobId {
        JobId::RustPtx
    }
    fn target_text(&self) -> String {
        rust::PTX_CPU.into()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn ext(&self) -> &'static str {
        rust::RUST_PTX_EXT
    }
    fn inputs(&self, cx: &JobContext<'_>) -> Vec<PathBuf> {
        let mut inputs = self.krate.files.clone();
        inputs.push(self.layout_file(cx.cache));
        inputs
    }
    fn command(&self, cx: &JobContext<'_>, output: &Path) -> Result<Command, BuildError> {
        let rustc = cx
            .rustc
            .ok_or_else(|| BuildError::Env("the Rust PTX job needs the kernel rustc".into()))?;
        Ok(RustPtxJob::command(self, rustc, cx.cache, output))
    }
}

impl Job for PtxasJob {
    fn id(&self) -> JobId {
        JobId::Ptxas {
            target: self.target,
        }
    }
    fn target_text(&self) -> String {
        self.target.name()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn ext(&self) -> &'static str {
        "rs.o"
    }
    fn inputs(&self, _: &JobContext<'_>) -> Vec<PathBuf> {
        vec![self.ptx.clone()]
    }
    fn command(&self, cx: &JobContext<'_>, output: &Path) -> Result<Command, BuildError> {
        Ok(PtxasJob::command(self, cx.toolkit, output))
    }
}

impl Job for LinkJob {
    fn id(&self) -> JobId {
        JobId::Link {
            target: self.target,
        }
    }
    fn target_text(&self) -> String {
        self.target.name()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn ext(&self) -> &'static str {
        LinkJob::ext(self)
    }
    fn inputs(&self, _: &JobContext<'_>) -> Vec<PathBuf> {
        self.inputs.clone()
    }
    fn command(&self, cx: &JobContext<'_>, output: &Path) -> Result<Command, BuildError> {
        LinkJob::command(self, cx.toolkit, cx.cache, output)
    }
}

/// The merge is a builtin (`ptx-merge`): its command is the ptxas check run on the output.
impl Job for MergeJob {
    fn id(&self) -> JobId {
        JobId::Merge {
            target: self.target,
        }
    }
    fn target_text(&self) -> String {
        self.target.name()
    }
    fn key(&self) -> &str {
        &self.key
    }
    fn ext(&self) -> &'static str {
        "ptx"
    }
    fn inputs(&self, _: &JobContext<'_>) -> Vec<PathBuf> {
        self.inputs.to_vec()
    }
    fn command(&self, cx: &JobContext<'_>, output: &Path) -> Result<Command, BuildError> {
        Ok(self.check_command(cx.toolkit, cx.cache, output))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_written_as_the_plan_names_it() {
        let t = |s: &str| Target::parse(s).unwrap();
        let cases = [
            (
                JobId::Compile {
                    source: "sub/a.cu".into(),
                    target: t("sm_90a"),
                },
                "compile:sub/a.cu:sm_90a",
                Stage::Compile,
            ),
            (
                JobId::Host {
                    source: "launch.cu".into(),
                },
                "host:launch.cu",
                Stage::Compile,
            ),
            (
                JobId::Assemble {
                    source: "a.cu".into(),
                    target: t("sm_90"),
                },
                "ptxas:a.cu:sm_90",
                Stage::Assemble,
            ),
            (JobId::RustPtx, "rust:ptx", Stage::Compile),
            (
                JobId::Ptxas { target: t("sm_80") },
                "ptxas:sm_80",
                Stage::Assemble,
            ),
            (
                JobId::Link {
                    target: t("compute_120"),
                },
                "link:compute_120",
                Stage::Link,
            ),
            (
                JobId::Merge {
                    target: t("compute_120"),
                },
                "merge:compute_120",
                Stage::Merge,
            ),
            (JobId::Combine { module: None }, "combine", Stage::Combine),
            (
                JobId::Combine {
                    module: Some("a.cu".into()),
                },
                "combine:a.cu",
                Stage::Combine,
            ),
        ];
        for (id, text, stage) in cases {
            assert_eq!(id.to_string(), text);
            assert_eq!(id.stage(), stage, "{text}");
        }
    }
}
