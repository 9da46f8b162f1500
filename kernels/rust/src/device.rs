//! Thread indices, 16-byte global loads/stores, warp shuffles, barriers, shared memory and
//! the fast math the C++ twins get from CUDA's headers — as PTX, one instruction each.

use core::arch::{asm, global_asm, nvptx};

/// 16 bytes: the widest access one thread issues (LDG.128 / STG.128).
pub type Pack = [u32; 4];

#[inline(always)]
pub fn thread_x() -> u64 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_thread_idx_x() as u64 }
}
#[inline(always)]
pub fn block_x() -> u64 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_x() as u64 }
}
#[inline(always)]
pub fn block_dim() -> u64 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_dim_x() as u64 }
}
#[inline(always)]
pub fn grid_dim() -> u64 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_x() as u64 }
}
#[inline(always)]
pub fn global_thread() -> u64 {
    block_x() * block_dim() + thread_x()
}
#[inline(always)]
pub fn grid_threads() -> u64 {
    grid_dim() * block_dim()
}

#[inline(always)]
pub fn aligned16<T>(p: *const T) -> bool {
    (p as usize) & 15 == 0
}

/// Pack `i` of a 16-byte aligned global array, through the read-only data path
/// (`ld.global.nc`: LDG.E.128.CONSTANT, what nvcc emits for the C++ twins' `const T*
/// __restrict__` inputs). Valid because no kernel writes memory it reads: kiln-runtime
/// rejects an output that overlaps an input.
///
/// # Safety
/// `base` is 16-byte aligned global memory holding pack `i`, not written during the kernel.
#[inline(always)]
pub unsafe fn load_pack<T>(base: *const T, i: u64) -> Pack {
    let p = (base as *const Pack).add(i as usize);
    let (a, b, c, d): (u32, u32, u32, u32);
    asm!("ld.global.nc.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
        p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
        options(pure, readonly, nostack, preserves_flags));
    [a, b, c, d]
}

/// Pack `i` if `cond`, else zeros — one predicated load, no branch. A load under an `if`
/// that holds other work leaves a branch around each load, and ptxas then issues the loads
/// one round trip after another (measured: rs_rmsnorm_f16's four row loads were serialized
/// this way, see docs/rust-kernels-sass.md); predicated, they are all in flight at once, as
/// nvcc's if-converted loads are.
///
/// # Safety
/// When `cond` holds, as [`load_pack`]; otherwise nothing is read (the address is computed
/// with wrapping arithmetic and never dereferenced).
#[inline(always)]
pub unsafe fn load_pack_if<T>(cond: bool, base: *const T, i: u64) -> Pack {
    let p = (base as *const Pack).wrapping_add(i as usize);
    let (a, b, c, d): (u32, u32, u32, u32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c0}, 0; mov.b32 {a}, 0; mov.b32 {b}, 0; mov.b32 {c}, 0; mov.b32 {d}, 0;",
        "@p ld.global.nc.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}]; }}",
        c0 = in(reg32) cond as u32, p = in(reg64) p,
        a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
        options(pure, readonly, nostack, preserves_flags));
    [a, b, c, d]
}

/// `v`, unchanged, but as a value LLVM cannot see through: what was computed from the
/// old value is not reused for the new one. rmsnorm passes its cached row through this after
/// the block reduction, so the 16-bit halves are widened again (HADD2.F32, cheap) rather than
/// their 32 widened floats being kept live across the barrier — which is what LLVM's CSE of
/// the pure `cvt` did: 71 registers for rs_rmsnorm_f16 against the C++ twin's 51.
#[inline(always)]
pub fn opaque(v: Pack) -> Pack {
    let [mut a, mut b, mut c, mut d] = v;
    // SAFETY: an empty instruction sequence.
    unsafe {
        asm!("// opaque {a} {b} {c} {d}", a = inout(reg32) a, b = inout(reg32) b,
            c = inout(reg32) c, d = inout(reg32) d, options(nomem, nostack, preserves_flags));
    }
    [a, b, c, d]
}

/// Stores pack `i` with one 128-bit `st.global` (as `kiln::store_pack` does).
///
/// # Safety
/// `base` is 16-byte aligned global memory with room for pack `i`.
#[inline(always)]
pub unsafe fn store_pack<T>(base: *mut T, i: u64, v: Pack) {
    let p = (base as *mut Pack).add(i as usize);
    asm!("st.global.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};",
        p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3],
        options(nostack, preserves_flags));
}

#[inline(always)]
pub fn shfl_xor(v: f32, lane_mask: u32) -> f32 {
    let r: f32;
    // SAFETY: a full-warp shuffle; every caller runs it with all 32 lanes converged.
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 31, -1;", r = out(reg32) r, v = in(reg32) v,
            m = in(reg32) lane_mask, options(nomem, nostack, preserves_flags));
    }
    r
}

#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a block barrier; callers reach it uniformly.
    unsafe { nvptx::_syncthreads() }
}

// 32 floats of static shared memory: the block reduction's scratch (`__shared__ float
// scratch[32]` in rmsnorm.cu), and a second array for softmax's (max, sum) pairs
// (`scratch_s` in softmax.cu). A kernel is given only the arrays it references.
global_asm!(".shared .align 4 .b8 kiln_rs_scratch[128];");
global_asm!(".shared .align 4 .b8 kiln_rs_scratch2[128];");

/// One of the two 32-float shared arrays.
#[derive(Clone, Copy)]
pub enum Scratch {
    A,
    B,
}

/// # Safety
/// `i < 32`.
#[inline(always)]
pub unsafe fn scratch_store_in(s: Scratch, i: u32, v: f32) {
    match s {
        Scratch::A => {
            asm!("{{ .reg .u32 a; mov.u32 a, kiln_rs_scratch; mad.lo.u32 a, {i}, 4, a; st.shared.f32 [a], {v}; }}",
            i = in(reg32) i, v = in(reg32) v, options(nostack, preserves_flags))
        }
        Scratch::B => {
            asm!("{{ .reg .u32 a; mov.u32 a, kiln_rs_scratch2; mad.lo.u32 a, {i}, 4, a; st.shared.f32 [a], {v}; }}",
            i = in(reg32) i, v = in(reg32) v, options(nostack, preserves_flags))
        }
    }
}

/// # Safety
/// `i < 32`.
#[inline(always)]
pub unsafe fn scratch_load_in(s: Scratch, i: u32) -> f32 {
    let r: f32;
    match s {
        Scratch::A => {
            asm!("{{ .reg .u32 a; mov.u32 a, kiln_rs_scratch; mad.lo.u32 a, {i}, 4, a; ld.shared.f32 {r}, [a]; }}",
            i = in(reg32) i, r = out(reg32) r, options(readonly, nostack, preserves_flags))
        }
        Scratch::B => {
            asm!("{{ .reg .u32 a; mov.u32 a, kiln_rs_scratch2; mad.lo.u32 a, {i}, 4, a; ld.shared.f32 {r}, [a]; }}",
            i = in(reg32) i, r = out(reg32) r, options(readonly, nostack, preserves_flags))
        }
    }
    r
}

/// # Safety
/// `i < 32`.
#[inline(always)]
pub unsafe fn scratch_store(i: u32, v: f32) {
    scratch_store_in(Scratch::A, i, v)
}

/// # Safety
/// `i < 32`.
#[inline(always)]
pub unsafe fn scratch_load(i: u32) -> f32 {
    scratch_load_in(Scratch::A, i)
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it, and
/// the trailing barrier makes the scratch reusable at once (`kiln::block_sum`).
#[inline(always)]
pub fn block_sum(mut v: f32) -> f32 {
    let mut o = 16;
    while o > 0 {
        v += shfl_xor(v, o);
        o >>= 1;
    }
    let (warp, lane, warps) = (
        (thread_x() >> 5) as u32,
        (thread_x() & 31) as u32,
        (block_dim() >> 5) as u32,
    );
    if lane == 0 {
        // SAFETY: warp < 32 (at most 1024 threads).
        unsafe { scratch_store(warp, v) };
    }
    sync_threads();
    // SAFETY: lane < 32.
    v = if lane < warps {
        unsafe { scratch_load(lane) }
    } else {
        0.0
    };
    let mut o = 16;
    while o > 0 {
        v += shfl_xor(v, o);
        o >>= 1;
    }
    sync_threads();
    v
}

/// 2^x for |x| ≤ 1 (no subnormal in or out, so flushing them costs nothing).
#[inline(always)]
fn ex2_ftz(x: f32) -> f32 {
    let r: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!("ex2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
            options(pure, nomem, nostack, preserves_flags))
    };
    r
}

#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    let r: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!("fma.rn.f32 {r}, {a}, {b}, {c};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
            c = in(reg32) c, options(pure, nomem, nostack, preserves_flags))
    };
    r
}

/// e^x to a few ulps, the libdevice `expf` scheme: x = j·ln2 + f (Cody–Waite, |f| ≤ ln2/2),
/// e^x = 2^j · 2^(f·log2 e), 2^j added to the exponent bits. Above 88.72 it is +inf; below
/// -87.34 (a subnormal result) it is 0, as with `-ftz`. A first version with clamps and two
/// exact power-of-two factors measured 1.45x the C++ silu_mul time on f16/bf16 (compute-bound).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const SHIFTER: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer in the low bits
    let t = fma(x, LOG2E, SHIFTER);
    let j = t - SHIFTER;
    let f = fma(j, -LN2_LO, fma(j, -LN2_HI, x));
    let r = ex2_ftz(f * LOG2E);
    let r = f32::from_bits(r.to_bits().wrapping_add(t.to_bits() << 23));
    if x > 88.722_83 {
        f32::INFINITY
    } else if x < -87.336_55 {
        0.0
    } else {
        r
    }
}

/// 2^x as CUDA's `exp2f`: `ex2.approx.f32` (not `.ftz`: ptxas adds the subnormal scaling,
/// as it does for the C++ twin).
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    let r: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!("ex2.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
            options(pure, nomem, nostack, preserves_flags))
    };
    r
}

/// 1/sqrt(x), `rsqrt.approx` as CUDA's `rsqrtf`.
#[inline(always)]
pub fn rsqrt(x: f32) -> f32 {
    let r: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!("rsqrt.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
            options(pure, nomem, nostack, preserves_flags))
    };
    r
}
