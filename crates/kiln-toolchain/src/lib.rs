//! kiln-toolchain: the pinned toolchain of a kiln project in one place — locating it, proving
//! it is the pinned one, and installing it without Nix. kiln-build (before compiling),
//! kiln-doctor (`kiln doctor`), `kiln bootstrap` and `cargo xtask bootstrap` all use it.
//!
//! - [`nvcc`]: find nvcc (`KILN_NVCC`, `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `PATH`, the
//!   checkout's `.toolchain/`, the per-user install) and preflight it: a release the project
//!   accepts (its `cuda` range, else the pin), every matrix target supported,
//!   `fatbinary`/`nvlink` beside it.
//! - [`kernel_rustc`]: the rustc that compiles `kernels/rust` for `nvptx64-nvidia-cuda`.
//! - [`layout`]: where an install lives (`.toolchain/` in a kiln checkout, else
//!   `$XDG_DATA_HOME/kiln/toolchain/<hash of the toolchain pins>`) and its env file.
//! - [`route`]: kiln's own checkout (`cargo xtask bootstrap`, `.toolchain/`) or a consumer
//!   (`kiln bootstrap`, the per-user install) — so advice names commands that exist there.
//! - [`needs`]: which optional parts a project's build uses (libclang only when bindgen has
//!   headers to read, the kernel rustc only for `<kernels dir>/rust`).
//! - [`install`](mod@install): the PyPI components (CUDA toolkit, cuobjdump/nvdisasm, libclang,
//!   maturin and the test tools) by exact version, stamped and verified; the kernel rustc by apt
//!   as root.
//!
//! The pins are whatever [`kiln_pins::Pins`] the caller loaded: a project's own table layered
//! over kiln's ([`kiln_pins::layered`]), so a project's toolchain is kiln's.

#![warn(missing_docs)]

pub mod install;
pub mod kernel_rustc;
pub mod layout;
pub mod needs;
pub mod nvcc;
pub mod route;

mod error;

pub use error::ToolchainError;
pub use install::{install, Installed, Options};
pub use layout::Layout;
pub use nvcc::Toolkit;
pub use route::Route;
