//! kiln-runtime: the host API over [cudarc] for kiln's kernels, cuBLAS, cuDNN and NCCL.
//!
//! The driver is loaded at run time, by its versioned name `libcuda.so.1` only (never the
//! unversioned `libcuda.so`, which is usually the toolkit's stub; see [`loader`]); nothing
//! CUDA is in the binary's NEEDED list. Without a driver every entry point returns
//! [`Error::NoDriver`] ("no NVIDIA driver found: libcuda.so.1 …"), never panics.
//!
//! ```no_run
//! use kiln_runtime::{DType, Gpu, Tensor};
//! let gpu = Gpu::new(0)?;
//! let a = Tensor::from_host(&gpu, &bytemuck_f32(&[1.0, 2.0]), DType::F32, vec![2])?;
//! let b = Tensor::from_host(&gpu, &bytemuck_f32(&[3.0, 4.0]), DType::F32, vec![2])?;
//! let c = gpu.vecadd(&a.view(), &b.view())?;       // a fresh Tensor, never aliasing a or b
//! let bytes = c.to_host()?;                          // 4.0, 6.0 as native-endian f32
//! # fn bytemuck_f32(v: &[f32]) -> Vec<u8> { v.iter().flat_map(|x| x.to_ne_bytes()).collect() }
//! # Ok::<(), kiln_runtime::Error>(())
//! ```
//!
//! # The contract
//! - [`Gpu::new`]`(ordinal)`, [`Gpu::device_count`], [`Gpu::synchronize`]. A `Gpu` retains the
//!   device's primary context (shared with the CUDA runtime, torch, cupy) and loads kiln's
//!   fatbin (`kiln_kernels::fatbin()`) once.
//! - [`View`] `{ ptr, dtype, shape }`: borrowed, contiguous, row-major device memory (e.g. from
//!   DLPack); the caller keeps it alive. Each op checks that every input pointer is device
//!   memory of its GPU (`cuPointerGetAttribute`) and aligned for its dtype.
//! - [`Tensor`]: owned device memory — [`Tensor::from_host`], [`Tensor::to_host`],
//!   [`Tensor::view`], `ptr`, `shape`, `dtype`, `nbytes`.
//! - Ops are `Gpu` methods taking `&View`s and returning a fresh [`Tensor`] (an output never
//!   aliases an input): [`Gpu::vecadd`], [`Gpu::axpby`], [`Gpu::rmsnorm`], [`Gpu::softmax`]
//!   (last dim), [`Gpu::rope`] ([`Positions`]; layout [tokens, heads, head_dim], Llama's
//!   rotate-half), [`Gpu::silu_mul`], [`Gpu::embedding`] (ids i32/i64; never waits, a bad id gives a
//!   zero row; [`Gpu::embedding_checked`] reports it as [`Error::Index`] and waits), [`Gpu::matmul`]
//!   (cuBLAS), [`Gpu::cudnn_softmax`] (cuDNN), [`Gpu::copy`] (cuMemcpyDtoD), and
//!   [`Communicator::all_reduce_sum`] (NCCL; a communicator of one GPU works).
//! - Floats are f32, f16 and bf16 everywhere; math is in f32 with one rounding to the output
//!   type. Shapes and dtypes are validated on the host before any launch ([`Error::Shape`],
//!   [`Error::DType`]); kernels handle any size, including sizes that are not multiples of the
//!   block or of the 16-byte vector width.
//! - Streams: a `Gpu` from [`Gpu::new`] runs on the context's legacy default (NULL) stream,
//!   ordered with the default streams of torch, cupy and jax. [`Gpu::on`]`(`[`Stream`]`)` gives
//!   a handle on the caller's stream (a raw `CUstream`, e.g. torch's, or a cudarc stream via
//!   [`Stream::of`]): kernels, output allocations (stream-ordered) and frees all go there.
//!   [`Gpu::order_after`] makes that stream wait for another's pending work (an event, on
//!   the GPU). Every op also has an `_into` form writing into a caller's buffer (no
//!   allocation). Nothing in an op's path waits for the GPU, so ops can be captured into CUDA
//!   graphs (`cuStreamBeginCapture`, cudarc's `begin_capture`); the few that must wait
//!   ([`Gpu::embedding_checked`], [`Tensor::to_host`], [`Tensor::from_host`]) return
//!   [`Error::Capture`] under capture instead of breaking it. `docs/streams.md` has the rules.
//!   [`Gpu::synchronize`] waits for the whole context.
//!
//! - [`Gpu::rs`] gives the kernels written in Rust (`kernels/rust`): [`RustKernels::vecadd`],
//!   [`RustKernels::silu_mul`], [`RustKernels::rmsnorm`] — the same contract and results as
//!   their C++ twins above, from the same fatbin.
//!
//! CPU reference implementations of every op live in `reference` (f32 math; f16/bf16 through
//! the `half` crate), behind the `reference` feature (off by default: only the GPU tests, which
//! compare against them, and kiln-gpu-bench, which makes its inputs with them, turn it on).

pub mod blas;
mod cache;
mod context;
pub mod dnn;
mod dtype;
mod error;
mod gpu;
mod handles;
mod libraries;
pub mod loader;
pub mod nccl;
pub mod note;
mod ops;
#[cfg(feature = "reference")]
pub mod reference;
mod rust_ops;
mod stream;
mod tensor;
pub mod timing;
pub mod validate;

pub use context::ContextGuard;
pub use dtype::DType;
pub use error::{Error, Result};
pub use gpu::Gpu;
pub use libraries::runtime_libraries;
pub use nccl::Communicator;
pub use ops::Positions;
pub use rust_ops::RustKernels;
pub use stream::{Capture, Stream};
pub use tensor::{Tensor, View};
