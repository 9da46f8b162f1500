//! vecadd and silu_mul: the twins of kernels/vecadd.cu and kernels/silu_mul.cu (and of
//! `kiln::map2` in kiln_elementwise.cuh), pack for pack.

use crate::device::{self, Pack};
use crate::elem::{Bf16, Elem, F16};
use crate::params::{SiluMulParams, VecaddParams};

/// Packs per thread per chunk in vecadd (`UNROLL` in vecadd.cu; `VECADD_UNROLL` on the host).
const UNROLL: usize = 4;
const _: () = assert!(UNROLL == 4, "the loops below are unrolled with unroll4!");

/// Grid-stride over 16-byte packs when every pointer is 16-byte aligned, then the scalar
/// tail; a scalar loop otherwise (`kiln::map2`).
#[inline(always)]
unsafe fn map2<T: Elem>(
    n: u64,
    a: *const T,
    b: *const T,
    out: *mut T,
    f: impl Fn(f32, f32) -> f32,
) {
    let stride = device::grid_threads();
    let mut start = 0;
    if device::aligned16(a) && device::aligned16(b) && device::aligned16(out) {
        let packs = n / T::N as u64;
        let mut i = device::global_thread();
        while i < packs {
            let (pa, pb) = (device::load_pack(a, i), device::load_pack(b, i));
            device::store_pack(out, i, T::map_pack(&pa, &pb, &f));
            i += stride;
        }
        start = packs * T::N as u64;
    }
    let mut i = start + device::global_thread();
    while i < n {
        let j = i as usize;
        *out.add(j) = T::from_f32(f((*a.add(j)).to_f32(), (*b.add(j)).to_f32()));
        i += stride;
    }
}

/// UNROLL packs of a and of b loaded per thread before any store; one block per
/// UNROLL·blockDim packs, grid-stride over chunks (vecadd.cu).
#[inline(always)]
unsafe fn vecadd<T: Elem>(p: VecaddParams, a: *const T, b: *const T, out: *mut T) {
    let n = p.n;
    if !(device::aligned16(a) && device::aligned16(b) && device::aligned16(out)) {
        map2(n, a, b, out, |x, y| x + y);
        return;
    }
    let packs = n / T::N as u64;
    // Offsets inside a chunk (< UNROLL·blockDim ≤ 4096 packs) in 32 bits; only the chunk base
    // is 64-bit. With every index 64-bit, LLVM strength-reduced twelve 64-bit address streams
    // and spent ~70 uniform instructions before the first load (docs/rust-kernels-sass.md).
    let (tid, bdim) = (device::thread_x() as u32, device::block_dim() as u32);
    let chunk = UNROLL as u64 * bdim as u64;
    let mut base = device::block_x() * chunk;
    while base < packs {
        let (ab, bb, ob) = (
            (a as *const Pack).wrapping_add(base as usize),
            (b as *const Pack).wrapping_add(base as usize),
            (out as *mut Pack).wrapping_add(base as usize),
        );
        let left = packs - base;
        let mut pa: [Pack; UNROLL] = [[0; 4]; UNROLL];
        let mut pb: [Pack; UNROLL] = [[0; 4]; UNROLL];
        unroll4!(K => {
            let o = (K as u32 * bdim + tid) as u64;
            pa[K] = device::load_pack_if(o < left, ab, o);
            pb[K] = device::load_pack_if(o < left, bb, o);
        });
        unroll4!(K => {
            let o = (K as u32 * bdim + tid) as u64;
            if o < left {
                device::store_pack(ob, o, T::map_pack(&pa[K], &pb[K], |x, y| x + y));
            }
        });
        base += device::grid_dim() * chunk;
    }
    // The n % N elements past the last pack.
    let mut i = packs * T::N as u64 + device::global_thread();
    while i < n {
        let j = i as usize;
        *out.add(j) = T::from_f32((*a.add(j)).to_f32() + (*b.add(j)).to_f32());
        i += device::grid_threads();
    }
}

/// Up to one resident wave: one pack per thread, no loop, 32-bit indices (`vecadd_flat` in
/// vecadd.cu; the host launches it only with 16-byte aligned pointers and packs plus the
/// n % N tail elements within one wave). Thread i < packs adds pack i, thread packs + j the
/// tail element j.
#[inline(always)]
unsafe fn vecadd_flat<T: Elem>(p: VecaddParams, a: *const T, b: *const T, out: *mut T) {
    let n = p.n;
    let i = (device::block_x() as u32)
        .wrapping_mul(device::block_dim() as u32)
        .wrapping_add(device::thread_x() as u32);
    let packs = (n / T::N as u64) as u32;
    if i < packs {
        let (pa, pb) = (device::load_pack(a, i as u64), device::load_pack(b, i as u64));
        device::store_pack(out, i as u64, T::map_pack(&pa, &pb, |x, y| x + y));
    } else {
        let j = packs as u64 * T::N as u64 + (i - packs) as u64;
        if j < n {
            let j = j as usize;
            *out.add(j) = T::from_f32((*a.add(j)).to_f32() + (*b.add(j)).to_f32());
        }
    }
}

#[inline(always)]
unsafe fn silu_mul<T: Elem>(p: SiluMulParams, gate: *const T, up: *const T, out: *mut T) {
    map2(p.n, gate, up, out, |g, u| g / (1.0 + device::exp(-g)) * u);
}

/// `rs_NAME_f32`, `rs_NAME_f16`, `rs_NAME_bf16` entry points over a generic kernel.
macro_rules! instantiate3 {
    ($kernel:ident, $params:ty, $f32:ident, $f16:ident, $bf16:ident) => {
        /// # Safety
        /// Launched by kiln-runtime with pointers to `p.n` elements (see its `rs` ops).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $f32(
            p: $params,
            a: *const f32,
            b: *const f32,
            out: *mut f32,
        ) {
            $kernel(p, a, b, out)
        }
        /// # Safety
        /// As above, f16 elements.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $f16(
            p: $params,
            a: *const F16,
            b: *const F16,
            out: *mut F16,
        ) {
            $kernel(p, a, b, out)
        }
        /// # Safety
        /// As above, bf16 elements.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $bf16(
            p: $params,
            a: *const Bf16,
            b: *const Bf16,
            out: *mut Bf16,
        ) {
            $kernel(p, a, b, out)
        }
    };
}
pub(crate) use instantiate3;

instantiate3!(
    vecadd,
    VecaddParams,
    rs_vecadd_f32,
    rs_vecadd_f16,
    rs_vecadd_bf16
);
instantiate3!(
    vecadd_flat,
    VecaddParams,
    rs_vecadd_flat_f32,
    rs_vecadd_flat_f16,
    rs_vecadd_flat_bf16
);
instantiate3!(
    silu_mul,
    SiluMulParams,
    rs_silu_mul_f32,
    rs_silu_mul_f16,
    rs_silu_mul_bf16
);
