//! The readers: bytes in, typed facts ([`crate::facts`]) out. Nothing here judges: a problem met
//! while reading is a [`crate::facts::ReadProblem`], never a finding, and no reader imports the
//! crate root or `rules/` (a test in `finding.rs` scans this folder).
//!
//! - `input`: wheel / ELF / fatbin / directory → [`crate::facts::Artifact`] (members inflated
//!   and hashed in parallel), over `source` (file or mapping), `zip_view` and `spill`
//! - `elf`, `elf_dynamic`: NEEDED, RUNPATH, GLIBC versions, `.note.dlopen`, `.kiln_manifest`
//! - `device`: every fatbin entry with its target, kernels and PTX ISA; `demangle` names them
//! - `runpath`: the `$ORIGIN` directories a RUNPATH reaches
//! - `dists`: a directory's distributions, each read on its own, and which owns each file
//!
//! The entry points below are public for callers that hold bytes rather than a path (fuzzing,
//! tests).

pub mod demangle;
pub(crate) mod device;
pub(crate) mod dists;
pub(crate) mod elf;
mod elf_dynamic;
pub(crate) mod input;
pub(crate) mod runpath;
pub(crate) mod source;
// Maps spilled members (memmap2) and advises the kernel to drop pages: the crate's only unsafe.
#[allow(unsafe_code)]
mod spill;
mod zip_view;

pub use device::read as device_code;
pub use input::{analyse as binary, read as path, read_wheel as wheel};
