//! Element types: storage (f32, or the 16 bits of an f16/bf16) and conversion through f32 —
//! the hardware `cvt` with round-to-nearest-even, as `__half2float`/`__float2half_rn` and the
//! bf16 twins in kernels/include/kiln_dtype.cuh.

use core::arch::asm;

use crate::device::Pack;

/// A storage type the kernels are instantiated for; math happens in f32.
///
/// Packs are processed whole, with constant word indices only: an element index that LLVM
/// cannot resolve at compile time puts the pack in local memory (measured: f16/bf16 kernels
/// at half the bandwidth of their C++ twins until the per-element accessors went).
pub trait Elem: Copy {
    /// Elements per 16-byte pack.
    const N: usize;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
    /// The pack of `f(a[e], b[e])` for every element e.
    fn map_pack(a: &Pack, b: &Pack, f: impl Fn(f32, f32) -> f32) -> Pack;
    /// `acc = f(acc, x[e])` over the elements in memory order.
    fn fold_pack(acc: f32, x: &Pack, f: impl Fn(f32, f32) -> f32) -> f32;
    /// The pack's N elements as f32 (elements past N are 0).
    fn unpack(x: &Pack) -> [f32; 8];
    /// The first N values, rounded into a pack.
    fn pack(v: &[f32; 8]) -> Pack;
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
    fn map_pack(a: &Pack, b: &Pack, f: impl Fn(f32, f32) -> f32) -> Pack {
        let w = |i: usize| f(f32::from_bits(a[i]), f32::from_bits(b[i])).to_bits();
        [w(0), w(1), w(2), w(3)]
    }
    #[inline(always)]
    fn fold_pack(acc: f32, x: &Pack, f: impl Fn(f32, f32) -> f32) -> f32 {
        let acc = f(acc, f32::from_bits(x[0]));
        let acc = f(acc, f32::from_bits(x[1]));
        let acc = f(acc, f32::from_bits(x[2]));
        f(acc, f32::from_bits(x[3]))
    }
    #[inline(always)]
    fn unpack(x: &Pack) -> [f32; 8] {
        let w = |i: usize| f32::from_bits(x[i]);
        [w(0), w(1), w(2), w(3), 0.0, 0.0, 0.0, 0.0]
    }
    #[inline(always)]
    fn pack(v: &[f32; 8]) -> Pack {
        [
            v[0].to_bits(),
            v[1].to_bits(),
            v[2].to_bits(),
            v[3].to_bits(),
        ]
    }
}

/// 16-bit storage types: two per 32-bit word, the lower address in the low half.
trait Half16: Copy {
    fn bits(self) -> u16;
    fn from_bits(b: u16) -> Self;
    fn widen(b: u16) -> f32;
    fn narrow(v: f32) -> u16;
    /// Two values rounded into one word, `lo` in the low half: one `cvt.rn.{f16,bf16}x2.f32`
    /// (F2FP.PACK_AB, what nvcc emits for the C++ twins' packs). Two scalar `cvt`s plus the
    /// shift and OR cost twice the conversions (F2F) and a PRMT/LOP3 besides (measured in
    /// docs/rust-kernels-sass.md).
    fn narrow2(lo: f32, hi: f32) -> u32;
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
            fn map_pack(a: &Pack, b: &Pack, f: impl Fn(f32, f32) -> f32) -> Pack {
                let lo = |x: u32| <$t as Half16>::widen(x as u16);
                let hi = |x: u32| <$t as Half16>::widen((x >> 16) as u16);
                let w = |i: usize| {
                    <$t as Half16>::narrow2(f(lo(a[i]), lo(b[i])), f(hi(a[i]), hi(b[i])))
                };
                [w(0), w(1), w(2), w(3)]
            }
            #[inline(always)]
            fn fold_pack(acc: f32, x: &Pack, f: impl Fn(f32, f32) -> f32) -> f32 {
                let lo = |x: u32| <$t as Half16>::widen(x as u16);
                let hi = |x: u32| <$t as Half16>::widen((x >> 16) as u16);
                let acc = f(f(acc, lo(x[0])), hi(x[0]));
                let acc = f(f(acc, lo(x[1])), hi(x[1]));
                let acc = f(f(acc, lo(x[2])), hi(x[2]));
                f(f(acc, lo(x[3])), hi(x[3]))
            }
            #[inline(always)]
            fn unpack(x: &Pack) -> [f32; 8] {
                let lo = |x: u32| <$t as Half16>::widen(x as u16);
                let hi = |x: u32| <$t as Half16>::widen((x >> 16) as u16);
                [
                    lo(x[0]),
                    hi(x[0]),
                    lo(x[1]),
                    hi(x[1]),
                    lo(x[2]),
                    hi(x[2]),
                    lo(x[3]),
                    hi(x[3]),
                ]
            }
            #[inline(always)]
            fn pack(v: &[f32; 8]) -> Pack {
                let w = |i: usize| <$t as Half16>::narrow2(v[2 * i], v[2 * i + 1]);
                [w(0), w(1), w(2), w(3)]
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
    #[inline(always)]
    fn narrow2(lo: f32, hi: f32) -> u32 {
        let r: u32;
        // SAFETY: arithmetic only; the first source goes to the upper half (PTX ISA 7.0).
        unsafe {
            asm!("cvt.rn.f16x2.f32 {r}, {hi}, {lo};", r = out(reg32) r, hi = in(reg32) hi,
                lo = in(reg32) lo, options(pure, nomem, nostack, preserves_flags))
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
    #[inline(always)]
    fn narrow2(lo: f32, hi: f32) -> u32 {
        let r: u32;
        // SAFETY: arithmetic only; the first source goes to the upper half (sm_80, PTX 7.0).
        unsafe {
            asm!("cvt.rn.bf16x2.f32 {r}, {hi}, {lo};", r = out(reg32) r, hi = in(reg32) hi,
                lo = in(reg32) lo, options(pure, nomem, nostack, preserves_flags))
        };
        r
    }
}

half_elem!(F16);
half_elem!(Bf16);
