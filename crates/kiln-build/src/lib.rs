//! kiln-build: what a build script calls to turn `kernels/*.cu` into one fatbin for the whole
//! arch matrix, plus the bindgen ABI and a manifest of what was really built.
//!
//! # Use it in your crate
//!
//! Add it as a build dependency (a path or git dependency on a kiln checkout):
//!
//! ```toml
//! [build-dependencies]
//! kiln-build = { path = "../kiln/crates/kiln-build" }
//!
//! # Your matrix; everything you leave out (nvcc, CUDA, clang, min-driver, runtime wheels)
//! # comes from the kiln this kiln-build belongs to.
//! [package.metadata.kiln]
//! archs = ["8.9", "9.0+PTX"]
//! ```
//!
//! put the kernels in `kernels/*.cu` beside that Cargo.toml (C ABI headers in
//! `kernels/include/*.h`), and call one builder from `build.rs`:
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
//! It writes into `OUT_DIR`: `kernels.fatbin` (SASS for every target, PTX where the matrix
//! says `+PTX`), `kernels.manifest.json` (the kernels each target really holds, tool versions,
//! flags) and `kiln_abi.rs` (bindgen over `kernels/include`). A kernel missing for any target
//! fails the build, naming the kernel and the target.
//!
//! The matrix is read from the nearest Cargo.toml at or above the crate with
//! `[package.metadata.kiln]` or `[workspace.metadata.kiln]`; how a project's table is layered
//! over kiln's pins is [`kiln_pins::layered`]. What the build will target is plain data:
//!
//! ```
//! let consumer = r#"
//! [package]
//! name = "my-kernels"
//! [package.metadata.kiln]
//! archs = ["8.9", "9.0+PTX"]
//! "#;
//! let pins = kiln_build::Pins::parse(consumer, std::path::Path::new("Cargo.toml"))?;
//! let targets: Vec<String> = pins.matrix.targets().iter().map(|t| t.name()).collect();
//! assert_eq!(targets, ["sm_89", "sm_90", "compute_90"]);
//! // The toolchain is kiln's own, not restated by the project:
//! assert_eq!(pins.toolchain, kiln_build::Pins::built_in().toolchain);
//! # Ok::<(), kiln_build::PinsError>(())
//! ```
//!
//! # The toolchain
//!
//! nvcc must be the pinned release (`nvcc --version`, checked in seconds before anything
//! compiles). It is found through `KILN_NVCC`, `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `PATH`,
//! then the project's `.toolchain/` and the per-user install of `kiln bootstrap` (all in
//! [`kiln_toolchain`]): in `nix develop` of kiln's flake (or a flake using its
//! `overlays.default`) it is on `PATH`; without Nix, run `kiln bootstrap` in your project and
//! `source "$(kiln bootstrap --env-file)"` (it sets `CUDA_HOME`, `PATH`, `LIBCLANG_PATH` and
//! `BINDGEN_EXTRA_CLANG_ARGS` for bindgen's pinned libclang).
//!
//! # Stability
//!
//! The build-script API is [`KernelBuild`] ([`KernelBuild::for_build_script`], [`KernelBuild::new`]
//! and its setters, [`KernelBuild::run`]), [`BuildOutput`], [`BuildError`] and the re-exported
//! [`Pins`]; it follows semver from 0.1. The modules listed below are public for kiln's own
//! tools (`cargo xtask kernels`, the benchmarks) and may change in any release before 1.0.
//!
//! # Inside
//!
//! Flow: [`toolkit`] preflight (nvcc version = pin, every target supported) -> [`deps`] finds
//! each source's project headers -> [`jobs`] one nvcc job per (source, target), keyed by
//! [`cache`] -> [`pool`] runs them under cargo's jobserver -> [`fatbin`] combines them ->
//! [`derived_manifest`] lists the kernels each output really holds -> [`abi`] runs bindgen;
//! [`progress`] prints the job lines and the summary.
//! A `kernels/rust` crate is the second source kind ([`rust`]): one PTX from the kernel rustc,
//! `ptxas` per SASS target, linked by the same `nvlink` into the same per-target modules.
//!
//! A project's `[package.metadata.kiln.kernels]` table ([`kiln_pins::KernelsPins`]) shapes the
//! build: sources elsewhere, `-D`/`-I`/flags, arch [`gates`] checked against the bytes, one
//! module per source ([`jobs::CompileMode::Whole`], no device link), `rdc` for cross-file
//! device calls, host-launched sources as a static library ([`host`]), the accepted CUDA range
//! and the cache cap. `KILN_ARCHS` narrows the matrix at build time.
//!
//! Beyond one process: [`KernelBuild::run_job`] (the `kiln-kernel-job` binary) runs one job of
//! the plan and files it as a [`prebuilt`] entry; a build given such entries
//! (`KILN_PREBUILT_KERNELS`) takes each one whose recorded key is its plan's and refuses any
//! other — one Nix derivation per job (nix/kernel-jobs.nix) and build farms use this.
//! `KILN_KERNEL_CACHE` shares the compile cache between checkouts (keys are relative).

#![warn(missing_docs)]

pub mod abi;
pub mod cache;
pub mod deps;
pub mod derived_manifest;
mod error;
pub mod fatbin;
pub mod gates;
pub mod host;
pub mod job;
pub mod jobs;
pub mod nix_matrix;
pub mod plan;
pub mod pool;
pub mod prebuilt;
pub mod progress;
pub mod provenance;
pub mod rust;
mod tool;
/// nvcc located and preflighted: [`kiln_toolchain::nvcc`], re-exported.
pub use kiln_toolchain::nvcc as toolkit;

mod build;
mod execute;

pub use build::{BuildOutput, KernelBuild, CACHE_VAR};
pub use error::BuildError;
pub use kiln_pins::{Pins, PinsError, Target};
pub use progress::Summary;
