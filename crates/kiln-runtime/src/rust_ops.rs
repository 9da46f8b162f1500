//! The kernels written in Rust (`kernels/rust`, entry points `rs_<op>_<dtype>`) as methods of
//! [`RustKernels`] (`gpu.rs()`): the same validation, output allocation, launch geometry and
//! launch helper as their C++ twins in `ops.rs`, so the two differ only in the device code.
//! Parameters are the `#[repr(C)]` structs of `kiln-kernel-params`, the very definitions the
//! device crate compiles.

use std::ffi::c_void;
use std::mem::{align_of, offset_of, size_of};

use kiln_kernel_params::{RmsnormParams, SiluMulParams, SoftmaxParams, VecaddParams};
use kiln_kernels::abi;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::ops::{
    packs, row_block, softmax_group, BLOCK, MAX_GRID_X, SOFTMAX_MIN_BLOCK, VECADD_UNROLL,
};
use crate::tensor::{Tensor, View};
use crate::validate;

// Host side of the layout check: a Rust kernel's parameter struct is byte for byte the C ABI
// struct its C++ twin takes (kernels/include/kiln_abi.h via bindgen). The device side is
// asserted in the kernel build (kiln-build's KILN_HOST_LAYOUT).
macro_rules! same_layout {
    ($rust:ty, $c:ty, $($field:ident),+) => {
        const _: () = {
            assert!(size_of::<$rust>() == size_of::<$c>(), concat!(stringify!($rust), " and ", stringify!($c), " differ in size"));
            assert!(align_of::<$rust>() == align_of::<$c>(), concat!(stringify!($rust), " and ", stringify!($c), " differ in alignment"));
            $(assert!(offset_of!($rust, $field) == offset_of!($c, $field), concat!(stringify!($rust), ".", stringify!($field), " is not where the C ABI puts it"));)+
        };
    };
}
same_layout!(SiluMulParams, abi::KilnSiluMulParams, n);
same_layout!(RmsnormParams, abi::KilnRmsnormParams, rows, cols, eps);
same_layout!(SoftmaxParams, abi::KilnSoftmaxParams, rows, cols);

/// Pointers to each kernel argument, in order (`cuLaunchKernel`'s `kernelParams`).
macro_rules! args {
    ($($v:ident),* $(,)?) => { [$( &mut $v as *mut _ as *mut c_void ),*] };
}

/// `rs_NAME_f32` / `_f16` / `_bf16`.
macro_rules! rs_kernel {
    ($base:literal, $dtype:expr) => {
        match $dtype {
            DType::F32 => concat!("rs_", $base, "_f32"),
            DType::F16 => concat!("rs_", $base, "_f16"),
            DType::BF16 => concat!("rs_", $base, "_bf16"),
            other => return Err(Error::DType(format!("rs.{}: no kernel for {other}", $base))),
        }
    };
}

/// kiln's Rust kernels on one GPU: `gpu.rs().vecadd(&a, &b)`.
#[derive(Clone, Copy)]
pub struct RustKernels<'a> {
    gpu: &'a Gpu,
}

impl Gpu {
    /// The kernels written in Rust, from the same module as the C++ ones.
    pub fn rs(&self) -> RustKernels<'_> {
        RustKernels { gpu: self }
    }
}

impl RustKernels<'_> {
    /// out = a + b (same shape and float dtype) — [`Gpu::vecadd`]'s twin.
    pub fn vecadd(&self, a: &View, b: &View) -> Result<Tensor> {
        let g = self.gpu;
        let shape = validate::elementwise("rs.vecadd", ("a", a), ("b", b))?;
        g.check_view("rs.vecadd a", a)?;
        g.check_view("rs.vecadd b", b)?;
        let out = Tensor::alloc(g, a.dtype, shape)?;
        self.vecadd_launch(a, b, &out.view())?;
        Ok(out)
    }

    /// [`RustKernels::vecadd`] into the caller's `out` (no allocation).
    pub fn vecadd_into(&self, a: &View, b: &View, out: &View) -> Result<()> {
        let g = self.gpu;
        let shape = validate::elementwise("rs.vecadd", ("a", a), ("b", b))?;
        g.check_view("rs.vecadd a", a)?;
        g.check_view("rs.vecadd b", b)?;
        g.check_out("rs.vecadd", out, a.dtype, &shape, &[a, b])?;
        self.vecadd_launch(a, b, out)
    }

    fn vecadd_launch(&self, a: &View, b: &View, out: &View) -> Result<()> {
        let g = self.gpu;
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        let name = rs_kernel!("vecadd", a.dtype);
        let mut p = VecaddParams { n: n as u64 };
        let (mut pa, mut pb, mut po) = (a.ptr, b.ptr, out.ptr);
        let block = g.block_for(name, BLOCK)?;
        let grid = packs(n, a.dtype)
            .div_ceil(VECADD_UNROLL * block as u64)
            .clamp(1, MAX_GRID_X) as u32;
        // SAFETY: rs_vecadd_T(VecaddParams, *const T, *const T, *mut T); n elements each.
        unsafe { g.launch(name, grid, block, 0, &mut args![p, pa, pb, po]) }
    }

    /// out = silu(gate) · up — [`Gpu::silu_mul`]'s twin.
    pub fn silu_mul(&self, gate: &View, up: &View) -> Result<Tensor> {
        let g = self.gpu;
        let shape = validate::elementwise("rs.silu_mul", ("gate", gate), ("up", up))?;
        g.check_view("rs.silu_mul gate", gate)?;
        g.check_view("rs.silu_mul up", up)?;
        let out = Tensor::alloc(g, gate.dtype, shape)?;
        self.silu_mul_launch(gate, up, &out.view())?;
        Ok(out)
    }

    /// [`RustKernels::silu_mul`] into the caller's `out` (no allocation).
    pub fn silu_mul_into(&self, gate: &View, up: &View, out: &View) -> Result<()> {
        let g = self.gpu;
        let shape = validate::elementwise("rs.silu_mul", ("gate", gate), ("up", up))?;
        g.check_view("rs.silu_mul gate", gate)?;
        g.check_view("rs.silu_mul up", up)?;
        g.check_out("rs.silu_mul", out, gate.dtype, &shape, &[gate, up])?;
        self.silu_mul_launch(gate, up, out)
    }

    fn silu_mul_launch(&self, gate: &View, up: &View, out: &View) -> Result<()> {
        let g = self.gpu;
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        let name = rs_kernel!("silu_mul", gate.dtype);
        let mut p = SiluMulParams { n: n as u64 };
        let (mut pg, mut pu, mut po) = (gate.ptr, up.ptr, out.ptr);
        let grid = g.grid_for(name, packs(n, gate.dtype), BLOCK, 0)?;
        // SAFETY: rs_silu_mul_T(SiluMulParams, *const T, *const T, *mut T).
        unsafe { g.launch(name, grid, BLOCK, 0, &mut args![p, pg, pu, po]) }
    }

    /// RMSNorm over the last dim — [`Gpu::rmsnorm`]'s twin (block reduction in shared memory).
    pub fn rmsnorm(&self, x: &View, weight: &View, eps: f32) -> Result<Tensor> {
        let g = self.gpu;
        validate::rmsnorm(x, weight, eps)?;
        g.check_view("rs.rmsnorm x", x)?;
        g.check_view("rs.rmsnorm weight", weight)?;
        let out = Tensor::alloc(g, x.dtype, x.shape.clone())?;
        self.rmsnorm_launch(x, weight, eps, &out.view())?;
        Ok(out)
    }

    /// [`RustKernels::rmsnorm`] into the caller's `out` (no allocation).
    pub fn rmsnorm_into(&self, x: &View, weight: &View, eps: f32, out: &View) -> Result<()> {
        let g = self.gpu;
        validate::rmsnorm(x, weight, eps)?;
        g.check_view("rs.rmsnorm x", x)?;
        g.check_view("rs.rmsnorm weight", weight)?;
        g.check_out("rs.rmsnorm", out, x.dtype, &x.shape, &[x, weight])?;
        self.rmsnorm_launch(x, weight, eps, out)
    }

    fn rmsnorm_launch(&self, x: &View, weight: &View, eps: f32, out: &View) -> Result<()> {
        let g = self.gpu;
        let (rows, cols) = validate::rmsnorm(x, weight, eps)?;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let name = rs_kernel!("rmsnorm", x.dtype);
        let mut p = RmsnormParams {
            rows: rows as u64,
            cols: cols as u64,
            eps,
        };
        let (mut px, mut pw, mut po) = (x.ptr, weight.ptr, out.ptr);
        let block = g.block_for(name, row_block(cols, x.dtype))?;
        let grid = g.rows_grid(name, rows, block, 0)?;
        // SAFETY: rs_rmsnorm_T(RmsnormParams, *const T, *const T, *mut T).
        unsafe { g.launch(name, grid, block, 0, &mut args![p, px, pw, po]) }
    }

    /// Numerically stable softmax over the last dim — [`Gpu::softmax`]'s twin (group
    /// reductions through warp shuffles and shared memory, rows held in registers).
    pub fn softmax(&self, x: &View) -> Result<Tensor> {
        let g = self.gpu;
        validate::softmax(x)?;
        g.check_view("rs.softmax x", x)?;
        let out = Tensor::alloc(g, x.dtype, x.shape.clone())?;
        self.softmax_launch(x, &out.view())?;
        Ok(out)
    }

    /// [`RustKernels::softmax`] into the caller's `out` (no allocation).
    pub fn softmax_into(&self, x: &View, out: &View) -> Result<()> {
        let g = self.gpu;
        validate::softmax(x)?;
        g.check_view("rs.softmax x", x)?;
        g.check_out("rs.softmax", out, x.dtype, &x.shape, &[x])?;
        self.softmax_launch(x, out)
    }

    fn softmax_launch(&self, x: &View, out: &View) -> Result<()> {
        let g = self.gpu;
        let (rows, cols) = validate::softmax(x)?;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let name = rs_kernel!("softmax", x.dtype);
        let mut p = SoftmaxParams {
            rows: rows as u64,
            cols: cols as u64,
        };
        let (mut px, mut po) = (x.ptr, out.ptr);
        // The C++ twin's geometry: one group of `group` threads per row, several short rows
        // per block, a grid over all rows.
        let group = softmax_group(cols);
        let block = g.block_for(name, group.max(SOFTMAX_MIN_BLOCK))?;
        let rows_per_block = (block / group.min(block)).max(1) as u64;
        let grid = (rows as u64).div_ceil(rows_per_block).clamp(1, MAX_GRID_X) as u32;
        // SAFETY: rs_softmax_T(SoftmaxParams, *const T, *mut T).
        unsafe { g.launch(name, grid, block, 0, &mut args![p, px, po]) }
    }
}
