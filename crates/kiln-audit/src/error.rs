//! The input could not be read at all (exit code 2 territory): [`AuditError`]; a policy that
//! cannot be built from what the caller stated: [`PolicyError`]. Problems inside a readable
//! input are facts ([`crate::facts::ReadProblem`]) that rules turn into findings.

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

/// Why a stated policy (flags, a waiver, the policy file's `audit.allow`) is refused; the text
/// names what to fix.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A waiver names no known rule id.
    #[error("{0:?} is not a rule id (docs/audit-json-schema.md lists them, e.g. reach/gap)")]
    UnknownRule(String),
    /// A waiver without a reason.
    #[error("waiving {0} needs a reason (RULE[:PATH_GLOB]=REASON)")]
    NoReason(crate::Rule),
    /// A waiver's path glob does not parse.
    #[error("path glob {pattern:?}: {error}")]
    BadGlob {
        /// The glob as given.
        pattern: String,
        /// Why it does not parse.
        error: glob::PatternError,
    },
    /// `--allow` text without `=`.
    #[error("{0:?}: expected RULE[:PATH_GLOB]=REASON")]
    NotAWaiver(String),
    /// A waiver of the policy file's `audit.allow` list: the file, the index, what is wrong.
    #[error("{file}: audit.allow[{index}]: {error}")]
    PolicyFile {
        /// The policy file.
        file: String,
        /// The waiver's index in `audit.allow`.
        index: usize,
        /// What is wrong with it.
        error: Box<PolicyError>,
    },
    /// A flag's value: the flag, what is wrong.
    #[error("{flag}: {error}")]
    Flag {
        /// The flag, e.g. `--expect-sass`.
        flag: &'static str,
        /// What is wrong with its value.
        error: Box<PolicyError>,
    },
    /// An arch list item that is not an arch.
    #[error("{0:?} is not an arch (expected e.g. 80, 90a, 100f, sm_120)")]
    NotAnArch(String),
    /// A GPU list item that is not a plain compute capability.
    #[error("{0:?} is not a compute capability (expected e.g. 8.0, 9.0, 12.0)")]
    NotACapability(String),
    /// A compute capability without a row in kiln-pins' GPU table: the item, the known ones.
    #[error("{0:?} is not a GPU generation kiln knows (known: {1})")]
    UnknownGeneration(String, String),
    /// A GPU list naming nothing.
    #[error("no generation listed (expected e.g. 8.0,9.0,12.0)")]
    NoGeneration,
    /// `--min-driver` older than the driver/PTX ISA table.
    #[error("--min-driver {0}: older than any driver in kiln's driver/PTX ISA table")]
    DriverTooOld(u32),
    /// `--platform` that is not a manylinux tag.
    #[error("--platform {0:?}: not a manylinux platform tag (e.g. manylinux_2_28_x86_64)")]
    NotManylinux(String),
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
