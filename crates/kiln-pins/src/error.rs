use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("{path}: [workspace.metadata.kiln] is missing (and so is [package.metadata.kiln])")]
    MissingTable { path: PathBuf },
    #[error("[workspace.metadata.kiln]: {0}")]
    Invalid(String),
    #[error("arch matrix entry {entry:?}: {reason}")]
    BadArch { entry: String, reason: String },
    /// A project's own table (layered over kiln's pins) is wrong.
    #[error("{path} [{table}] (over kiln's built-in pins): {message}")]
    Project {
        path: PathBuf,
        table: String,
        message: String,
    },
    #[error("no Cargo.toml with [package.metadata.kiln] or [workspace.metadata.kiln] with [workspace.metadata.kiln] at or above {0}")]
    NoWorkspace(PathBuf),
}

/// A matrix that is empty stays a table error ("[workspace.metadata.kiln]: archs is empty ...");
/// a bad entry keeps its own variant.
impl From<kiln_arch::ArchError> for PinsError {
    fn from(e: kiln_arch::ArchError) -> PinsError {
        match e {
            kiln_arch::ArchError::BadEntry { entry, reason } => {
                PinsError::BadArch { entry, reason }
            }
            other => PinsError::Invalid(other.to_string()),
        }
    }
}
