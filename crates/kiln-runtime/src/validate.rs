//! Shape and dtype rules of every op, checked on the host before anything is launched.
//! Pure functions (no GPU), so CI tests them.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{numel, View};

/// Largest head_dim rope accepts: its cos/sin table (head_dim f32) lives in 48 KiB of shared memory.
pub const ROPE_MAX_HEAD_DIM: usize = 12 * 1024;

fn float(op: &str, what: &str, v: &View) -> Result<()> {
    if v.dtype.is_float() {
        Ok(())
    } else {
        Err(Error::DType(format!(
            "{op}: {what} must be f32, f16 or bf16, not {}",
            v.dtype
        )))
    }
}

fn same_dtype(op: &str, a: (&str, &View), b: (&str, &View)) -> Result<()> {
    if a.1.dtype == b.1.dtype {
        Ok(())
    } else {
        Err(Error::DType(format!(
            "{op}: {} is {} but {} is {}",
            a.0, a.1.dtype, b.0, b.1.dtype
        )))
    }
}

/// Two same-shape, same-dtype float operands (vecadd, axpby, silu_mul): the output shape.
pub fn elementwise(op: &str, a: (&str, &View), b: (&str, &View)) -> Result<Vec<usize>> {
    float(op, a.0, a.1)?;
    same_dtype(op, a, b)?;
    if a.1.shape != b.1.shape {
        return Err(Error::Shape(format!(
            "{op}: {} has shape {:?} but {} has shape {:?}",
            a.0, a.1.shape, b.0, b.1.shape
        )));
    }
    Ok(a.1.shape.clone())
}

/// Splits a shape into (rows, last dim) for row-wise ops.
fn rows_cols(op: &str, x: &View) -> Result<(usize, usize)> {
    let Some((&cols, lead)) = x.shape.split_last() else {
        return Err(Error::Shape(format!(
            "{op}: x must have at least one dimension (got a scalar)"
        )));
    };
    Ok((numel(lead), cols))
}

/// rmsnorm: x `[..., cols]`, weight `[cols]`. Returns (rows, cols).
pub fn rmsnorm(x: &View, weight: &View, eps: f32) -> Result<(usize, usize)> {
    float("rmsnorm", "x", x)?;
    same_dtype("rmsnorm", ("x", x), ("weight", weight))?;
    let (rows, cols) = rows_cols("rmsnorm", x)?;
    if weight.shape != [cols] {
        return Err(Error::Shape(format!(
            "rmsnorm: weight must have shape [{cols}] (x's last dim), got {:?}",
            weight.shape
        )));
    }
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::Shape(format!(
            "rmsnorm: eps must be finite and ≥ 0, got {eps}"
        )));
    }
    Ok((rows, cols))
}

/// softmax over the last dim. Returns (rows, cols).
pub fn softmax(x: &View) -> Result<(usize, usize)> {
    float("softmax", "x", x)?;
    rows_cols("softmax", x)
}

/// rope: x `[tokens, heads, head_dim]` (head_dim even), positions `[tokens]` i32/i64 if given.
/// Returns (tokens, heads, head_dim).
pub fn rope(x: &View, positions: Option<&View>, theta: f32) -> Result<(usize, usize, usize)> {
    float("rope", "x", x)?;
    let [tokens, heads, head_dim] = x.shape[..] else {
        return Err(Error::Shape(format!(
            "rope: x must be [tokens, heads, head_dim], got {:?}",
            x.shape
        )));
    };
    if head_dim % 2 != 0 || head_dim == 0 {
        return Err(Error::Shape(format!(
            "rope: head_dim must be even and > 0, got {head_dim}"
        )));
    }
    if head_dim > ROPE_MAX_HEAD_DIM {
        return Err(Error::Shape(format!(
            "rope: head_dim {head_dim} exceeds the supported {ROPE_MAX_HEAD_DIM}"
        )));
    }
    if heads.checked_mul(head_dim).is_none_or(|n| n >= 1 << 31) {
        return Err(Error::Shape(format!(
            "rope: heads × head_dim = {heads} × {head_dim} must be below 2^31"
        )));
    }
    if !(theta.is_finite() && theta > 0.0) {
        return Err(Error::Shape(format!(
            "rope: theta must be finite and > 0, got {theta}"
        )));
    }
    if let Some(p) = positions {
        if !matches!(p.dtype, DType::I32 | DType::I64) {
            return Err(Error::DType(format!(
                "rope: positions must be i32 or i64, not {}",
                p.dtype
            )));
        }
        if p.shape != [tokens] {
            return Err(Error::Shape(format!(
                "rope: positions must have shape [{tokens}] (one per token), got {:?}",
                p.shape
            )));
        }
    }
    Ok((tokens, heads, head_dim))
}

/// embedding: table [vocab, dim] float, ids any shape of i32/i64. Returns (vocab, dim, out shape).
pub fn embedding(table: &View, ids: &View) -> Result<(usize, usize, Vec<usize>)> {
    float("embedding", "table", table)?;
    if !matches!(ids.dtype, DType::I32 | DType::I64) {
        return Err(Error::DType(format!(
            "embedding: ids must be i32 or i64, not {}",
            ids.dtype
        )));
    }
    let [vocab, dim] = table.shape[..] else {
        return Err(Error::Shape(format!(
            "embedding: table must be [vocab, dim], got {:?}",
            table.shape
        )));
    };
    let mut out = ids.shape.clone();
    out.push(dim);
    Ok((vocab, dim, out))
}

/// matmul: a [m, k] @ b [k, n], same float dtype, each dim < 2^31. Returns (m, k, n).
pub fn matmul(a: &View, b: &View) -> Result<(usize, usize, usize)> {
    float("matmul", "a", a)?;
    same_dtype("matmul", ("a", a), ("b", b))?;
    let (&[m, k], &[k2, n]) = (&a.shape[..], &b.shape[..]) else {
        return Err(Error::Shape(format!(
            "matmul: a and b must be 2-D, got {:?} and {:?}",
            a.shape, b.shape
        )));
    };
    if k != k2 {
        return Err(Error::Shape(format!(
            "matmul: inner dimensions differ: a is {:?}, b is {:?}",
            a.shape, b.shape
        )));
    }
    if [m, k, n].iter().any(|&d| d > i32::MAX as usize) {
        return Err(Error::Shape(format!(
            "matmul: dimensions must fit cuBLAS's int: {m} × {k} × {n}"
        )));
    }
    Ok((m, k, n))
}

/// all_reduce: one operand per GPU, equal shapes and dtypes (floats).
pub fn all_reduce(inputs: &[&View]) -> Result<()> {
    let Some(first) = inputs.first() else {
        return Err(Error::Shape("all_reduce_sum: no inputs".into()));
    };
    for (i, v) in inputs.iter().enumerate() {
        float("all_reduce_sum", &format!("input {i}"), v)?;
        if v.dtype != first.dtype || v.shape != first.shape {
            return Err(Error::Shape(format!(
                "all_reduce_sum: input {i} is {} {:?}, input 0 is {} {:?}",
                v.dtype, v.shape, first.dtype, first.shape
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(dtype: DType, shape: &[usize]) -> View {
        View::new(0x1000, dtype, shape.to_vec())
    }

    #[test]
    fn elementwise_rules() {
        assert_eq!(
            elementwise(
                "vecadd",
                ("a", &v(DType::F16, &[3, 5])),
                ("b", &v(DType::F16, &[3, 5]))
            )
            .unwrap(),
            vec![3, 5]
        );
        assert!(matches!(
            elementwise(
                "vecadd",
                ("a", &v(DType::F16, &[3])),
                ("b", &v(DType::F32, &[3]))
            ),
            Err(Error::DType(_))
        ));
        assert!(matches!(
            elementwise(
                "vecadd",
                ("a", &v(DType::F32, &[3])),
                ("b", &v(DType::F32, &[4]))
            ),
            Err(Error::Shape(_))
        ));
        assert!(matches!(
            elementwise(
                "vecadd",
                ("a", &v(DType::I32, &[3])),
                ("b", &v(DType::I32, &[3]))
            ),
            Err(Error::DType(_))
        ));
    }

    #[test]
    fn row_op_rules() {
        assert_eq!(
            rmsnorm(&v(DType::BF16, &[2, 3, 7]), &v(DType::BF16, &[7]), 1e-6).unwrap(),
            (6, 7)
        );
        assert!(matches!(
            rmsnorm(&v(DType::BF16, &[2, 7]), &v(DType::BF16, &[6]), 1e-6),
            Err(Error::Shape(_))
        ));
        assert!(matches!(
            rmsnorm(&v(DType::BF16, &[2, 7]), &v(DType::F32, &[7]), 1e-6),
            Err(Error::DType(_))
        ));
        assert!(matches!(
            rmsnorm(&v(DType::F32, &[2, 7]), &v(DType::F32, &[7]), f32::NAN),
            Err(Error::Shape(_))
        ));
        assert!(matches!(softmax(&v(DType::F32, &[])), Err(Error::Shape(_))));
        assert_eq!(softmax(&v(DType::F32, &[5])).unwrap(), (1, 5));
    }

    #[test]
    fn rope_rules() {
        assert_eq!(
            rope(&v(DType::F16, &[9, 4, 64]), None, 10000.0).unwrap(),
            (9, 4, 64)
        );
        assert!(matches!(
            rope(&v(DType::F16, &[9, 4, 63]), None, 10000.0),
            Err(Error::Shape(_))
        ));
        assert!(matches!(
            rope(&v(DType::F16, &[9, 64]), None, 10000.0),
            Err(Error::Shape(_))
        ));
        assert!(matches!(
            rope(&v(DType::F16, &[9, 4, 64]), Some(&v(DType::F32, &[9])), 1e4),
            Err(Error::DType(_))
        ));
        assert!(matches!(
            rope(&v(DType::F16, &[9, 4, 64]), Some(&v(DType::I64, &[8])), 1e4),
            Err(Error::Shape(_))
        ));
        assert!(matches!(
            rope(&v(DType::F16, &[9, 4, 64]), None, 0.0),
            Err(Error::Shape(_))
        ));
    }

    #[test]
    fn embedding_and_matmul_rules() {
        assert_eq!(
            embedding(&v(DType::F32, &[100, 8]), &v(DType::I64, &[2, 3])).unwrap(),
            (100, 8, vec![2, 3, 8])
        );
        assert!(matches!(
            embedding(&v(DType::F32, &[100, 8]), &v(DType::F32, &[3])),
            Err(Error::DType(_))
        ));
        assert!(matches!(
            embedding(&v(DType::F32, &[800]), &v(DType::I32, &[3])),
            Err(Error::Shape(_))
        ));
        assert_eq!(
            matmul(&v(DType::BF16, &[3, 5]), &v(DType::BF16, &[5, 7])).unwrap(),
            (3, 5, 7)
        );
        assert!(matches!(
            matmul(&v(DType::BF16, &[3, 5]), &v(DType::BF16, &[4, 7])),
            Err(Error::Shape(_))
        ));
        assert!(matches!(
            matmul(&v(DType::BF16, &[3, 5]), &v(DType::F16, &[5, 7])),
            Err(Error::DType(_))
        ));
    }

    #[test]
    fn all_reduce_rules() {
        assert!(all_reduce(&[&v(DType::F32, &[4]), &v(DType::F32, &[4])]).is_ok());
        assert!(matches!(
            all_reduce(&[&v(DType::F32, &[4]), &v(DType::F32, &[5])]),
            Err(Error::Shape(_))
        ));
        assert!(matches!(all_reduce(&[]), Err(Error::Shape(_))));
    }
}
