//! RMSNorm over the last dimension, the twin of kernels/rmsnorm.cu: one block per row
//! (grid-stride over rows), a block-wide f32 sum of squares through shared memory, then the
//! row scaled by the weight; rows of up to CACHE packs per thread stay in registers.

use crate::device::{self, Pack};
use crate::elem::{Bf16, Elem, F16};
use crate::elementwise::instantiate3;
use crate::params::RmsnormParams;

/// Packs per thread kept in registers on the single-read path (`CACHE` in rmsnorm.cu).
const CACHE: usize = 4;
const _: () = assert!(CACHE == 4, "the loops below are unrolled with unroll4!");

#[inline(always)]
unsafe fn rmsnorm<T: Elem>(p: RmsnormParams, x: *const T, w: *const T, out: *mut T) {
    let n = T::N as u64;
    let cols = p.cols;
    let (tid, bdim) = (device::thread_x(), device::block_dim());
    let vec =
        device::aligned16(x) && device::aligned16(w) && device::aligned16(out) && cols % n == 0;
    let mut row = device::block_x();
    while row < p.rows {
        let xr = x.add((row * cols) as usize);
        let outr = out.add((row * cols) as usize);
        let mut ss = 0.0f32;
        let packs = cols / n;
        if vec && packs <= CACHE as u64 * bdim {
            // All CACHE loads predicated and in flight before any arithmetic (a load inside
            // an `if` with the sum beside it left a branch per pack and four serial round
            // trips); a pack past the row is zeros and adds nothing.
            // Here packs ≤ CACHE·blockDim ≤ 4096: 32-bit indices (as the C++ twin's registers
            // are spent).
            let (t32, b32, packs32) = (tid as u32, bdim as u32, packs as u32);
            let mut cache: [Pack; CACHE] = [[0; 4]; CACHE];
            unroll4!(K => {
                let i = t32 + K as u32 * b32;
                cache[K] = device::load_pack_if(i < packs32, xr, i as u64);
            });
            unroll4!(K => {
                ss = T::fold_pack(ss, &cache[K], |s, f| device::fma(f, f, s));
            });
            let scale = device::rsqrt(device::block_sum(ss) / cols as f32 + p.eps);
            unroll4!(K => {
                let i = t32 + K as u32 * b32;
                if i < packs32 {
                    let g = device::load_pack(w, i as u64);
                    let o = T::map_pack(&device::opaque(cache[K]), &g, |x, g| x * scale * g);
                    device::store_pack(outr, i as u64, o);
                }
            });
        } else {
            if vec {
                let mut i = tid;
                while i < packs {
                    ss = T::fold_pack(ss, &device::load_pack(xr, i), |s, f| device::fma(f, f, s));
                    i += bdim;
                }
            } else {
                let mut i = tid;
                while i < cols {
                    let f = (*xr.add(i as usize)).to_f32();
                    ss = device::fma(f, f, ss);
                    i += bdim;
                }
            }
            let scale = device::rsqrt(device::block_sum(ss) / cols as f32 + p.eps);
            if vec {
                let mut i = tid;
                while i < packs {
                    let (v, g) = (device::load_pack(xr, i), device::load_pack(w, i));
                    device::store_pack(outr, i, T::map_pack(&v, &g, |x, g| x * scale * g));
                    i += bdim;
                }
            } else {
                let mut i = tid;
                while i < cols {
                    let j = i as usize;
                    *outr.add(j) =
                        T::from_f32((*xr.add(j)).to_f32() * scale * (*w.add(j)).to_f32());
                    i += bdim;
                }
            }
        }
        row += device::grid_dim();
    }
}

instantiate3!(
    rmsnorm,
    RmsnormParams,
    rs_rmsnorm_f32,
    rs_rmsnorm_f16,
    rs_rmsnorm_bf16
);
