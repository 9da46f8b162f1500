//! CPU reference implementations of every op, for the GPU tests (and anyone checking kiln).
//!
//! Element values travel as f32 (`to_f32` / `from_f32` convert f16/bf16 through the `half`
//! crate, round-to-nearest-even like the kernels); reductions accumulate in f64 so the
//! reference is at least as accurate as the GPU. Each function mirrors the documented
//! semantics of its `Gpu` method, not its implementation.

mod convert;
mod ops;
mod tolerance;

pub use convert::{from_f32, round_to, to_f32};
pub use ops::*;
pub use tolerance::{compare, Mismatch, Tolerance};
