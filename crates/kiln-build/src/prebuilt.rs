//! Prebuilt job outputs: a directory another executor filled — one Nix derivation per job
//! (nix/kernel-jobs.nix), a build farm running `--emit-plan`'s commands — that kiln-build takes
//! instead of running the jobs itself.
//!
//! Layout: one directory per job, named by its plan id with `:` as `/`
//! (`compile/affine.cu/sm_80/`), holding `output` (the job's output bytes) and `key` (the input
//! key the producer computed for it). kiln-build takes an output only when the recorded key is
//! the key its own plan has for that job — the same sources, headers, flags, toolkit and
//! target — and refuses a mismatch outright: a stale or foreign object never reaches a fatbin.
//! A job with no entry is run as usual.

use std::path::PathBuf;

use crate::error::{io, BuildError};

/// The variable naming a prebuilt directory for a build script.
pub const VAR: &str = "KILN_PREBUILT_KERNELS";

/// A directory of prebuilt job outputs.
#[derive(Debug, Clone)]
pub struct Prebuilt {
    /// The directory.
    pub dir: PathBuf,
}

impl Prebuilt {
    /// The entry directory for job `id` (`compile:affine.cu:sm_80` -> `compile/affine.cu/sm_80`).
    pub fn entry(&self, id: &str) -> PathBuf {
        self.dir.join(id.replace(':', "/"))
    }

    /// The prebuilt output of job `id`, when there is one whose recorded key is `key`; an
    /// error when the recorded key differs (or the entry is incomplete).
    pub fn take(&self, id: &str, key: &str) -> Result<Option<PathBuf>, BuildError> {
        let entry = self.entry(id);
        let (output, key_file) = (entry.join("output"), entry.join("key"));
        if !entry.exists() {
            return Ok(None);
        }
        let refuse = |why: String| BuildError::Prebuilt {
            job: id.to_string(),
            entry: entry.clone(),
            message: why,
        };
        if !output.is_file() || !key_file.is_file() {
            return Err(refuse("the entry needs both `output` and `key`".into()));
        }
        let recorded = std::fs::read_to_string(&key_file)
            .map_err(io(format!("reading {}", key_file.display())))?;
        let recorded = recorded.trim();
        if recorded != key {
            return Err(refuse(format!(
                "it was built from other inputs than this build's: recorded key {recorded}, planned key {key} \
                 (a source, header, flag, the toolkit or the target differs); rebuild the prebuilt outputs from this checkout"
            )));
        }
        Ok(Some(output))
    }
}
