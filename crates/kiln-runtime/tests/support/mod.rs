//! The GPU test harness every `gpu_*` test binary shares (`mod support;`): the GPU or a
//! visible skip, the `KILN_GPU_TEST_SIZES=small` filter, deterministic inputs (SplitMix64),
//! uploads (optionally misaligned), downloads, and the failure report.

// Each test binary uses its own part of it.
#![allow(dead_code, unused_macros)]

use kiln_runtime::reference::{self as r, compare, Tolerance};
use kiln_runtime::{DType, Error, Gpu, Tensor, View};

/// Straight to the stderr file descriptor: libtest captures print!/eprint! of passing tests,
/// and a skip must be visible in a normal run.
macro_rules! skip {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub fn gpu() -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(g) => Some(g),
        Err(e @ (Error::NoDriver(_) | Error::NoDevice { .. })) => {
            skip!("SKIP: no GPU to test on: {e}");
            None
        }
        Err(e) => panic!("opening GPU 0 failed: {e}"),
    }
}

pub fn small_only() -> bool {
    std::env::var("KILN_GPU_TEST_SIZES").is_ok_and(|v| v == "small")
}

pub fn keep(numel: usize) -> bool {
    !small_only() || numel <= 65536
}

/// SplitMix64: deterministic inputs without a dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn values(&mut self, n: usize, lo: f32, hi: f32, dtype: DType) -> Vec<f32> {
        (0..n)
            .map(|_| r::round_to(self.uniform(lo, hi), dtype))
            .collect()
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A device copy of `values`; with `misalign`, the view starts one element into a larger
/// buffer, so no pointer is 16-byte aligned and kernels take their scalar path.
pub struct Input {
    pub _buf: Tensor,
    pub view: View,
}
pub fn upload(gpu: &Gpu, values: &[f32], dtype: DType, shape: &[usize], misalign: bool) -> Input {
    let mut bytes = r::from_f32(values, dtype).unwrap();
    let pad = if misalign { dtype.size() } else { 0 };
    if misalign {
        let mut padded = vec![0u8; pad];
        padded.append(&mut bytes);
        bytes = padded;
    }
    let n = bytes.len() / dtype.size();
    let buf = Tensor::from_host(gpu, &bytes, dtype, vec![n]).unwrap();
    let view = View::new(buf.ptr() + pad as u64, dtype, shape.to_vec());
    Input { _buf: buf, view }
}
pub fn upload_ids(gpu: &Gpu, ids: &[i64], dtype: DType, shape: &[usize]) -> Input {
    let bytes = r::ids_to_bytes(ids, dtype).unwrap();
    let buf = Tensor::from_host(gpu, &bytes, dtype, shape.to_vec()).unwrap();
    Input {
        view: buf.view(),
        _buf: buf,
    }
}
pub fn download(t: &Tensor) -> Vec<f32> {
    r::to_f32(&t.to_host().unwrap(), t.dtype()).unwrap()
}

/// Collects failures so one run reports every broken (op, dtype, shape).
#[derive(Default)]
pub struct Report {
    pub checked: usize,
    pub failures: Vec<String>,
}
impl Report {
    pub fn check(
        &mut self,
        what: String,
        out: &Tensor,
        inputs: &[&View],
        want: &[f32],
        tol: Tolerance,
    ) {
        self.checked += 1;
        if inputs.iter().any(|v| v.ptr == out.ptr()) {
            self.failures
                .push(format!("{what}: output aliases an input"));
        }
        if let Err(m) = compare(&download(out), want, tol) {
            self.failures
                .push(format!("{what}: {m} (tolerance {tol:?})"));
        }
    }
    /// A Rust kernel's output against the float64 reference and against its C++ twin's.
    pub fn check_twin(
        &mut self,
        what: String,
        rust: &Tensor,
        cxx: &Tensor,
        want: &[f32],
        tol: Tolerance,
    ) {
        self.checked += 1;
        let got = download(rust);
        if let Err(m) = compare(&got, want, tol) {
            self.failures
                .push(format!("{what}: Rust vs float64 reference: {m} ({tol:?})"));
        }
        if let Err(m) = compare(&got, &download(cxx), tol) {
            self.failures
                .push(format!("{what}: Rust vs its C++ twin: {m} ({tol:?})"));
        }
    }
    pub fn finish(self, op: &str) {
        println!(
            "{op}: {} cases checked, {} failed",
            self.checked,
            self.failures.len()
        );
        assert!(
            self.failures.is_empty(),
            "{op} failures:\n{}",
            self.failures.join("\n")
        );
    }
}
