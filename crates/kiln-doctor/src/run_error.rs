//! Why a program the doctor runs (nvcc, a host compiler, Python, its own probe child) gave no
//! usable answer. Each message is the one a check prints; the variants keep the failures apart.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// A program that could not be run, failed, or answered with nothing readable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// The program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program as the message names it.
        program: String,
        /// Why it could not start.
        source: std::io::Error,
    },
    /// It ran and exited unsuccessfully.
    #[error("{command} failed: {detail}")]
    Failed {
        /// The command as the message names it.
        command: String,
        /// What it said (trimmed).
        detail: String,
    },
    /// `nvcc --version` printed no version.
    #[error("{command} printed no version: {output:?}")]
    NoVersion {
        /// "`/path/nvcc --version`".
        command: String,
        /// What it printed (trimmed).
        output: String,
    },
    /// No `python3` on PATH and none named.
    #[error("no python3 on PATH (Python packages not inventoried)")]
    NoPython,
    /// Python ran but printed no inventory line.
    #[error("{program} printed no inventory ({source}): {line}")]
    NoInventory {
        /// The Python that ran.
        program: String,
        /// Why its last `{` line is not an inventory.
        source: serde_json::Error,
        /// That line, at most 200 characters.
        line: String,
    },
    /// The probe child could not be started.
    #[error("cannot run the probe {}: {source}", program.display())]
    ProbeSpawn {
        /// The probe program.
        program: PathBuf,
        /// Why it could not start.
        source: std::io::Error,
    },
    /// The probe child printed a result that does not read.
    #[error("unreadable probe output {line:?}: {source}")]
    ProbeOutput {
        /// Its result line.
        line: String,
        /// Why it does not read.
        source: serde_json::Error,
    },
    /// The probe child failed or printed no result.
    #[error("the probe exited with {status} without a result: {stderr}")]
    ProbeExit {
        /// How it exited.
        status: ExitStatus,
        /// Its stderr (trimmed).
        stderr: String,
    },
}

impl RunError {
    /// `program` failed to start, named as `{program:?}` (a command's program).
    pub(crate) fn spawn(program: &std::ffi::OsStr) -> impl FnOnce(std::io::Error) -> RunError {
        let program = format!("{program:?}");
        move |source| RunError::Spawn { program, source }
    }

    /// `program` failed to start, named by its path.
    pub(crate) fn spawn_path(program: &Path) -> impl FnOnce(std::io::Error) -> RunError {
        let program = program.display().to_string();
        move |source| RunError::Spawn { program, source }
    }
}
