//! The input could not be read at all (exit code 2 territory). Problems inside a readable input
//! are facts ([`crate::facts::ReadProblem`]) that rules turn into findings.

use std::path::{Path, PathBuf};

/// Why an input could not be audited at all.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// Reading the path failed.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// Neither a wheel, an ELF, a fatbin nor a directory.
    #[error("{0}: not a wheel (zip), an ELF file, a fatbin or a directory")]
    Unrecognized(PathBuf),
    /// A `.whl` that is not a readable zip.
    #[error("{0}: not a readable zip archive: {1}")]
    Zip(PathBuf, String),
    /// Over `--max-total-size`: the path, its size, the limit.
    #[error("{0}: {1} bytes in total, over the limit of {2} (--max-total-size)")]
    TooLarge(PathBuf, u64, u64),
    /// A device, FIFO or socket: what kind.
    #[error("{0}: {1}; only regular files and directories are audited")]
    NotRegular(PathBuf, &'static str),
    /// The file changed while it was read.
    #[error("{0}: {1}; audit it again once nothing writes to it")]
    Changed(PathBuf, String),
    /// No ELF or fatbin anywhere in the input, and nothing else wrong with it: no verdict.
    #[error("{0}: nothing to audit: no ELF file or fatbin among its {1} file(s) (kiln audit judges binaries; a pure-Python wheel or an empty directory has none)")]
    NothingToAudit(PathBuf, usize),
    /// A file that is both an ELF/fatbin and a zip.
    #[error("{0}: both an ELF/fatbin and a zip archive (or an ELF named .whl): pip would install one, the loader load the other — refused")]
    Polyglot(PathBuf),
}

impl AuditError {
    pub(crate) fn io(path: &Path, e: std::io::Error) -> AuditError {
        AuditError::Io(path.to_path_buf(), e)
    }

    pub(crate) fn open(path: &Path, e: crate::read::source::OpenError) -> AuditError {
        match e {
            crate::read::source::OpenError::Io(e) => AuditError::io(path, e),
            crate::read::source::OpenError::NotRegular(kind) => {
                AuditError::NotRegular(path.to_path_buf(), kind)
            }
        }
    }
}
