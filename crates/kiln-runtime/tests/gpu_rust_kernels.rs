//! The kernels written in Rust (`gpu.rs()`, kernels/rust) on the GPU, each against a float64
//! reference computed here and against its C++ twin (`gpu.vecadd`, …) on the same inputs:
//! every float dtype, ≥ 20 shapes per op (odd sizes, sizes around the block and the 16-byte
//! pack, rows longer than the register-cached path, misaligned views that force the scalar
//! path). Tolerances are the C++ tests' (`reference::Tolerance::for_dtype`), applied to both
//! comparisons.
//!
//! Without a driver or GPU each test prints "SKIP: …" and passes (CI has no GPU).
//! KILN_GPU_TEST_SIZES=small keeps shapes ≤ 65536 elements (for compute-sanitizer runs).

#[macro_use]
mod support;

use kiln_runtime::reference::{self as r, Tolerance};
use kiln_runtime::{DType, Error, Tensor};
use support::{gpu, keep, upload, Report, Rng};

/// float64 references, rounded once to the output dtype.
fn ref_vecadd(a: &[f32], b: &[f32], dtype: DType) -> Vec<f32> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| r::round_to((x as f64 + y as f64) as f32, dtype))
        .collect()
}
fn ref_silu_mul(g: &[f32], u: &[f32], dtype: DType) -> Vec<f32> {
    g.iter()
        .zip(u)
        .map(|(&g, &u)| {
            let (g, u) = (g as f64, u as f64);
            r::round_to((g / (1.0 + (-g).exp()) * u) as f32, dtype)
        })
        .collect()
}
fn ref_rmsnorm(x: &[f32], w: &[f32], cols: usize, eps: f32, dtype: DType) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / cols as f64;
            let scale = 1.0 / (ms + eps as f64).sqrt();
            row.iter()
                .zip(w)
                .map(move |(&v, &g)| r::round_to((v as f64 * scale * g as f64) as f32, dtype))
        })
        .collect()
}

fn ref_softmax(x: &[f32], cols: usize, dtype: DType) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
            row.iter()
                .map(move |&v| r::round_to(((v as f64 - m).exp() / s) as f32, dtype))
        })
        .collect()
}

const ELEMENTWISE: &[usize] = &[
    1,
    2,
    3,
    7,
    8,
    9,
    31,
    32,
    33,
    255,
    256,
    257,
    1000,
    1023,
    1025,
    4095,
    4097,
    15015,
    65535,
    65537,
    100_003,
    1 << 20,
    (1 << 20) + 7,
];

#[test]
fn rust_elementwise_match_f64_and_cpp() {
    let Some(gpu) = gpu() else { return };
    let mut rep = Report::default();
    let mut rng = Rng(7);
    for dtype in DType::FLOATS {
        let tol = Tolerance::for_dtype(dtype);
        for (i, &n) in ELEMENTWISE.iter().filter(|&&n| keep(n)).enumerate() {
            let misalign = i % 4 == 3;
            let shape = if n % 3 == 0 { vec![3, n / 3] } else { vec![n] };
            let tag = |op: &str| {
                let m = if misalign { " misaligned" } else { "" };
                format!("rs.{op} {dtype} {shape:?}{m}")
            };
            let (a, b) = (
                rng.values(n, -1.0, 1.0, dtype),
                rng.values(n, -1.0, 1.0, dtype),
            );
            let (da, db) = (
                upload(&gpu, &a, dtype, &shape, misalign),
                upload(&gpu, &b, dtype, &shape, misalign),
            );
            let rust = gpu.rs().vecadd(&da.view, &db.view).unwrap();
            let cxx = gpu.vecadd(&da.view, &db.view).unwrap();
            assert_eq!(rust.shape(), &shape[..]);
            rep.check_twin(tag("vecadd"), &rust, &cxx, &ref_vecadd(&a, &b, dtype), tol);

            let g = rng.values(n, -8.0, 8.0, dtype);
            let dg = upload(&gpu, &g, dtype, &shape, misalign);
            let rust = gpu.rs().silu_mul(&dg.view, &db.view).unwrap();
            let cxx = gpu.silu_mul(&dg.view, &db.view).unwrap();
            rep.check_twin(
                tag("silu_mul"),
                &rust,
                &cxx,
                &ref_silu_mul(&g, &b, dtype),
                tol,
            );
        }
    }
    rep.finish("rs.vecadd + rs.silu_mul");
}

/// (rows, cols): odd widths, widths around the pack and the block, rows wider than the
/// register-cached path (f32: 4·1024·4 = 16384 cols; f16/bf16: 32768), many short rows.
const RMSNORM: &[(usize, usize)] = &[
    (1, 1),
    (1, 7),
    (3, 8),
    (5, 9),
    (2, 31),
    (4, 32),
    (3, 33),
    (7, 64),
    (2, 127),
    (16, 128),
    (9, 255),
    (8, 256),
    (6, 1000),
    (4, 1024),
    (3, 1031),
    (2, 4096),
    (64, 4096),
    (1, 8193),
    (2, 16384),
    (2, 20000),
    (1, 40000),
    (1000, 17),
    (4097, 64),
];

#[test]
fn rust_rmsnorm_matches_f64_and_cpp() {
    let Some(gpu) = gpu() else { return };
    let mut rep = Report::default();
    let mut rng = Rng(11);
    for dtype in DType::FLOATS {
        let tol = Tolerance::for_dtype(dtype);
        for (i, &(rows, cols)) in RMSNORM.iter().filter(|&&(r, c)| keep(r * c)).enumerate() {
            let misalign = i % 5 == 4;
            let x = rng.values(rows * cols, -2.0, 2.0, dtype);
            let w = rng.values(cols, 0.5, 1.5, dtype);
            let dx = upload(&gpu, &x, dtype, &[rows, cols], misalign);
            let dw = upload(&gpu, &w, dtype, &[cols], misalign);
            let eps = 1e-5;
            let rust = gpu.rs().rmsnorm(&dx.view, &dw.view, eps).unwrap();
            let cxx = gpu.rmsnorm(&dx.view, &dw.view, eps).unwrap();
            let m = if misalign { " misaligned" } else { "" };
            rep.check_twin(
                format!("rs.rmsnorm {dtype} [{rows}, {cols}]{m}"),
                &rust,
                &cxx,
                &ref_rmsnorm(&x, &w, cols, eps, dtype),
                tol,
            );
        }
    }
    rep.finish("rs.rmsnorm");
}

/// (rows, cols): one warp per row up to 1024 columns, larger groups (shared-memory step) up
/// to 32768, the two-pass path beyond and for odd (unaligned) widths; many short rows per
/// block; large logits on every third shape.
const SOFTMAX: &[(usize, usize)] = &[
    (1, 1),
    (1, 7),
    (3, 8),
    (5, 9),
    (2, 32),
    (3, 33),
    (7, 64),
    (16, 128),
    (9, 255),
    (8, 256),
    (6, 1000),
    (4, 1024),
    (3, 1031),
    (2, 2048),
    (64, 4096),
    (1, 8193),
    (2, 16384),
    (2, 32768),
    (1, 40000),
    (1000, 17),
    (4097, 64),
    (3, 100_003),
];

#[test]
fn rust_softmax_matches_f64_and_cpp() {
    let Some(gpu) = gpu() else { return };
    let mut rep = Report::default();
    let mut rng = Rng(13);
    for dtype in DType::FLOATS {
        let tol = Tolerance::for_dtype(dtype);
        for (i, &(rows, cols)) in SOFTMAX.iter().filter(|&&(r, c)| keep(r * c)).enumerate() {
            let misalign = i % 5 == 4;
            let scale = if i % 3 == 2 { 40.0 } else { 2.0 };
            let x = rng.values(rows * cols, -scale, scale, dtype);
            let dx = upload(&gpu, &x, dtype, &[rows, cols], misalign);
            let rust = gpu.rs().softmax(&dx.view).unwrap();
            let cxx = gpu.softmax(&dx.view).unwrap();
            let m = if misalign { " misaligned" } else { "" };
            rep.check_twin(
                format!("rs.softmax {dtype} [{rows}, {cols}]{m}"),
                &rust,
                &cxx,
                &ref_softmax(&x, cols, dtype),
                tol,
            );
        }
    }
    rep.finish("rs.softmax");
}

/// The same host-side contract as the C++ ops: bad shapes and dtypes are errors, not launches.
#[test]
fn rust_ops_reject_bad_inputs() {
    let Some(gpu) = gpu() else { return };
    let a = Tensor::from_host(&gpu, &[0u8; 16], DType::F32, vec![4]).unwrap();
    let b = Tensor::from_host(&gpu, &[0u8; 12], DType::F32, vec![3]).unwrap();
    assert!(matches!(
        gpu.rs().vecadd(&a.view(), &b.view()),
        Err(Error::Shape(_))
    ));
    let ids = Tensor::from_host(&gpu, &[0u8; 16], DType::I32, vec![4]).unwrap();
    assert!(matches!(
        gpu.rs().silu_mul(&ids.view(), &ids.view()),
        Err(Error::DType(_))
    ));
    let w = Tensor::from_host(&gpu, &[0u8; 8], DType::F32, vec![2]).unwrap();
    assert!(gpu.rs().rmsnorm(&a.view(), &w.view(), 1e-5).is_err());
    assert!(matches!(
        gpu.rs().softmax(&ids.view()),
        Err(Error::DType(_))
    ));
}
