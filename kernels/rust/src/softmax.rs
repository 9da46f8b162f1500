//! Numerically stable softmax over the last dimension, the twin of kernels/softmax.cu: a
//! group of G threads (a power of two, 32..1024, derived from the row length by the same rule
//! on both sides) owns one row, several short rows per block. Rows of up to EPT·G elements
//! whose pointers and length allow 16-byte packs are held in registers (read once, written
//! once, one exp per element); other rows take an online (max, sum) pass and a re-reading
//! write pass.

use crate::device::{self, Pack, Scratch};
use crate::elem::{Bf16, Elem, F16};
use crate::params::SoftmaxParams;

/// Elements per thread held in registers (`EPT` in softmax.cu, `SOFTMAX_EPT` on the host).
const EPT: u64 = 32;
const LOG2E: f32 = core::f32::consts::LOG2_E;
const _: () = assert!(
    EPT == 32,
    "row_in_registers holds 8 packs of up to 8 elements"
);

/// Adds one value to a running (max, sum): -inf adds nothing (an all -inf row keeps max =
/// -inf, sum = 0, which gives NaN like torch).
#[inline(always)]
fn online_add(m: &mut f32, s: &mut f32, x: f32) {
    if x > *m {
        *s = *s * device::exp(*m - x) + 1.0;
        *m = x;
    } else if x != f32::NEG_INFINITY {
        *s += device::exp(x - *m);
    }
}

#[inline(always)]
fn merge_pair(m: &mut f32, s: &mut f32, om: f32, os: f32) {
    let nm = m.max(om);
    let a = if *m == f32::NEG_INFINITY {
        0.0
    } else {
        *s * device::exp(*m - nm)
    };
    let b = if om == f32::NEG_INFINITY {
        0.0
    } else {
        os * device::exp(om - nm)
    };
    *s = a + b;
    *m = nm;
}

/// This thread's group and its index in the group: `(tid / g, tid % g)`, by shifts. `g` is a
/// power of two unless it is the whole block (`group_threads` clamps it to blockDim.x). A
/// plain `/` and `%` here became `div.u16` (LLVM narrowed them, knowing both < 2^16), which
/// ptxas implements as a subroutine call: two CALLs before the first load of every block,
/// 5 % of rs.softmax's time at 16384×4096 f16 (docs/rust-kernels-sass.md).
#[inline(always)]
fn group_of(tid: u32, g: u32) -> (u32, u32) {
    if g >= device::block_dim() as u32 {
        (0, tid)
    } else {
        (tid >> g.trailing_zeros(), tid & (g - 1))
    }
}

/// Where thread `lane` of a warp reads its group's partial from the scratch (G > 32).
#[inline(always)]
fn group_slot(g: u32) -> (bool, u32) {
    let tid = device::thread_x() as u32;
    let (lane, wpg) = (tid & 31, g >> 5);
    let idx = group_of(tid, g).0 * wpg + lane;
    (lane < wpg && idx < 32, idx)
}

/// Group-wide reduction with `op` (identity `id`). G is block-uniform; every thread of the
/// block calls it (those of inactive groups too), so the barriers are reached by all.
#[inline(always)]
fn group_reduce(mut v: f32, g: u32, id: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut o = 16;
    while o > 0 {
        v = op(v, device::shfl_xor(v, o));
        o >>= 1;
    }
    if g > 32 {
        let tid = device::thread_x() as u32;
        if tid & 31 == 0 {
            // SAFETY: warp < 32 (at most 1024 threads).
            unsafe { device::scratch_store_in(Scratch::A, tid >> 5, v) };
        }
        device::sync_threads();
        let (inside, idx) = group_slot(g);
        // SAFETY: idx < 32 when read.
        v = if inside {
            unsafe { device::scratch_load_in(Scratch::A, idx) }
        } else {
            id
        };
        let mut o = 16;
        while o > 0 {
            v = op(v, device::shfl_xor(v, o));
            o >>= 1;
        }
        device::sync_threads();
    }
    v
}

/// The (max, sum) pairs of a group merged (`group_merge` in softmax.cu).
#[inline(always)]
fn group_merge(m: &mut f32, s: &mut f32, g: u32) {
    let mut o = 16;
    while o > 0 {
        let (om, os) = (device::shfl_xor(*m, o), device::shfl_xor(*s, o));
        merge_pair(m, s, om, os);
        o >>= 1;
    }
    if g > 32 {
        let tid = device::thread_x() as u32;
        if tid & 31 == 0 {
            // SAFETY: warp < 32.
            unsafe {
                device::scratch_store_in(Scratch::A, tid >> 5, *m);
                device::scratch_store_in(Scratch::B, tid >> 5, *s);
            }
        }
        device::sync_threads();
        let (inside, idx) = group_slot(g);
        // SAFETY: idx < 32 when read.
        (*m, *s) = if inside {
            unsafe {
                (
                    device::scratch_load_in(Scratch::A, idx),
                    device::scratch_load_in(Scratch::B, idx),
                )
            }
        } else {
            (f32::NEG_INFINITY, 0.0)
        };
        let mut o = 16;
        while o > 0 {
            let (om, os) = (device::shfl_xor(*m, o), device::shfl_xor(*s, o));
            merge_pair(m, s, om, os);
            o >>= 1;
        }
        device::sync_threads();
    }
}

/// Threads per row: the smallest power of two ≥ 32 with EPT elements per thread covering the
/// row, at most 1024 and at most blockDim.x (`group_threads`; the host's `softmax_group`).
#[inline(always)]
fn group_threads(cols: u64) -> u32 {
    let mut g = 32u32;
    while g < 1024 && (g as u64) * EPT < cols {
        g <<= 1;
    }
    let b = device::block_dim() as u32;
    if g < b {
        g
    } else {
        b
    }
}

/// One row in registers: EPT/N packs per thread (pack i = t + k·G), all loads in flight at
/// once (predicated), max, exp2 in place, sum, scale, store. Every loop over packs and
/// elements is unrolled with constant indices: an element loop LLVM left rolled put the
/// pack in local memory (seen in the two-pass path's first version: STL/LDL in the SASS).
#[inline(always)]
unsafe fn row_in_registers<T: Elem>(
    xr: *const T,
    outr: *mut T,
    cols: u64,
    t: u32,
    g: u32,
    active: bool,
) {
    let w = T::N;
    let u = EPT as usize / w; // packs per thread: 8 (f32) or 4 (f16/bf16)
    let units = (cols / w as u64) as u32; // cols ≤ EPT·1024 here

    // 16-bit elements: every load first, then the widening. With each pack widened right
    // after its load, ptxas reused the first pack's registers for the second load and waited
    // for the first (rs_softmax_f16/bf16 at 1.3x the C++ time on the H200 until this split).
    // f32 "widens" by reinterpreting bits; splitting it only cost registers (86 -> 96).
    let split = T::N == 8;
    let mut raw: [Pack; 8] = [[0; 4]; 8];
    let mut v = [[f32::NEG_INFINITY; 8]; 8];
    unroll8!(K => {
        if K < u {
            let i = t + K as u32 * g;
            let ok = active && i < units;
            raw[K] = device::load_pack_if(ok, xr, i as u64);
            if !split && ok {
                v[K] = T::unpack(&raw[K]);
            }
        }
    });
    if split {
        unroll8!(K => {
            if K < u {
                let i = t + K as u32 * g;
                if active && i < units {
                    v[K] = T::unpack(&raw[K]);
                }
            }
        });
    }
    let mut m = f32::NEG_INFINITY;
    unroll8!(K => {
        if K < u {
            unroll8!(E => {
                if E < w {
                    m = m.max(v[K][E]);
                }
            });
        }
    });
    let m = group_reduce(m, g, f32::NEG_INFINITY, f32::max);
    // exp(x - m) = exp2(x·log2e - m·log2e); the rounding of m·log2e is common to the row
    // and cancels in the normalisation. An all -inf row: m = -inf gives NaN, like torch.
    let ms = m * LOG2E;
    let mut s = 0.0f32;
    unroll8!(K => {
        if K < u {
            unroll8!(E => {
                if E < w {
                    v[K][E] = device::exp2(device::fma(v[K][E], LOG2E, -ms));
                    s += v[K][E];
                }
            });
        }
    });
    let s = group_reduce(s, g, 0.0, |a, b| a + b);
    let inv = 1.0 / s;
    unroll8!(K => {
        if K < u {
            let i = t + K as u32 * g;
            if active && i < units {
                let mut o = v[K];
                unroll8!(E => {
                    if E < w {
                        o[E] *= inv;
                    }
                });
                device::store_pack(outr, i as u64, T::pack(&o));
            }
        }
    });
}

/// Rows longer than EPT·G (or unaligned): online (max, sum), then a re-reading write pass.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn row_two_pass<T: Elem>(
    xr: *const T,
    outr: *mut T,
    cols: u64,
    t: u32,
    g: u32,
    active: bool,
    vec: bool,
) {
    let n = T::N as u64;
    let (mut m, mut s) = (f32::NEG_INFINITY, 0.0f32);
    if active {
        if vec {
            let mut i = t as u64;
            while i < cols / n {
                let x = T::unpack(&device::load_pack(xr, i));
                unroll8!(E => {
                    if E < T::N {
                        online_add(&mut m, &mut s, x[E]);
                    }
                });
                i += g as u64;
            }
        } else {
            let mut i = t as u64;
            while i < cols {
                online_add(&mut m, &mut s, (*xr.add(i as usize)).to_f32());
                i += g as u64;
            }
        }
    }
    group_merge(&mut m, &mut s, g);
    if !active {
        return;
    }
    let inv = 1.0 / s;
    if vec {
        let mut i = t as u64;
        while i < cols / n {
            let mut x = T::unpack(&device::load_pack(xr, i));
            unroll8!(E => {
                if E < T::N {
                    x[E] = device::exp(x[E] - m) * inv;
                }
            });
            device::store_pack(outr, i, T::pack(&x));
            i += g as u64;
        }
    } else {
        let mut i = t as u64;
        while i < cols {
            let j = i as usize;
            *outr.add(j) = T::from_f32(device::exp((*xr.add(j)).to_f32() - m) * inv);
            i += g as u64;
        }
    }
}

#[inline(always)]
unsafe fn softmax<T: Elem>(p: SoftmaxParams, x: *const T, out: *mut T) {
    let cols = p.cols;
    let g = group_threads(cols);
    let tid = device::thread_x() as u32;
    // blockDim / g (1 when g is the whole block), by a shift like the division below.
    let rows_per_block = if g >= device::block_dim() as u32 {
        1
    } else {
        device::block_dim() as u32 >> g.trailing_zeros()
    };
    let (group, t) = group_of(tid, g);
    let vec = device::aligned16(x) && device::aligned16(out) && cols % T::N as u64 == 0;
    let in_registers = cols <= EPT * g as u64;
    // Block-uniform loop bounds: every thread runs the same iterations (barriers inside).
    let mut base = device::block_x() * rows_per_block as u64;
    while base < p.rows {
        let row = base + group as u64;
        let active = group < rows_per_block && row < p.rows;
        let r = if active { row } else { 0 };
        let xr = x.wrapping_add((r * cols) as usize);
        let outr = out.wrapping_add((r * cols) as usize);
        if vec && in_registers {
            row_in_registers(xr, outr, cols, t, g, active);
        } else {
            row_two_pass(xr, outr, cols, t, g, active, vec);
        }
        base += device::grid_dim() * rows_per_block as u64;
    }
}

/// `rs_softmax_f32`, `rs_softmax_f16`, `rs_softmax_bf16`.
macro_rules! instantiate_softmax {
    ($($name:ident: $t:ty),*) => {$(
        /// # Safety
        /// Launched by kiln-runtime with `x`, `out` of `p.rows × p.cols` elements (see its
        /// `rs` ops).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: SoftmaxParams, x: *const $t, out: *mut $t) {
            softmax(p, x, out)
        }
    )*};
}

instantiate_softmax!(rs_softmax_f32: f32, rs_softmax_f16: F16, rs_softmax_bf16: Bf16);
