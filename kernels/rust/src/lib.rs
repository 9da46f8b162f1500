//! kiln's kernels in Rust (`nvptx64-nvidia-cuda`): the twins of `kernels/{vecadd,silu_mul,
//! rmsnorm,softmax}.cu` with the same semantics (f32 math, one rounding to the output type), the same
//! memory access pattern (16-byte packs, the same unrolling) and the same launch geometry
//! (kiln-runtime's `rs` ops use the C++ twins' block/grid rules). Entry points are
//! `rs_<op>_<dtype>`, unmangled, beside the C++ ones in one module per GPU target.
//!
//! Built only by kiln-build (see kernels/rust/Cargo.toml); PTX ISA 7.0, `.target sm_80`.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)]

/// The parameter structs, shared with the host (the generated layout check names them here).
pub use kiln_kernel_params as params;

// The host's layouts, as assertions on this crate's structs (written by kiln-build from the
// host's `kiln_kernel_params::ALL`): a struct that differs fails this build naming the field.
include!(env!("KILN_HOST_LAYOUT"));

/// `$body` four times with `$k` = 0, 1, 2, 3 as constants, like `#pragma unroll`: a loop that
/// LLVM leaves rolled indexes its register arrays dynamically and moves them to local memory
/// (measured on the f16/bf16 kernels).
macro_rules! unroll4 {
    ($k:ident => $body:block) => {{
        {
            const $k: usize = 0;
            $body
        }
        {
            const $k: usize = 1;
            $body
        }
        {
            const $k: usize = 2;
            $body
        }
        {
            const $k: usize = 3;
            $body
        }
    }};
}

/// `$body` eight times with `$k` = 0..=7 as constants (see `unroll4!`).
macro_rules! unroll8 {
    ($k:ident => $body:block) => {{
        unroll4!($k => $body);
        {
            const $k: usize = 4;
            $body
        }
        {
            const $k: usize = 5;
            $body
        }
        {
            const $k: usize = 6;
            $body
        }
        {
            const $k: usize = 7;
            $body
        }
    }};
}

mod device;
mod elem;
mod elementwise;
mod rmsnorm;
mod softmax;

/// Nothing in a kernel panics (no indexing, no unwrap); an empty loop satisfies `no_std`.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
