//! The kernels written in Rust (`kernels/rust`, entry points `rs_<op>_<dtype>`) as methods of
//! [`RustKernels`] (`gpu.rs()`): the very op code of their C++ twins (`ops.rs`, over
//! [`Twin::Rust`]) — the same validation, output allocation, launch geometry and launch
//! helper — so the two differ only in the device code.

use std::mem::{align_of, offset_of, size_of};

use kiln_kernel_params::{RmsnormParams, SiluMulParams, SoftmaxParams};
use kiln_kernels::abi;

use crate::error::Result;
use crate::gpu::Gpu;
use crate::ops::{twin_ops, Twin};
use crate::tensor::{Tensor, View};

// Host side of the layout check: a Rust kernel's parameter struct (`kiln-kernel-params`, the
// very definitions the device crate compiles) is byte for byte the C ABI struct its C++ twin
// takes (kernels/include/kiln_abi.h via bindgen), which is what the shared launches pass. The
// device side is asserted in the kernel build (kiln-build's KILN_HOST_LAYOUT).
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

/// The twins of [`Gpu::vecadd`], [`Gpu::silu_mul`], [`Gpu::rmsnorm`] and [`Gpu::softmax`]
/// (with their `_into` forms): the same contract and results, by the Rust kernels.
impl RustKernels<'_> {
    fn twin(&self) -> (&Gpu, Twin) {
        (self.gpu, Twin::Rust)
    }

    twin_ops!();
}
