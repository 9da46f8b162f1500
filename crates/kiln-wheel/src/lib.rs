//! kiln-wheel: Python wheels, read and written in one place (maturin's audit/repair split).
//!
//! - [`record`]: RECORD rows, the `sha256=` hash both readers and writers use, rewriting rows
//! - [`metadata`]: RFC 822 headers (METADATA, WHEEL), Requires-Dist read (PEP 508) and added
//! - [`tags`]: wheel file name and `Tag:` expansion
//! - [`sbom`]: the runtime wheels added to maturin's CycloneDX SBOM
//! - [`diff`]: two wheels compared member by member (`kiln wheel diff`, `cargo xtask repro`)
//! - [`archive`]: member path safety, bytecode, a wheel held in memory (rewritten RECORD)
//! - [`finalize`]: the post-processing step after maturin, from the pins — the same code for
//!   `cargo xtask wheel` and for Nix (`kiln wheel finalize`)
//!
//! Reading never judges: it returns values and read problems; kiln-audit's rules decide.

#![warn(missing_docs)]

pub mod archive;
pub mod diff;
pub mod finalize;
pub mod metadata;
pub mod record;
pub mod sbom;
pub mod tags;

/// A wheel could not be rewritten.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The wheel or the pins say something the step refuses.
    #[error("{0}")]
    Invalid(String),
    /// Reading or writing a file failed: its path and the error.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// A zip error: the archive's path and the error.
    #[error("{0}: {1}")]
    Zip(String, zip::result::ZipError),
}

/// Result of a wheel step.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn invalid<T>(text: impl Into<String>) -> Result<T> {
    Err(Error::Invalid(text.into()))
}
