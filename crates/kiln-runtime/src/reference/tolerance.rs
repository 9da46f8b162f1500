//! How close a GPU result must be to the CPU reference: |gpu − ref| ≤ atol + rtol·|ref| per
//! element, NaN only where the reference is NaN.
//!
//! Per dtype (for ops whose math is f32 and whose result is rounded once to the output type):
//! - f32:  atol 1e-5, rtol 1e-5 — a few f32 ulps of device `expf`/`rsqrtf`/`sincosf` error;
//! - f16:  atol 1e-3, rtol 2e-3 — the half-ulp output rounding (2^-11 ≈ 4.9e-4) doubled,
//!   plus f32 math error; allows the reference and GPU to round a near-tie differently;
//! - bf16: atol 8e-3, rtol 1.6e-2 — the same for bf16's 8-bit mantissa (2^-8 ≈ 3.9e-3 ulp).
//!
//! Ops add what their math needs on top: [`Tolerance::matmul`] scales atol with k (f32
//! accumulation order), [`Tolerance::rope`] adds the f32 angle error that grows with the
//! position; embedding and a one-rank all-reduce are exact.

use crate::dtype::DType;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub atol: f32,
    pub rtol: f32,
}

impl Tolerance {
    pub const fn exact() -> Tolerance {
        Tolerance {
            atol: 0.0,
            rtol: 0.0,
        }
    }

    /// The base tolerance of a dtype (see the module docs).
    pub fn for_dtype(dtype: DType) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance {
                atol: 1e-5,
                rtol: 1e-5,
            },
            DType::F16 => Tolerance {
                atol: 1e-3,
                rtol: 2e-3,
            },
            DType::BF16 => Tolerance {
                atol: 8e-3,
                rtol: 1.6e-2,
            },
            DType::I32 | DType::I64 => Tolerance::exact(),
        }
    }

    /// matmul with inner dimension k, inputs of magnitude ≤ 1: f32 accumulation in another
    /// order than the reference's f64 sum differs by ~√k f32 ulps of the partial sums.
    pub fn matmul(dtype: DType, k: usize) -> Tolerance {
        let base = Tolerance::for_dtype(dtype);
        Tolerance {
            atol: base.atol + 2e-6 * k as f32,
            rtol: base.rtol,
        }
    }

    /// rope with positions up to `max_pos`: the angle pos·inv_freq is formed in f32 (as torch
    /// does), and device `powf` may differ from the host's by 2 ulps, so the angle can differ
    /// by ~2·2^-23·pos radians.
    pub fn rope(dtype: DType, max_pos: i64) -> Tolerance {
        let base = Tolerance::for_dtype(dtype);
        Tolerance {
            atol: base.atol + 4.0 * 1.2e-7 * max_pos.unsigned_abs() as f32,
            rtol: base.rtol,
        }
    }
}

/// The worst element outside tolerance.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub index: usize,
    pub got: f32,
    pub want: f32,
    /// How many elements were outside tolerance.
    pub count: usize,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} element(s) out of tolerance; worst at [{}]: got {}, want {}",
            self.count, self.index, self.got, self.want
        )
    }
}

/// Compares element-wise; Err with the worst offender when any element is out of tolerance
/// (or the lengths differ, reported as index = min length).
pub fn compare(got: &[f32], want: &[f32], tol: Tolerance) -> Result<(), Mismatch> {
    if got.len() != want.len() {
        return Err(Mismatch {
            index: got.len().min(want.len()),
            got: f32::NAN,
            want: f32::NAN,
            count: 1,
        });
    }
    let mut worst: Option<(f32, usize)> = None;
    let mut count = 0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let excess = if w.is_nan() || g.is_nan() {
            if w.is_nan() && g.is_nan() {
                0.0
            } else {
                f32::INFINITY
            }
        } else if w.is_infinite() || g.is_infinite() {
            if g == w {
                0.0
            } else {
                f32::INFINITY
            }
        } else {
            (g - w).abs() - (tol.atol + tol.rtol * w.abs())
        };
        if excess > 0.0 {
            count += 1;
            if worst.is_none_or(|(e, _)| excess > e) {
                worst = Some((excess, i));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((_, i)) => Err(Mismatch {
            index: i,
            got: got[i],
            want: want[i],
            count,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_catches_what_it_should() {
        let t = Tolerance {
            atol: 0.1,
            rtol: 0.0,
        };
        assert!(compare(&[1.0, 2.0], &[1.05, 2.0], t).is_ok());
        let e = compare(&[1.0, 2.5, 3.0], &[1.0, 2.0, 3.3], t).unwrap_err();
        assert_eq!((e.index, e.count), (1, 2));
        assert!(compare(&[f32::NAN], &[1.0], t).is_err());
        assert!(compare(&[f32::NAN], &[f32::NAN], t).is_ok());
        assert!(compare(&[1.0], &[1.0, 2.0], t).is_err());
        assert!(compare(&[f32::INFINITY], &[1e30], t).is_err());
        // rtol scales with the reference.
        assert!(compare(
            &[110.0],
            &[100.0],
            Tolerance {
                atol: 0.0,
                rtol: 0.11
            }
        )
        .is_ok());
        assert!(compare(
            &[110.0],
            &[100.0],
            Tolerance {
                atol: 0.0,
                rtol: 0.09
            }
        )
        .is_err());
    }

    #[test]
    fn dtype_tolerances_cover_one_output_rounding() {
        // A value rounded once to the dtype must pass its own tolerance.
        for dt in DType::FLOATS {
            let t = Tolerance::for_dtype(dt);
            for i in 0..2000 {
                let v = (i as f32 * 0.7371).sin() * 3.0;
                let r = super::super::round_to(v, dt);
                assert!(compare(&[r], &[v], t).is_ok(), "{dt}: {v} -> {r}");
            }
        }
    }
}
