//! Element types: storage (f32, or the 16 bits of an f16/bf16) and conversion through f32 —
//! the hardware `cvt` with round-to-nearest-even, as `__half2float`/`__float2half_rn` and the
//! bf16 twins in kernels/include/kiln_dtype.cuh.

use core::arch::asm;

use crate::device::Pack;

/// A storage type the kernels are instantiated for; math happens in f32.
pub trait Elem: Copy {
    /// Elements per 16-byte pack.
    const N: usize;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
    /// Element `k` (< N) of a pack.
    fn get(p: &Pack, k: usize) -> f32;
    /// Sets element `k` (< N) of a pack.
    fn set(p: &mut Pack, k: usize, v: f32);
}

impl Elem for f32 {
    const N: usize = 4;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn get(p: &Pack, k: usize) -> f32 {
        f32::from_bits(p[k])
    }
    #[inline(always)]
    fn set(p: &mut Pack, k: usize, v: f32) {
        p[k] = v.to_bits();
    }
}

/// 16-bit storage types: two per 32-bit word, the lower address in the low half.
trait Half16: Copy {
    fn bits(self) -> u16;
    fn from_bits(b: u16) -> Self;
    fn widen(b: u16) -> f32;
    fn narrow(v: f32) -> u16;
}

macro_rules! half_elem {
    ($t:ident) => {
        impl Elem for $t {
            const N: usize = 8;
            #[inline(always)]
            fn to_f32(self) -> f32 {
                <$t as Half16>::widen(self.bits())
            }
            #[inline(always)]
            fn from_f32(v: f32) -> $t {
                <$t as Half16>::from_bits(<$t as Half16>::narrow(v))
            }
            #[inline(always)]
            fn get(p: &Pack, k: usize) -> f32 {
                <$t as Half16>::widen((p[k / 2] >> (16 * (k % 2))) as u16)
            }
            #[inline(always)]
            fn set(p: &mut Pack, k: usize, v: f32) {
                let shift = 16 * (k % 2);
                let word = &mut p[k / 2];
                *word = (*word & !(0xffff << shift)) | ((<$t as Half16>::narrow(v) as u32) << shift);
            }
        }
    };
}

/// IEEE binary16, stored as its bits.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct F16(u16);

/// bfloat16, stored as its bits.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Bf16(u16);

impl Half16 for F16 {
    fn bits(self) -> u16 {
        self.0
    }
    fn from_bits(b: u16) -> F16 {
        F16(b)
    }
    #[inline(always)]
    fn widen(b: u16) -> f32 {
        let r: f32;
        // SAFETY: arithmetic only.
        unsafe {
            asm!("cvt.f32.f16 {r}, {b};", r = out(reg32) r, b = in(reg16) b,
                options(pure, nomem, nostack, preserves_flags))
        };
        r
    }
    #[inline(always)]
    fn narrow(v: f32) -> u16 {
        let r: u16;
        // SAFETY: arithmetic only.
        unsafe {
            asm!("cvt.rn.f16.f32 {r}, {v};", r = out(reg16) r, v = in(reg32) v,
                options(pure, nomem, nostack, preserves_flags))
        };
        r
    }
}

impl Half16 for Bf16 {
    fn bits(self) -> u16 {
        self.0
    }
    fn from_bits(b: u16) -> Bf16 {
        Bf16(b)
    }
    #[inline(always)]
    fn widen(b: u16) -> f32 {
        // bf16 is the upper half of an f32: widening is exact.
        f32::from_bits((b as u32) << 16)
    }
    #[inline(always)]
    fn narrow(v: f32) -> u16 {
        let r: u16;
        // SAFETY: arithmetic only (sm_80+, PTX ISA 7.0).
        unsafe {
            asm!("cvt.rn.bf16.f32 {r}, {v};", r = out(reg16) r, v = in(reg32) v,
                options(pure, nomem, nostack, preserves_flags))
        };
        r
    }
}

half_elem!(F16);
half_elem!(Bf16);
