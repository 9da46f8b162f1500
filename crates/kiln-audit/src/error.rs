//! The input could not be read at all (exit code 2 territory). Problems inside a readable input
//! are facts ([`crate::facts::ReadProblem`]) that rules turn into findings.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0}: not a wheel (zip), an ELF file, a fatbin or a directory")]
    Unrecognized(PathBuf),
    #[error("{0}: not a readable zip archive: {1}")]
    Zip(PathBuf, String),
    #[error("{0}: {1} bytes in total, over the limit of {2} (--max-total-size)")]
    TooLarge(PathBuf, u64, u64),
    #[error("{0}: {1}; only regular files and directories are audited")]
    NotRegular(PathBuf, &'static str),
    #[error("{0}: {1}; audit it again once nothing writes to it")]
    Changed(PathBuf, String),
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
