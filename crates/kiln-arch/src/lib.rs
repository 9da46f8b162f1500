//! The CUDA target vocabulary of kiln, in one place and with no dependencies.
//!
//! - [`Arch`], [`Target`], [`MatrixEntry`] and [`ArchMatrix`]: the grammar of the arch matrix
//!   (`MAJOR.MINOR[a|f][+PTX]`, e.g. "9.0", "9.0a", "12.0f", "12.0+PTX") and the names the
//!   tools use ("sm_90a", "compute_120"), each with `Display` and `FromStr`;
//! - [`runs_on`]: the one compatibility rule — does code built for a target (SASS or PTX,
//!   plain, `a` or `f`) run on a GPU of a given compute capability; the doctor and the audit
//!   both ask it;
//! - [`GPU_GENERATIONS`] and [`DRIVER_PTX_ISA`]: the GPU-generation and driver/PTX-ISA tables,
//!   with their sources.
//!
//! The live matrix is not here: it is written once, in the workspace Cargo.toml
//! (`[workspace.metadata.kiln] archs`), and read through kiln-pins.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod arch;
mod compat;
mod driver;
mod gpus;

pub use arch::{
    Arch, ArchError, ArchMatrix, MatrixEntry, Target, TargetKind, Variant, KNOWN_CAPABILITIES,
};
pub use compat::{runs_on, Runs};
pub use driver::{
    max_ptx_isa_for_driver, oldest_driver_for_ptx_isa, ptx_isa_of_cuda, DriverPtxIsa,
    DRIVER_PTX_ISA,
};
pub use gpus::{gpu_generation, CpuArch, GpuGeneration, Host, GPU_GENERATIONS};
