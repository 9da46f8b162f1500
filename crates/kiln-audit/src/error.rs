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
    #[error("{0}: members declare {1} bytes in total, over the limit of {2} (--max-total-size)")]
    TooLarge(PathBuf, u64, u64),
}

impl AuditError {
    pub(crate) fn io(path: &Path, e: std::io::Error) -> AuditError {
        AuditError::Io(path.to_path_buf(), e)
    }
}
