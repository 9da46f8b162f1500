//! kiln-build: what a build script calls to turn `kernels/*.cu` into one fatbin for the whole
//! arch matrix, plus the bindgen ABI and a manifest of what was really built.
//!
//! ```no_run
//! // build.rs: the whole script
//! let out = kiln_build::KernelBuild::for_build_script().and_then(|b| b.run());
//! if let Err(e) = out {
//!     eprintln!("{e}");
//!     std::process::exit(1);
//! }
//! ```
//!
//! Flow: [`toolkit`] preflight (nvcc version = pin, every target supported) -> [`deps`] finds
//! each source's project headers -> [`jobs`] one nvcc job per (source, target), keyed by
//! [`cache`] -> [`pool`] runs them under cargo's jobserver -> [`fatbin`] combines them ->
//! [`derived_manifest`] lists the kernels each output really holds -> [`abi`] runs bindgen;
//! [`progress`] prints the job lines and the summary.
//! A `kernels/rust` crate is the second source kind ([`rust`]): one PTX from the kernel rustc,
//! `ptxas` per SASS target, linked by the same `nvlink` into the same per-target modules.

pub mod abi;
pub mod cache;
pub mod deps;
pub mod derived_manifest;
mod error;
pub mod fatbin;
pub mod jobs;
pub mod plan;
pub mod pool;
pub mod progress;
pub mod provenance;
pub mod rust;
pub mod toolkit;

mod build;

pub use build::{BuildOutput, KernelBuild};
pub use error::BuildError;
pub use progress::Summary;
