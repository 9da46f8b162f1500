//! The reference ops, on f32 values in row-major order.

use crate::error::{Error, Result};

pub use super::convert::ids_to_bytes;

/// out = a + b.
pub fn vecadd(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// out = alpha·x + beta·y.
pub fn axpby(x: &[f32], y: &[f32], alpha: f32, beta: f32) -> Vec<f32> {
    x.iter()
        .zip(y)
        .map(|(a, b)| (alpha as f64 * *a as f64 + beta as f64 * *b as f64) as f32)
        .collect()
}

/// out = silu(gate)·up = gate / (1 + e^−gate) · up.
pub fn silu_mul(gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| {
            let g = g as f64;
            (g / (1.0 + (-g).exp()) * u as f64) as f32
        })
        .collect()
}

/// RMSNorm of each row of x [rows, cols]: x · 1/√(mean(x²) + eps) · weight.
pub fn rmsnorm(x: &[f32], weight: &[f32], cols: usize, eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    if cols == 0 {
        return out;
    }
    for row in x.chunks_exact(cols) {
        let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / cols as f64;
        let scale = 1.0 / (ms + eps as f64).sqrt();
        out.extend(
            row.iter()
                .zip(weight)
                .map(|(&v, &w)| (v as f64 * scale * w as f64) as f32),
        );
    }
    out
}

/// Softmax of each row of x [rows, cols], max subtracted first. A row of all −inf gives NaN
/// (0/0), as torch does.
pub fn softmax(x: &[f32], cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    if cols == 0 {
        return out;
    }
    for row in x.chunks_exact(cols) {
        let m = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let e: Vec<f64> = row
            .iter()
            .map(|&v| {
                if v == f32::NEG_INFINITY {
                    0.0
                } else {
                    (v as f64 - m).exp()
                }
            })
            .collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| (v / s) as f32));
    }
    out
}

/// Rotary embedding (Llama rotate-half) of x [tokens, heads, head_dim] with one position per
/// token. The angle is formed as torch-based Llama forms it — inv_freq = 1/θ^(2i/d) and
/// pos·inv_freq in f32 — then cos/sin and the rotation in f64.
pub fn rope(x: &[f32], heads: usize, head_dim: usize, positions: &[i64], theta: f32) -> Vec<f32> {
    let half = head_dim / 2;
    let mut out = vec![0.0f32; x.len()];
    for (t, &pos) in positions.iter().enumerate() {
        for i in 0..half {
            let inv_freq = 1.0f32 / theta.powf((2 * i) as f32 / head_dim as f32);
            let angle = (pos as f32 * inv_freq) as f64;
            let (s, c) = angle.sin_cos();
            for h in 0..heads {
                let base = (t * heads + h) * head_dim;
                let (a, b) = (x[base + i] as f64, x[base + half + i] as f64);
                out[base + i] = (a * c - b * s) as f32;
                out[base + half + i] = (b * c + a * s) as f32;
            }
        }
    }
    out
}

/// Positions `offset + t` for t < tokens.
pub fn offset_positions(tokens: usize, offset: i64) -> Vec<i64> {
    (0..tokens as i64).map(|t| offset + t).collect()
}

/// Embedding lookup: rows of table [vocab, dim] by id; an id outside [0, vocab) is an error
/// naming its (flat) index.
pub fn embedding(table: &[f32], dim: usize, ids: &[i64]) -> Result<Vec<f32>> {
    let vocab = table.len().checked_div(dim).unwrap_or(0);
    let mut out = Vec::with_capacity(ids.len() * dim);
    for (i, &id) in ids.iter().enumerate() {
        if id < 0 || id as usize >= vocab {
            return Err(Error::Index(format!(
                "embedding: ids[{i}] = {id} is outside [0, {vocab})"
            )));
        }
        out.extend_from_slice(&table[id as usize * dim..(id as usize + 1) * dim]);
    }
    Ok(out)
}

/// c = a @ b for row-major a [m, k], b [k, n]; f64 accumulation.
pub fn matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f64;
            for p in 0..k {
                acc += a[i * k + p] as f64 * b[p * n + j] as f64;
            }
            c[i * n + j] = acc as f32;
        }
    }
    c
}

/// Element-wise sum over ranks.
pub fn all_reduce_sum(inputs: &[Vec<f32>]) -> Vec<f32> {
    let n = inputs.first().map_or(0, |v| v.len());
    (0..n)
        .map(|i| inputs.iter().map(|v| v[i] as f64).sum::<f64>() as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f32], b: &[f32], tol: f32) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
    }

    #[test]
    fn elementwise_values() {
        assert_eq!(vecadd(&[1.0, 2.0], &[0.5, -2.0]), vec![1.5, 0.0]);
        assert_eq!(axpby(&[1.0, 2.0], &[3.0, 4.0], 2.0, -1.0), vec![-1.0, 0.0]);
        // silu(0) = 0, silu(x) → x for large x, silu(−x) → 0.
        let s = silu_mul(&[0.0, 20.0, -20.0, 1.0], &[5.0, 2.0, 2.0, 1.0]);
        assert!(close(&s, &[0.0, 40.0, 0.0, 0.7310586], 1e-5), "{s:?}");
    }

    #[test]
    fn rmsnorm_normalises_rows() {
        let x = [3.0, 4.0, 1.0, -1.0];
        let out = rmsnorm(&x, &[1.0, 1.0], 2, 0.0);
        // Row [3, 4]: rms = √12.5.
        let r = 12.5f32.sqrt();
        assert!(close(&out, &[3.0 / r, 4.0 / r, 1.0, -1.0], 1e-6), "{out:?}");
        // Weight scales per column; eps keeps a zero row finite.
        let w = rmsnorm(&[1.0, 1.0], &[2.0, -3.0], 2, 1e-6);
        assert!(close(&w, &[2.0, -3.0], 1e-5));
        assert!(rmsnorm(&[0.0, 0.0], &[1.0, 1.0], 2, 1e-6)
            .iter()
            .all(|v| *v == 0.0));
    }

    #[test]
    fn softmax_is_stable_and_normalised() {
        let out = softmax(&[1.0, 2.0, 3.0, 1000.0, 1001.0, 1002.0], 3);
        let row0: f32 = out[..3].iter().sum();
        assert!((row0 - 1.0).abs() < 1e-6);
        // Shift-invariant: huge inputs do not overflow.
        assert!(close(&out[..3], &out[3..], 1e-7), "{out:?}");
        assert!(close(
            &out[..3],
            &[0.09003057, 0.24472847, 0.66524096],
            1e-7
        ));
        let masked = softmax(&[f32::NEG_INFINITY, 0.0], 2);
        assert_eq!(masked, vec![0.0, 1.0]);
        assert!(softmax(&[f32::NEG_INFINITY; 2], 2)
            .iter()
            .all(|v| v.is_nan()));
    }

    #[test]
    fn rope_rotates_pairs() {
        let x: Vec<f32> = (0..16).map(|i| i as f32 * 0.25 - 1.0).collect(); // [2 tokens, 2 heads, 4]
                                                                            // Position 0 is the identity.
        assert!(close(&rope(&x[..8], 2, 4, &[0], 10000.0), &x[..8], 0.0));
        let out = rope(&x, 2, 4, &[0, 3], 10000.0);
        // Each (i, i + d/2) pair keeps its length.
        for t in 0..2 {
            for h in 0..2 {
                for i in 0..2 {
                    let b = (t * 2 + h) * 4;
                    let before = x[b + i].hypot(x[b + 2 + i]);
                    let after = out[b + i].hypot(out[b + 2 + i]);
                    assert!((before - after).abs() < 1e-5);
                }
            }
        }
        // Pair 0 of token 1 turns by exactly 3 radians (inv_freq = 1).
        let (a, b) = (x[8] as f64, x[10] as f64);
        assert!((out[8] as f64 - (a * 3f64.cos() - b * 3f64.sin())).abs() < 1e-6);
        assert_eq!(offset_positions(3, 5), vec![5, 6, 7]);
    }

    #[test]
    fn embedding_gathers_and_rejects_bad_ids() {
        let table = [0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
        assert_eq!(
            embedding(&table, 2, &[2, 0, 2]).unwrap(),
            vec![20.0, 21.0, 0.0, 1.0, 20.0, 21.0]
        );
        assert!(matches!(embedding(&table, 2, &[3]), Err(Error::Index(_))));
        assert!(matches!(embedding(&table, 2, &[-1]), Err(Error::Index(_))));
    }

    #[test]
    fn matmul_and_all_reduce() {
        // [[1,2],[3,4]] @ [[5],[6]] = [[17],[39]]
        assert_eq!(
            matmul(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0], 2, 2, 1),
            vec![17.0, 39.0]
        );
        assert_eq!(matmul(&[], &[], 2, 0, 3), vec![0.0; 6]);
        assert_eq!(
            all_reduce_sum(&[vec![1.0, 2.0], vec![3.0, -2.0]]),
            vec![4.0, 0.0]
        );
    }
}
