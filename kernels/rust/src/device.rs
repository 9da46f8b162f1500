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

/// Pack `i` of a 16-byte aligned global array.
///
/// # Safety
/// `base` is 16-byte aligned global memory holding pack `i`.
#[inline(always)]
pub unsafe fn load_pack<T>(base: *const T, i: u64) -> Pack {
    let p = (base as *const Pack).add(i as usize);
    let (a, b, c, d): (u32, u32, u32, u32);
    asm!("ld.global.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
        p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
        options(readonly, nostack, preserves_flags));
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
// scratch[32]` in rmsnorm.cu).
global_asm!(".shared .align 4 .b8 kiln_rs_scratch[128];");

/// # Safety
/// `i < 32`.
#[inline(always)]
pub unsafe fn scratch_store(i: u32, v: f32) {
    asm!("{{ .reg .u32 a; mov.u32 a, kiln_rs_scratch; mad.lo.u32 a, {i}, 4, a; st.shared.f32 [a], {v}; }}",
        i = in(reg32) i, v = in(reg32) v, options(nostack, preserves_flags));
}

/// # Safety
/// `i < 32`.
#[inline(always)]
pub unsafe fn scratch_load(i: u32) -> f32 {
    let r: f32;
    asm!("{{ .reg .u32 a; mov.u32 a, kiln_rs_scratch; mad.lo.u32 a, {i}, 4, a; ld.shared.f32 {r}, [a]; }}",
        i = in(reg32) i, r = out(reg32) r, options(readonly, nostack, preserves_flags));
    r
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

#[inline(always)]
fn ex2(x: f32) -> f32 {
    let r: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!("ex2.approx.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
            options(pure, nomem, nostack, preserves_flags))
    };
    r
}

#[inline(always)]
fn fma(a: f32, b: f32, c: f32) -> f32 {
    let r: f32;
    // SAFETY: arithmetic only.
    unsafe {
        asm!("fma.rn.f32 {r}, {a}, {b}, {c};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
            c = in(reg32) c, options(pure, nomem, nostack, preserves_flags))
    };
    r
}

/// e^x to a few ulps: x = n·ln2 + r (Cody–Waite, |r| ≤ ln2/2), e^x = 2^n · 2^(r·log2 e).
/// Overflow gives +inf and underflow 0, as `expf`.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let t = x * LOG2E;
    // Round to nearest by the 1.5·2^23 trick; beyond ±300 e^x is 0 or inf anyway.
    let n = ((t.clamp(-300.0, 300.0) + 12_582_912.0) - 12_582_912.0) as i32;
    let nf = n as f32;
    let r = fma(nf, -LN2_LO, fma(nf, -LN2_HI, x));
    // 2^n in two exact factors (each a normal power of two) so n in [-252, 254] stays exact;
    // out of that range the product rounds to 0 or inf, as e^x does.
    let n = n.clamp(-252, 254);
    let (k1, k2) = (n / 2, n - n / 2);
    let pow2 = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    ex2(r * LOG2E) * pow2(k1) * pow2(k2)
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
