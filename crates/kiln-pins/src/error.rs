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
    #[error("{path}: [workspace.metadata.kiln] is missing")]
    MissingTable { path: PathBuf },
    #[error("[workspace.metadata.kiln]: {0}")]
    Invalid(String),
    #[error("arch matrix entry {entry:?}: {reason}")]
    BadArch { entry: String, reason: String },
    #[error("no workspace Cargo.toml with [workspace.metadata.kiln] found above {0}")]
    NoWorkspace(PathBuf),
}
