//! Reads NVIDIA device code from bytes, never trusting sizes or offsets: split by format.
//!
//! - [`container`]: fatbin containers and their entries (cubin / PTX, LZ4 / zstd payloads).
//! - [`cubin`]: one cubin (a CUDA ELF): its kernel entry points and target arch.
//! - [`ptx`]: PTX text: `.version` (ISA), `.target` and `.entry` kernels.
//! - [`sparse`]: a large compressed cubin decoded keeping only its ELF tables.

#![warn(missing_docs)]

pub mod container;
pub mod cubin;
pub mod ptx;
pub mod sparse;

/// Why device code could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A cubin (CUDA ELF) that does not parse.
    #[error("cubin: {0}")]
    Cubin(String),
    /// PTX text that does not parse.
    #[error("PTX: {0}")]
    Ptx(String),
    /// A fatbin container or entry header that does not parse.
    #[error("fatbin: {0}")]
    Container(String),
}

/// Result of reading device code.
pub type Result<T> = std::result::Result<T, Error>;
