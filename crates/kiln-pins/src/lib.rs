//! kiln's single source of truth: `[workspace.metadata.kiln]` in the workspace Cargo.toml.
//!
//! Everything that needs a version or the arch matrix (kiln-build, xtask, the audit, the doctor)
//! goes through [`Pins::load`]; Nix reads the same table with `builtins.fromTOML`.

#![warn(missing_docs)]

mod error;
pub mod kernels;
pub mod layered;
mod pins;

// The target vocabulary and the GPU/driver tables are kiln-arch's (no dependencies); they are
// re-exported so that code holding the pins speaks one vocabulary.
pub use error::PinsError;
pub use kernels::{narrow_matrix, Gate, KernelsPins, ModuleLayout, MATRIX_OVERRIDE_VAR};
pub use kiln_arch::{
    gpu_generation, max_ptx_isa_for_driver, oldest_driver_for_ptx_isa, ptx_isa_of_cuda, runs_on,
    Arch, ArchError, ArchMatrix, CpuArch, DriverPtxIsa, GpuGeneration, Host, MatrixEntry, Runs,
    Target, TargetKind, Variant, DRIVER_PTX_ISA, GPU_GENERATIONS, KNOWN_CAPABILITIES,
};
pub use pins::{
    find_workspace_manifest, AbiRange, AuditAllow, AuditPins, Pins, RuntimeLib, Toolchain,
    WheelPins, BUILT_IN_MANIFEST,
};
