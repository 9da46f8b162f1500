//! kiln's kernels as typed [`Gpu`] methods: validate (shapes, dtypes, pointers) on the host,
//! then launch on the handle's stream ([`Gpu::on`]). Each op has two forms: `op(...)` allocates
//! a fresh output (stream-ordered, on that stream) and `op_into(..., out)` writes into the
//! caller's buffer (no allocation at all: what a CUDA graph with caller-owned buffers wants).
//! Launch parameters are the bindgen structs of `kernels/include/kiln_abi.h`
//! (`kiln_kernels::abi`). Nothing here waits for the GPU, except [`Gpu::embedding_checked`],
//! which says so and refuses to run under graph capture.
//!
//! Every op is written once, over a [`Twin`]: the C++ kernels (`NAME_<dtype>`, methods of
//! [`Gpu`]) or their Rust twins (`rs_NAME_<dtype>`, methods of [`crate::RustKernels`], in
//! `rust_ops.rs`). Each op is a `*_check` (validation: dtype, shape, the inputs an `out` must
//! not overlap) and a `*_launch` (geometry and launch); [`op_pair!`] turns the two into the
//! public `op` / `op_into` methods of either kernel set.

use std::borrow::Cow;
use std::ffi::c_void;

use kiln_kernel_params::VecaddParams;
use kiln_kernels::abi;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::tensor::{Tensor, View};
use crate::validate;

/// Where rope takes each token's position from.
#[derive(Debug, Clone, Copy)]
pub enum Positions<'a> {
    /// Token t is at position `offset + t` (a contiguous prefill or decode step).
    Offset(i64),
    /// One position per token: an i32 or i64 device array of shape `[tokens]`.
    Ids(&'a View),
}

/// Pointers to each kernel argument, in order (`cuLaunchKernel`'s `kernelParams`).
macro_rules! args {
    ($($v:ident),* $(,)?) => { [$( &mut $v as *mut _ as *mut c_void ),*] };
}

/// Which twin of a kernel an op launches: kiln's C++ kernels or the ones written in Rust
/// (kernels/rust). Validation, output allocation and launch geometry are the same code for
/// both; only the symbol (and, for vecadd, the kernel's arguments) differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Twin {
    /// `NAME_<dtype>`, from kernels/*.cu; errors name the op `NAME`.
    Cpp,
    /// `rs_NAME_<dtype>`, from kernels/rust; errors name the op `rs.NAME`.
    Rust,
}

/// A static label as the twin's errors say it: `"vecadd a"` / `"rs.vecadd a"`.
macro_rules! label {
    ($twin:expr, $($what:tt)+) => {
        match $twin {
            $crate::ops::Twin::Cpp => $($what)+,
            $crate::ops::Twin::Rust => concat!("rs.", $($what)+),
        }
    };
}

/// `NAME_f32` / `rs_NAME_f16` / …: the symbol of a kernel of `twin` for a float dtype.
macro_rules! kernel_name {
    ($twin:expr, $base:literal, $dtype:expr) => {
        match ($twin, $dtype) {
            (Twin::Cpp, DType::F32) => concat!($base, "_f32"),
            (Twin::Cpp, DType::F16) => concat!($base, "_f16"),
            (Twin::Cpp, DType::BF16) => concat!($base, "_bf16"),
            (Twin::Rust, DType::F32) => concat!("rs_", $base, "_f32"),
            (Twin::Rust, DType::F16) => concat!("rs_", $base, "_f16"),
            (Twin::Rust, DType::BF16) => concat!("rs_", $base, "_bf16"),
            (twin, other) => {
                return Err(Error::DType(format!(
                    "{}: no kernel for {other}",
                    label!(twin, $base)
                )))
            }
        }
    };
}

/// The public `op` (fresh output) and `op_into` (caller's `out`) methods of one op, from its
/// `check` and `launch` functions; expanded inside `impl Gpu` and `impl RustKernels`, whose
/// `twin()` says which kernels run.
macro_rules! op_pair {
    ($(#[$doc:meta])* $op:ident / $into:ident ($($arg:ident: $ty:ty),*) => $check:ident, $launch:ident) => {
        $(#[$doc])*
        pub fn $op(&self, $($arg: $ty),*) -> Result<Tensor> {
            let (gpu, twin) = self.twin();
            let c = $crate::ops::$check(gpu, twin, $($arg),*)?;
            let out = Tensor::alloc(gpu, c.dtype, c.shape.into_owned())?;
            $crate::ops::$launch(gpu, twin, $($arg,)* &out.view())?;
            Ok(out)
        }

        #[doc = concat!("[`Self::", stringify!($op), "`] into the caller's `out` (no allocation).")]
        pub fn $into(&self, $($arg: $ty,)* out: &View) -> Result<()> {
            let (gpu, twin) = self.twin();
            let c = $crate::ops::$check(gpu, twin, $($arg),*)?;
            let op = $crate::ops::label!(twin, stringify!($op));
            gpu.check_out(op, out, c.dtype, &c.shape, c.inputs())?;
            $crate::ops::$launch(gpu, twin, $($arg,)* out)
        }
    };
}

/// The ops both twins have, for `impl Gpu` and `impl RustKernels` alike.
macro_rules! twin_ops {
    () => {
        $crate::ops::op_pair!(
            /// out = a + b (same shape and float dtype).
            vecadd / vecadd_into(a: &View, b: &View) => vecadd_check, vecadd_launch
        );
        $crate::ops::op_pair!(
            /// out = silu(gate) · up, the SwiGLU gate (same shape and float dtype; math in f32).
            silu_mul / silu_mul_into(gate: &View, up: &View) => silu_mul_check, silu_mul_launch
        );
        $crate::ops::op_pair!(
            /// RMSNorm over the last dim: out = x · rsqrt(mean(x²) + eps) · weight; x [..., d],
            /// weight `[d]`, same float dtype; math in f32, one rounding at the end.
            rmsnorm / rmsnorm_into(x: &View, weight: &View, eps: f32) => rmsnorm_check, rmsnorm_launch
        );
        $crate::ops::op_pair!(
            /// Numerically stable softmax over the last dim (max subtracted; f32 math).
            softmax / softmax_into(x: &View) => softmax_check, softmax_launch
        );
    };
}
pub(crate) use {label, op_pair, twin_ops};

pub(crate) const BLOCK: u32 = 256;

/// Packs per thread the row kernels keep in registers (`CACHE` in rmsnorm.cu).
const ROW_CACHE_PACKS: usize = 4;

/// Threads per block for a row of `cols` elements: enough that each thread holds up to
/// ROW_CACHE_PACKS 16-byte packs (several independent loads in flight per thread, and small
/// blocks so several rows run per SM), whole warps, 32 to 1024.
pub(crate) fn row_block(cols: usize, dtype: DType) -> u32 {
    let packs = cols.div_ceil(16 / dtype.size());
    (packs.div_ceil(ROW_CACHE_PACKS).div_ceil(32) * 32).clamp(32, 1024) as u32
}

/// 16-byte packs per thread per chunk in vecadd (`UNROLL` in vecadd.cu).
pub(crate) const VECADD_UNROLL: u64 = 4;

/// Elements per thread softmax keeps in registers (`EPT` in softmax.cu).
const SOFTMAX_EPT: usize = 32;
/// Smallest softmax block: short rows (one warp each) are packed several to a block.
pub(crate) const SOFTMAX_MIN_BLOCK: u32 = 128;
/// Largest gridDim.x; grid-stride loops cover anything beyond.
pub(crate) const MAX_GRID_X: u64 = (1 << 31) - 1;
/// Largest gridDim.y.
pub(crate) const MAX_GRID_Y: u64 = 65535;

/// Threads per softmax row (`group_threads` in softmax.cu, same rule): the smallest power of
/// two ≥ 32 with SOFTMAX_EPT elements per thread covering the row, at most 1024.
pub(crate) fn softmax_group(cols: usize) -> u32 {
    let mut g = 32usize;
    while g < 1024 && g * SOFTMAX_EPT < cols {
        g <<= 1;
    }
    g as u32
}

/// Threads of a flat (one pack per thread) kernel over `n` elements: the whole packs, then
/// one thread per element of the n % N tail.
pub(crate) fn flat_work(n: usize, dtype: DType) -> u64 {
    let per = 16 / dtype.size();
    (n / per + n % per) as u64
}

/// Block size of a flat kernel: BLOCK, or half of it when that spreads the work over at
/// least four blocks (SMs) where BLOCK would give fewer. Measured on an H200 at 4096
/// elements: bf16/f16 (512 packs) in 4 blocks of 128 at torch's 2.00 µs per call, in 2 of 256
/// 0.05–0.1 µs more; f32 (1024 packs) in 4 of 256, 0.1 µs less than 8 of 128
/// (docs/decode-floor.md).
pub(crate) fn flat_block(work: u64) -> u32 {
    if work >= 4 * BLOCK as u64 {
        BLOCK
    } else {
        BLOCK / 2
    }
}

/// Work items of an element-wise kernel: 16-byte packs (the grid-stride loop covers the rest).
pub(crate) fn packs(n: usize, dtype: DType) -> u64 {
    n.div_ceil(16 / dtype.size()) as u64
}

/// What an op's inputs decide before anything is allocated or launched: the output's dtype
/// and shape, and the inputs (one or two) that an `out` must not overlap.
pub(crate) struct Checked<'v> {
    pub(crate) dtype: DType,
    pub(crate) shape: Cow<'v, [usize]>,
    inputs: [&'v View; 2],
    count: usize,
}

impl<'v> Checked<'v> {
    fn new(
        dtype: DType,
        shape: Cow<'v, [usize]>,
        first: &'v View,
        second: Option<&'v View>,
    ) -> Self {
        Checked {
            dtype,
            shape,
            inputs: [first, second.unwrap_or(first)],
            count: 1 + second.is_some() as usize,
        }
    }

    pub(crate) fn inputs(&self) -> &[&'v View] {
        &self.inputs[..self.count]
    }
}

impl Gpu {
    /// Which kernels this handle's op methods launch (the C++ ones; `rs()` has the others).
    fn twin(&self) -> (&Gpu, Twin) {
        (self, Twin::Cpp)
    }

    /// Checks the caller's output buffer of an `_into` op: the op's dtype and shape (same
    /// number of elements in the same order; any shape with that many elements is not
    /// accepted — it must be exactly `shape`), device memory of this GPU, and no overlap with
    /// any input (kernels read inputs while writing the output).
    pub(crate) fn check_out(
        &self,
        op: &str,
        out: &View,
        dtype: DType,
        shape: &[usize],
        inputs: &[&View],
    ) -> Result<()> {
        if out.dtype != dtype {
            return Err(Error::DType(format!(
                "{op}: out is {} but the result is {dtype}",
                out.dtype
            )));
        }
        if out.shape != shape {
            return Err(Error::Shape(format!(
                "{op}: out has shape {:?} but the result has shape {shape:?}",
                out.shape
            )));
        }
        self.check_view(&format!("{op} out"), out)?;
        let (o0, o1) = (out.ptr, out.ptr + out.nbytes() as u64);
        for v in inputs {
            let (i0, i1) = (v.ptr, v.ptr + v.nbytes() as u64);
            if o0 < i1 && i0 < o1 {
                return Err(Error::Memory(format!(
                    "{op}: out [{o0:#x}, {o1:#x}) overlaps an input [{i0:#x}, {i1:#x}); write to a separate buffer"
                )));
            }
        }
        Ok(())
    }

    twin_ops!();

    op_pair!(
        /// out = alpha · x + beta · y (same shape and float dtype; math in f32).
        axpby / axpby_into(x: &View, y: &View, alpha: f32, beta: f32) => axpby_check, axpby_launch
    );

    op_pair!(
        /// Rotary embedding on x [tokens, heads, head_dim] in Llama's rotate-half layout (the
        /// layout of HF transformers' `rotate_half`): for i < d/2, with f = pos / theta^(2i/d),
        /// `out[i] = x[i] cos f − x[i+d/2] sin f` and `out[i+d/2] = x[i+d/2] cos f + x[i] sin f`.
        rope / rope_into(x: &View, positions: Positions<'_>, theta: f32) => rope_check, rope_launch
    );

    op_pair!(
        /// Embedding lookup: out[..., :] = table[ids[...], :]; table [vocab, dim] float, ids i32
        /// or i64 of any shape; out has shape `ids.shape + [dim]`.
        ///
        /// Never waits for the GPU: ids are range-checked on the device, inside the gather
        /// kernel, and an id outside `[0, vocab)` yields a row of zeros (memory-safe and defined)
        /// instead of an error. To get [`Error::Index`] for a bad id, call
        /// [`Gpu::embedding_checked`] (an explicit opt-in that waits for an 8-byte read back).
        embedding / embedding_into(table: &View, ids: &View) => embedding_check, embedding_launch
    );

    /// [`Gpu::embedding`], plus an error for bad ids: an id outside `[0, vocab)` gives
    /// [`Error::Index`] naming the first (flat) offending position. To report it, this op
    /// records the smallest bad index in a device flag and waits for the GPU (reads the
    /// 8-byte flag back): a host synchronisation per call. For validation and debugging, not
    /// for hot loops; refused with [`Error::Capture`] while the stream captures a graph.
    pub fn embedding_checked(&self, table: &View, ids: &View) -> Result<Tensor> {
        let (vocab, _, shape) = validate::embedding(table, ids)?;
        self.bind()?;
        self.work_stream().refuse_capture(
            "embedding_checked",
            "it reads a flag back to report bad ids; use embedding (bad ids give zero rows) in graphs",
        )?;
        self.check_view("embedding table", table)?;
        self.check_view("embedding ids", ids)?;
        let out = Tensor::alloc(self, table.dtype, shape)?;
        if out.numel() == 0 {
            return Ok(out);
        }
        let bad = Tensor::alloc(self, DType::I64, vec![1])?;
        // SAFETY: 8 bytes of this GPU's memory; 0xff.. = UINT64_MAX, "no bad id yet".
        unsafe {
            cudarc::driver::result::memset_d8_async(bad.ptr(), 0xff, 8, self.work_stream().raw())
        }
        .map_err(|e| Error::driver("cuMemsetD8Async", e))?;
        self.embedding_gather(table, ids, &out.view(), bad.ptr())?;
        let first_bad = u64::from_ne_bytes(
            bad.to_host()?
                .try_into()
                .map_err(|_| Error::Memory("flag size".into()))?,
        );
        if first_bad != u64::MAX {
            return Err(Error::Index(format!(
                "embedding: ids[{first_bad}] (flat index) is outside the table's [0, {vocab}) rows"
            )));
        }
        Ok(out)
    }

    /// The same as [`Gpu::embedding`] (which no longer waits; bad ids give zero rows), kept
    /// for callers written against the earlier API.
    pub fn embedding_zero_invalid(&self, table: &View, ids: &View) -> Result<Tensor> {
        self.embedding(table, ids)
    }

    /// Launches the lookup into `out`; `bad` is the device flag that receives the smallest
    /// bad index (0: unchecked, the kernel tests it before its atomic).
    fn embedding_gather(&self, table: &View, ids: &View, out: &View, bad: u64) -> Result<()> {
        let (vocab, dim, _) = validate::embedding(table, ids)?;
        let num_ids = ids.numel();
        if num_ids == 0 || dim == 0 {
            return Ok(());
        }
        let name = kernel_name!(Twin::Cpp, "embedding", table.dtype);
        let ids_type = if ids.dtype == DType::I32 {
            abi::KilnIndexType_KILN_INDEX_I32
        } else {
            abi::KilnIndexType_KILN_INDEX_I64
        };
        let mut p = abi::KilnEmbeddingParams {
            num_ids: num_ids as u64,
            vocab: vocab as u64,
            dim: dim as u64,
            ids_type,
        };
        let (mut pt, mut pi, mut po, mut pb) = (table.ptr, ids.ptr, out.ptr, bad);
        // Up to one resident wave with every row in 16-byte packs (decode: a few ids): the
        // flat kernel, one pack per thread, blockIdx.y the id, a row over ceil(packs / 512)
        // blocks (docs/decode-floor.md).
        let row_packs = dim / (16 / table.dtype.size());
        if [table.ptr, out.ptr].iter().all(|p| p % 16 == 0)
            && dim % (16 / table.dtype.size()) == 0
            && num_ids <= MAX_GRID_Y as usize
        {
            let flat = kernel_name!(Twin::Cpp, "embedding_flat", table.dtype);
            let block = self.block_for(flat, (row_packs.div_ceil(32) * 32).min(512) as u32)?;
            let work = (num_ids * row_packs) as u64;
            if work <= self.resident_blocks(flat, block, 0)? as u64 * block as u64 {
                let gx = row_packs.div_ceil(block as usize) as u32;
                // SAFETY: embedding_flat_T, the parameters of embedding_T; gx·block threads
                // cover a row's packs, one grid row per id.
                return unsafe {
                    self.launch_2d(
                        flat,
                        (gx, num_ids as u32),
                        block,
                        0,
                        &mut args![p, pt, pi, po, pb],
                    )
                };
            }
        }
        let block = self.block_for(name, row_block(dim, table.dtype).min(256))?;
        // One block per id (many waves, not one resident wave): rows stream in as others retire.
        let grid = (num_ids as u64).clamp(1, MAX_GRID_X) as u32;
        // SAFETY: embedding_T(KilnEmbeddingParams, const T*, const void*, T*, unsigned long long*);
        // the flag pointer is null (0) when unchecked, which the kernel tests before its atomic.
        unsafe { self.launch(name, grid, block, 0, &mut args![p, pt, pi, po, pb]) }
    }

    /// Device-to-device copy of a view into a fresh tensor (cuMemcpyDtoDAsync on the handle's
    /// stream): the bandwidth roof the benchmarks compare kernels with. Capture-safe.
    pub fn copy(&self, x: &View) -> Result<Tensor> {
        self.check_view("copy x", x)?;
        let out = Tensor::alloc(self, x.dtype, x.shape.clone())?;
        if x.nbytes() > 0 {
            self.bind()?;
            // SAFETY: both ranges are nbytes long, on this GPU.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    out.ptr(),
                    x.ptr,
                    x.nbytes(),
                    self.work_stream().raw(),
                )
            }
            .map_err(|e| Error::driver("cuMemcpyDtoDAsync", e))?;
        }
        Ok(out)
    }
}

// Each op's check (validation before any allocation) and launch (geometry, arguments, the
// launch itself), for either twin; `op_pair!` calls them.

pub(crate) fn vecadd_check<'v>(
    gpu: &Gpu,
    twin: Twin,
    a: &'v View,
    b: &'v View,
) -> Result<Checked<'v>> {
    let shape = validate::elementwise(label!(twin, "vecadd"), ("a", a), ("b", b))?;
    gpu.check_view(label!(twin, "vecadd a"), a)?;
    gpu.check_view(label!(twin, "vecadd b"), b)?;
    Ok(Checked::new(a.dtype, shape.into(), a, Some(b)))
}

pub(crate) fn vecadd_launch(gpu: &Gpu, twin: Twin, a: &View, b: &View, out: &View) -> Result<()> {
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let (mut pa, mut pb, mut po) = (a.ptr, b.ptr, out.ptr);
    // Up to one resident wave of one-pack-per-thread work (decode sizes): the flat kernel,
    // every pack (and tail element) its own thread, spread over as many SMs as the size
    // allows; the unrolled kernel's 4-pack chunks would leave most SMs idle, and a grid-stride
    // loop costs ~0.1 µs per call at these sizes (docs/decode-floor.md).
    if [a.ptr, b.ptr, out.ptr].iter().all(|p| p % 16 == 0) {
        let flat = kernel_name!(twin, "vecadd_flat", a.dtype);
        let work = flat_work(n, a.dtype);
        let block = gpu.block_for(flat, flat_block(work))?;
        if work <= gpu.resident_blocks(flat, block, 0)? as u64 * block as u64 {
            let grid = work.div_ceil(block as u64) as u32;
            return match twin {
                Twin::Cpp => {
                    let mut pn = n as u64;
                    // SAFETY: vecadd_flat_T(const T*, const T*, T*, uint64_t); n elements
                    // each, 16-byte aligned; the grid covers flat_work(n) threads.
                    unsafe { gpu.launch(flat, grid, block, 0, &mut args![pa, pb, po, pn]) }
                }
                Twin::Rust => {
                    let mut p = VecaddParams { n: n as u64 };
                    // SAFETY: rs_vecadd_flat_T(VecaddParams, *const T, *const T, *mut T); as above.
                    unsafe { gpu.launch(flat, grid, block, 0, &mut args![p, pa, pb, po]) }
                }
            };
        }
    }
    let name = kernel_name!(twin, "vecadd", a.dtype);
    // One block per VECADD_UNROLL·BLOCK packs over the whole array (many waves, each
    // thread with 2·VECADD_UNROLL 16-byte loads in flight), not one resident wave.
    let block = gpu.block_for(name, BLOCK)?;
    let grid = packs(n, a.dtype)
        .div_ceil(VECADD_UNROLL * block as u64)
        .clamp(1, MAX_GRID_X) as u32;
    match twin {
        Twin::Cpp => {
            let mut pn = n as u64;
            // SAFETY: vecadd_T(const T*, const T*, T*, uint64_t); the buffers hold n elements.
            unsafe { gpu.launch(name, grid, block, 0, &mut args![pa, pb, po, pn]) }
        }
        Twin::Rust => {
            let mut p = VecaddParams { n: n as u64 };
            // SAFETY: rs_vecadd_T(VecaddParams, *const T, *const T, *mut T); n elements each.
            unsafe { gpu.launch(name, grid, block, 0, &mut args![p, pa, pb, po]) }
        }
    }
}

pub(crate) fn axpby_check<'v>(
    gpu: &Gpu,
    twin: Twin,
    x: &'v View,
    y: &'v View,
    _alpha: f32,
    _beta: f32,
) -> Result<Checked<'v>> {
    let shape = validate::elementwise(label!(twin, "axpby"), ("x", x), ("y", y))?;
    gpu.check_view(label!(twin, "axpby x"), x)?;
    gpu.check_view(label!(twin, "axpby y"), y)?;
    Ok(Checked::new(x.dtype, shape.into(), x, Some(y)))
}

pub(crate) fn axpby_launch(
    gpu: &Gpu,
    twin: Twin,
    x: &View,
    y: &View,
    alpha: f32,
    beta: f32,
    out: &View,
) -> Result<()> {
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let name = kernel_name!(twin, "axpby", x.dtype);
    let mut p = abi::KilnAxpbyParams {
        n: n as u64,
        alpha,
        beta,
    };
    let (mut px, mut py, mut po) = (x.ptr, y.ptr, out.ptr);
    let grid = gpu.grid_for(name, packs(n, x.dtype), BLOCK, 0)?;
    // SAFETY: axpby_T(KilnAxpbyParams, const T*, const T*, T*).
    unsafe { gpu.launch(name, grid, BLOCK, 0, &mut args![p, px, py, po]) }
}

pub(crate) fn silu_mul_check<'v>(
    gpu: &Gpu,
    twin: Twin,
    gate: &'v View,
    up: &'v View,
) -> Result<Checked<'v>> {
    let shape = validate::elementwise(label!(twin, "silu_mul"), ("gate", gate), ("up", up))?;
    gpu.check_view(label!(twin, "silu_mul gate"), gate)?;
    gpu.check_view(label!(twin, "silu_mul up"), up)?;
    Ok(Checked::new(gate.dtype, shape.into(), gate, Some(up)))
}

pub(crate) fn silu_mul_launch(
    gpu: &Gpu,
    twin: Twin,
    gate: &View,
    up: &View,
    out: &View,
) -> Result<()> {
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let name = kernel_name!(twin, "silu_mul", gate.dtype);
    // The Rust twin's SiluMulParams has this layout (asserted in rust_ops.rs).
    let mut p = abi::KilnSiluMulParams { n: n as u64 };
    let (mut pg, mut pu, mut po) = (gate.ptr, up.ptr, out.ptr);
    let grid = gpu.grid_for(name, packs(n, gate.dtype), BLOCK, 0)?;
    // SAFETY: [rs_]silu_mul_T(KilnSiluMulParams, const T*, const T*, T*).
    unsafe { gpu.launch(name, grid, BLOCK, 0, &mut args![p, pg, pu, po]) }
}

pub(crate) fn rmsnorm_check<'v>(
    gpu: &Gpu,
    twin: Twin,
    x: &'v View,
    weight: &'v View,
    eps: f32,
) -> Result<Checked<'v>> {
    validate::rmsnorm(x, weight, eps)?;
    gpu.check_view(label!(twin, "rmsnorm x"), x)?;
    gpu.check_view(label!(twin, "rmsnorm weight"), weight)?;
    Ok(Checked::new(
        x.dtype,
        Cow::Borrowed(&x.shape),
        x,
        Some(weight),
    ))
}

pub(crate) fn rmsnorm_launch(
    gpu: &Gpu,
    twin: Twin,
    x: &View,
    weight: &View,
    eps: f32,
    out: &View,
) -> Result<()> {
    let (rows, cols) = validate::rmsnorm(x, weight, eps)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let name = kernel_name!(twin, "rmsnorm", x.dtype);
    // The Rust twin's RmsnormParams has this layout (asserted in rust_ops.rs).
    let mut p = abi::KilnRmsnormParams {
        rows: rows as u64,
        cols: cols as u64,
        eps,
    };
    let (mut px, mut pw, mut po) = (x.ptr, weight.ptr, out.ptr);
    let block = gpu.block_for(name, row_block(cols, x.dtype))?;
    let grid = gpu.rows_grid(name, rows, block, 0)?;
    // SAFETY: [rs_]rmsnorm_T(KilnRmsnormParams, const T*, const T*, T*).
    unsafe { gpu.launch(name, grid, block, 0, &mut args![p, px, pw, po]) }
}

pub(crate) fn softmax_check<'v>(gpu: &Gpu, twin: Twin, x: &'v View) -> Result<Checked<'v>> {
    validate::softmax(x)?;
    gpu.check_view(label!(twin, "softmax x"), x)?;
    Ok(Checked::new(x.dtype, Cow::Borrowed(&x.shape), x, None))
}

pub(crate) fn softmax_launch(gpu: &Gpu, twin: Twin, x: &View, out: &View) -> Result<()> {
    let (rows, cols) = validate::softmax(x)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let name = kernel_name!(twin, "softmax", x.dtype);
    // The Rust twin's SoftmaxParams has this layout (asserted in rust_ops.rs).
    let mut p = abi::KilnSoftmaxParams {
        rows: rows as u64,
        cols: cols as u64,
    };
    let (mut px, mut po) = (x.ptr, out.ptr);
    // One group of `g` threads per row (the kernel derives the same g from cols and
    // clamps it to the block), several rows per block for short rows, and a grid over
    // all rows — not one resident wave — so every SM keeps many rows in flight.
    let g = softmax_group(cols);
    let block = gpu.block_for(name, g.max(SOFTMAX_MIN_BLOCK))?;
    let rows_per_block = (block / g.min(block)).max(1) as u64;
    let grid = (rows as u64).div_ceil(rows_per_block).clamp(1, MAX_GRID_X) as u32;
    // SAFETY: [rs_]softmax_T(KilnSoftmaxParams, const T*, T*).
    unsafe { gpu.launch(name, grid, block, 0, &mut args![p, px, po]) }
}

fn position_ids(positions: Positions<'_>) -> Option<&View> {
    match positions {
        Positions::Ids(v) => Some(v),
        Positions::Offset(_) => None,
    }
}

pub(crate) fn rope_check<'v>(
    gpu: &Gpu,
    twin: Twin,
    x: &'v View,
    positions: Positions<'v>,
    theta: f32,
) -> Result<Checked<'v>> {
    let ids = position_ids(positions);
    validate::rope(x, ids, theta)?;
    gpu.check_view(label!(twin, "rope x"), x)?;
    if let Some(v) = ids {
        gpu.check_view(label!(twin, "rope positions"), v)?;
    }
    Ok(Checked::new(x.dtype, Cow::Borrowed(&x.shape), x, ids))
}

pub(crate) fn rope_launch(
    gpu: &Gpu,
    twin: Twin,
    x: &View,
    positions: Positions<'_>,
    theta: f32,
    out: &View,
) -> Result<()> {
    let (tokens, heads, head_dim) = validate::rope(x, position_ids(positions), theta)?;
    if tokens == 0 || heads == 0 {
        return Ok(());
    }
    let name = kernel_name!(twin, "rope", x.dtype);
    let (positions_type, offset, mut pp) = match positions {
        Positions::Offset(o) => (abi::KilnIndexType_KILN_INDEX_NONE, o, 0u64),
        Positions::Ids(v) if v.dtype == DType::I32 => (abi::KilnIndexType_KILN_INDEX_I32, 0, v.ptr),
        Positions::Ids(v) => (abi::KilnIndexType_KILN_INDEX_I64, 0, v.ptr),
    };
    let mut p = abi::KilnRopeParams {
        tokens: tokens as u64,
        heads: heads as u32,
        head_dim: head_dim as u32,
        offset,
        theta,
        positions_type,
    };
    let (mut px, mut po) = (x.ptr, out.ptr);
    // One thread per 16-byte pack of pairs (the kernel's vector path), whole warps.
    let units = (heads * head_dim / 2).div_ceil(16 / x.dtype.size());
    let block = gpu.block_for(name, (units.div_ceil(32) * 32).clamp(32, 512) as u32)?;
    let shared = (head_dim * 4) as u32;
    let grid = gpu.rows_grid(name, tokens, block, shared)?;
    // SAFETY: rope_T(KilnRopeParams, const T*, const void*, T*); head_dim f32 of shared memory.
    unsafe { gpu.launch(name, grid, block, shared, &mut args![p, px, pp, po]) }
}

pub(crate) fn embedding_check<'v>(
    gpu: &Gpu,
    twin: Twin,
    table: &'v View,
    ids: &'v View,
) -> Result<Checked<'v>> {
    let (_, _, shape) = validate::embedding(table, ids)?;
    gpu.check_view(label!(twin, "embedding table"), table)?;
    gpu.check_view(label!(twin, "embedding ids"), ids)?;
    Ok(Checked::new(table.dtype, shape.into(), table, Some(ids)))
}

/// The unchecked lookup (no bad-id flag): what `embedding` / `embedding_into` launch.
pub(crate) fn embedding_launch(
    gpu: &Gpu,
    _twin: Twin,
    table: &View,
    ids: &View,
    out: &View,
) -> Result<()> {
    gpu.embedding_gather(table, ids, out, 0)
}
