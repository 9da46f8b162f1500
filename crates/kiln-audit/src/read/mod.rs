//! The readers: bytes in, typed facts ([`crate::facts`]) out. Nothing here judges: a problem met
//! while reading is a [`crate::facts::ReadProblem`], never a finding, and no reader imports the
//! crate root or `rules/` (a test in `finding.rs` scans this folder).
//!
//! - `input`: wheel / ELF / fatbin / directory → [`crate::facts::Artifact`], by what the input
//!   is: `archive` (a wheel: its listing, then each `member` inflated and hashed in parallel),
//!   `binary` (one file read whole: ELF and device code), `dir` (a directory walked); over
//!   `source` (file or mapping), `zip_view` and `spill`
//! - `dist_info`: a wheel's `.dist-info` checked and parsed
//! - `elf`, `elf_dynamic`: NEEDED, RUNPATH, GLIBC versions, `.note.dlopen`, `.kiln_manifest`
//! - `device`: every fatbin entry with its target, kernels and PTX ISA; `demangle` names them
//! - `error`: [`ReadError`], why a reader could not read a structure
//! - `runpath`: the `$ORIGIN` directories a RUNPATH reaches
//! - `dists`: a directory's distributions, each read on its own, and which owns each file
//!
//! The entry points below are public for callers that hold bytes rather than a path (fuzzing,
//! tests).

mod archive;
mod binary;
pub mod demangle;
pub(crate) mod device;
mod dir;
mod dist_info;
pub(crate) mod dists;
pub(crate) mod elf;
mod elf_dynamic;
mod error;
pub(crate) mod input;
mod member;
pub(crate) mod runpath;
pub(crate) mod source;
// Maps spilled members (memmap2) and advises the kernel to drop pages: the crate's only unsafe.
#[allow(unsafe_code)]
mod spill;
mod zip_view;

pub use archive::read_wheel as wheel;
pub use binary::analyse as binary;
pub use device::read as device_code;
pub use error::ReadError;
pub use input::read as path;
