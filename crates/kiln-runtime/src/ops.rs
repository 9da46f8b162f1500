//! kiln's kernels as typed [`Gpu`] methods: validate (shapes, dtypes, pointers) on the host,
//! allocate a fresh output, launch on the default stream. Launch parameters are the bindgen
//! structs of `kernels/include/kiln_abi.h` (`kiln_kernels::abi`).

use std::ffi::c_void;

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

/// `NAME_f32` / `NAME_f16` / `NAME_bf16`: the symbol of a kernel for a float dtype.
macro_rules! kernel_name {
    ($base:literal, $dtype:expr) => {
        match $dtype {
            DType::F32 => concat!($base, "_f32"),
            DType::F16 => concat!($base, "_f16"),
            DType::BF16 => concat!($base, "_bf16"),
            other => return Err(Error::DType(format!("{}: no kernel for {other}", $base))),
        }
    };
}

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
const SOFTMAX_MIN_BLOCK: u32 = 128;
/// Largest gridDim.x; grid-stride loops cover anything beyond.
pub(crate) const MAX_GRID_X: u64 = (1 << 31) - 1;

/// Threads per softmax row (`group_threads` in softmax.cu, same rule): the smallest power of
/// two ≥ 32 with SOFTMAX_EPT elements per thread covering the row, at most 1024.
fn softmax_group(cols: usize) -> u32 {
    let mut g = 32usize;
    while g < 1024 && g * SOFTMAX_EPT < cols {
        g <<= 1;
    }
    g as u32
}

/// Work items of an element-wise kernel: 16-byte packs (the grid-stride loop covers the rest).
pub(crate) fn packs(n: usize, dtype: DType) -> u64 {
    n.div_ceil(16 / dtype.size()) as u64
}

impl Gpu {
    /// out = a + b (same shape and float dtype).
    pub fn vecadd(&self, a: &View, b: &View) -> Result<Tensor> {
        let shape = validate::elementwise("vecadd", ("a", a), ("b", b))?;
        self.check_view("vecadd a", a)?;
        self.check_view("vecadd b", b)?;
        let out = Tensor::alloc(self, a.dtype, shape)?;
        let n = out.numel();
        if n > 0 {
            let name = kernel_name!("vecadd", a.dtype);
            let (mut pa, mut pb, mut po, mut pn) = (a.ptr, b.ptr, out.ptr(), n as u64);
            // One block per VECADD_UNROLL·BLOCK packs over the whole array (many waves, each
            // thread with 2·VECADD_UNROLL 16-byte loads in flight), not one resident wave.
            let block = self.block_for(name, BLOCK)?;
            let grid = packs(n, a.dtype)
                .div_ceil(VECADD_UNROLL * block as u64)
                .clamp(1, MAX_GRID_X) as u32;
            // SAFETY: vecadd_T(const T*, const T*, T*, uint64_t); the buffers hold n elements.
            unsafe { self.launch(name, grid, block, 0, &mut args![pa, pb, po, pn])? };
        }
        Ok(out)
    }

    /// out = alpha · x + beta · y (same shape and float dtype; math in f32).
    pub fn axpby(&self, x: &View, y: &View, alpha: f32, beta: f32) -> Result<Tensor> {
        let shape = validate::elementwise("axpby", ("x", x), ("y", y))?;
        self.check_view("axpby x", x)?;
        self.check_view("axpby y", y)?;
        let out = Tensor::alloc(self, x.dtype, shape)?;
        let n = out.numel();
        if n > 0 {
            let name = kernel_name!("axpby", x.dtype);
            let mut p = abi::KilnAxpbyParams {
                n: n as u64,
                alpha,
                beta,
            };
            let (mut px, mut py, mut po) = (x.ptr, y.ptr, out.ptr());
            let grid = self.grid_for(name, packs(n, x.dtype), BLOCK, 0)?;
            // SAFETY: axpby_T(KilnAxpbyParams, const T*, const T*, T*).
            unsafe { self.launch(name, grid, BLOCK, 0, &mut args![p, px, py, po])? };
        }
        Ok(out)
    }

    /// out = silu(gate) · up, the SwiGLU gate (same shape and float dtype; math in f32).
    pub fn silu_mul(&self, gate: &View, up: &View) -> Result<Tensor> {
        let shape = validate::elementwise("silu_mul", ("gate", gate), ("up", up))?;
        self.check_view("silu_mul gate", gate)?;
        self.check_view("silu_mul up", up)?;
        let out = Tensor::alloc(self, gate.dtype, shape)?;
        let n = out.numel();
        if n > 0 {
            let name = kernel_name!("silu_mul", gate.dtype);
            let mut p = abi::KilnSiluMulParams { n: n as u64 };
            let (mut pg, mut pu, mut po) = (gate.ptr, up.ptr, out.ptr());
            let grid = self.grid_for(name, packs(n, gate.dtype), BLOCK, 0)?;
            // SAFETY: silu_mul_T(KilnSiluMulParams, const T*, const T*, T*).
            unsafe { self.launch(name, grid, BLOCK, 0, &mut args![p, pg, pu, po])? };
        }
        Ok(out)
    }

    /// RMSNorm over the last dim: out = x · rsqrt(mean(x²) + eps) · weight; x [..., d],
    /// weight `[d]`, same float dtype; math in f32, one rounding at the end.
    pub fn rmsnorm(&self, x: &View, weight: &View, eps: f32) -> Result<Tensor> {
        let (rows, cols) = validate::rmsnorm(x, weight, eps)?;
        self.check_view("rmsnorm x", x)?;
        self.check_view("rmsnorm weight", weight)?;
        let out = Tensor::alloc(self, x.dtype, x.shape.clone())?;
        if rows > 0 && cols > 0 {
            let name = kernel_name!("rmsnorm", x.dtype);
            let mut p = abi::KilnRmsnormParams {
                rows: rows as u64,
                cols: cols as u64,
                eps,
            };
            let (mut px, mut pw, mut po) = (x.ptr, weight.ptr, out.ptr());
            let block = self.block_for(name, row_block(cols, x.dtype))?;
            let grid = self.rows_grid(name, rows, block, 0)?;
            // SAFETY: rmsnorm_T(KilnRmsnormParams, const T*, const T*, T*).
            unsafe { self.launch(name, grid, block, 0, &mut args![p, px, pw, po])? };
        }
        Ok(out)
    }

    /// Numerically stable softmax over the last dim (max subtracted; f32 math).
    pub fn softmax(&self, x: &View) -> Result<Tensor> {
        let (rows, cols) = validate::softmax(x)?;
        self.check_view("softmax x", x)?;
        let out = Tensor::alloc(self, x.dtype, x.shape.clone())?;
        if rows > 0 && cols > 0 {
            let name = kernel_name!("softmax", x.dtype);
            let mut p = abi::KilnSoftmaxParams {
                rows: rows as u64,
                cols: cols as u64,
            };
            let (mut px, mut po) = (x.ptr, out.ptr());
            // One group of `g` threads per row (the kernel derives the same g from cols and
            // clamps it to the block), several rows per block for short rows, and a grid over
            // all rows — not one resident wave — so every SM keeps many rows in flight.
            let g = softmax_group(cols);
            let block = self.block_for(name, g.max(SOFTMAX_MIN_BLOCK))?;
            let rows_per_block = (block / g.min(block)).max(1) as u64;
            let grid = (rows as u64).div_ceil(rows_per_block).clamp(1, MAX_GRID_X) as u32;
            // SAFETY: softmax_T(KilnSoftmaxParams, const T*, T*).
            unsafe { self.launch(name, grid, block, 0, &mut args![p, px, po])? };
        }
        Ok(out)
    }

    /// Rotary embedding on x [tokens, heads, head_dim] in Llama's rotate-half layout (the
    /// layout of HF transformers' `rotate_half`): for i < d/2, with f = pos / theta^(2i/d),
    /// `out[i] = x[i] cos f − x[i+d/2] sin f` and `out[i+d/2] = x[i+d/2] cos f + x[i] sin f`.
    pub fn rope(&self, x: &View, positions: Positions<'_>, theta: f32) -> Result<Tensor> {
        let ids = match positions {
            Positions::Ids(v) => Some(v),
            Positions::Offset(_) => None,
        };
        let (tokens, heads, head_dim) = validate::rope(x, ids, theta)?;
        self.check_view("rope x", x)?;
        if let Some(v) = ids {
            self.check_view("rope positions", v)?;
        }
        let out = Tensor::alloc(self, x.dtype, x.shape.clone())?;
        if tokens > 0 && heads > 0 {
            let name = kernel_name!("rope", x.dtype);
            let (positions_type, offset, mut pp) = match positions {
                Positions::Offset(o) => (abi::KilnIndexType_KILN_INDEX_NONE, o, 0u64),
                Positions::Ids(v) if v.dtype == DType::I32 => {
                    (abi::KilnIndexType_KILN_INDEX_I32, 0, v.ptr)
                }
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
            let (mut px, mut po) = (x.ptr, out.ptr());
            // One thread per 16-byte pack of pairs (the kernel's vector path), whole warps.
            let units = (heads * head_dim / 2).div_ceil(16 / x.dtype.size());
            let block = self.block_for(name, (units.div_ceil(32) * 32).clamp(32, 512) as u32)?;
            let shared = (head_dim * 4) as u32;
            let grid = self.rows_grid(name, tokens, block, shared)?;
            // SAFETY: rope_T(KilnRopeParams, const T*, const void*, T*); head_dim f32 of shared memory.
            unsafe { self.launch(name, grid, block, shared, &mut args![p, px, pp, po])? };
        }
        Ok(out)
    }

    /// Embedding lookup: out[..., :] = table[ids[...], :]; table [vocab, dim] float, ids i32
    /// or i64 of any shape; out has shape `ids.shape + [dim]`.
    ///
    /// Never waits for the GPU: ids are range-checked on the device, inside the gather
    /// kernel, and an id outside `[0, vocab)` yields a row of zeros (memory-safe and defined)
    /// instead of an error. To get [`Error::Index`] for a bad id, call
    /// [`Gpu::embedding_checked`] (an explicit opt-in that waits for an 8-byte read back).
    pub fn embedding(&self, table: &View, ids: &View) -> Result<Tensor> {
        self.embedding_launch(table, ids, false).map(|(out, _)| out)
    }

    /// [`Gpu::embedding`], plus an error for bad ids: an id outside `[0, vocab)` gives
    /// [`Error::Index`] naming the first (flat) offending position. To report it, this op
    /// records the smallest bad index in a device flag and waits for the GPU (reads the
    /// 8-byte flag back): a host synchronisation per call. For validation and debugging, not
    /// for hot loops.
    pub fn embedding_checked(&self, table: &View, ids: &View) -> Result<Tensor> {
        let (out, bad) = self.embedding_launch(table, ids, true)?;
        let Some(bad) = bad else { return Ok(out) };
        let first_bad = u64::from_ne_bytes(
            bad.to_host()?
                .try_into()
                .map_err(|_| Error::Memory("flag size".into()))?,
        );
        if first_bad != u64::MAX {
            let vocab = table.shape[0];
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

    /// Launches the lookup; with `checked`, also allocates and clears the device flag that
    /// receives the smallest bad index and returns it (None when unchecked or nothing was
    /// launched). Unchecked launches pass a null flag: no memset, no read back.
    fn embedding_launch(
        &self,
        table: &View,
        ids: &View,
        checked: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let (vocab, dim, shape) = validate::embedding(table, ids)?;
        self.check_view("embedding table", table)?;
        self.check_view("embedding ids", ids)?;
        let out = Tensor::alloc(self, table.dtype, shape)?;
        let num_ids = ids.numel();
        if num_ids == 0 || dim == 0 {
            return Ok((out, None));
        }
        let name = kernel_name!("embedding", table.dtype);
        let bad = if checked {
            let bad = Tensor::alloc(self, DType::I64, vec![1])?;
            // SAFETY: 8 bytes of this GPU's memory; 0xff.. = UINT64_MAX, "no bad id yet".
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    bad.ptr(),
                    0xff,
                    8,
                    self.stream().cu_stream(),
                )
            }
            .map_err(|e| Error::driver("cuMemsetD8Async", e))?;
            Some(bad)
        } else {
            None
        };
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
        let (mut pt, mut pi, mut po) = (table.ptr, ids.ptr, out.ptr());
        let mut pb: u64 = bad.as_ref().map_or(0, |b| b.ptr());
        let block = self.block_for(name, row_block(dim, table.dtype).min(256))?;
        // One block per id (many waves, not one resident wave): rows stream in as others retire.
        let grid = (num_ids as u64).clamp(1, MAX_GRID_X) as u32;
        // SAFETY: embedding_T(KilnEmbeddingParams, const T*, const void*, T*, unsigned long long*);
        // the flag pointer is null (0) when unchecked, which the kernel tests before its atomic.
        unsafe { self.launch(name, grid, block, 0, &mut args![p, pt, pi, po, pb])? };
        Ok((out, bad))
    }

    /// Device-to-device copy of a view into a fresh tensor (cuMemcpyDtoD): the bandwidth
    /// roof the benchmarks compare kernels with.
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
                    self.stream().cu_stream(),
                )
            }
            .map_err(|e| Error::driver("cuMemcpyDtoDAsync", e))?;
        }
        Ok(out)
    }
}
