use std::path::PathBuf;

/// Why the pins could not be loaded: an unreadable or malformed Cargo.toml, a missing kiln
/// table, or a table whose values fail validation.
#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    /// The Cargo.toml could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The Cargo.toml that was being read.
        path: PathBuf,
        /// The I/O error reading it.
        source: std::io::Error,
    },
    /// The Cargo.toml is not valid TOML.
    #[error("{path}: not valid TOML: {message}")]
    Toml {
        /// The Cargo.toml that failed to parse.
        path: PathBuf,
        /// The TOML parser's message.
        message: String,
    },
    /// The Cargo.toml has neither `[package.metadata.kiln]` nor `[workspace.metadata.kiln]`.
    #[error("{path}: [workspace.metadata.kiln] is missing (and so is [package.metadata.kiln])")]
    MissingTable {
        /// The Cargo.toml without a kiln table.
        path: PathBuf,
    },
    /// A value in a complete pin table fails validation; the message names the key (a project's
    /// layered table reports it as [`PinsError::Project`] instead).
    #[error("[workspace.metadata.kiln]: {0}")]
    Invalid(String),
    /// An `archs` entry is not a valid target (from [`kiln_arch::ArchError::BadEntry`]).
    #[error("arch matrix entry {entry:?}: {reason}")]
    BadArch {
        /// The entry as written, e.g. "9.0b".
        entry: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A project's own table (layered over kiln's pins) is wrong.
    #[error("{path} [{table}] (over kiln's built-in pins): {message}")]
    Project {
        /// The project's Cargo.toml.
        path: PathBuf,
        /// Which table was read: `package.metadata.kiln` or `workspace.metadata.kiln`.
        table: String,
        /// The underlying error, rendered.
        message: String,
    },
    /// [`crate::Pins::discover`] found no Cargo.toml with a kiln table at or above this directory.
    #[error(
        "no Cargo.toml with [package.metadata.kiln] or [workspace.metadata.kiln] at or above {0}"
    )]
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
