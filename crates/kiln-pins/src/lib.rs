//! kiln's single source of truth: `[workspace.metadata.kiln]` in the workspace Cargo.toml.
//!
//! Everything that needs a version or the arch matrix (kiln-build, xtask, the audit, the doctor)
//! goes through [`Pins::load`]; Nix reads the same table with `builtins.fromTOML`.

mod arch;
mod driver;
mod error;
mod gpus;
pub mod layered;
mod pins;

pub use arch::{Arch, ArchMatrix, MatrixEntry, Target, TargetKind, Variant};
pub use driver::oldest_driver_for_ptx_isa;
pub use driver::{max_ptx_isa_for_driver, DriverPtxIsa, DRIVER_PTX_ISA};
pub use error::PinsError;
pub use gpus::{gpu_generation, GpuGeneration, GPU_GENERATIONS};
pub use pins::{
    find_workspace_manifest, AbiRange, Pins, RuntimeLib, Toolchain, WheelPins, BUILT_IN_MANIFEST,
};
