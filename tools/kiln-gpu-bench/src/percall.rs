//! `kiln-gpu-bench --percall`: where the host time of one decode-sized kiln call goes, from
//! Rust (no Python): each step of the call path timed on its own over many calls, and whole
//! calls with and without the optional steps. Host nanoseconds per call (median of batches);
//! the GPU is synchronised between batches only, so launch queues never fill.

use std::time::Instant;

use kiln_runtime::{ContextGuard, DType, Error, Gpu, Stream, Tensor};
use serde::Serialize;

#[derive(Serialize)]
pub struct Step {
    pub what: &'static str,
    pub ns_per_call: f64,
}

const CALLS: usize = 500;
const BATCHES: usize = 15;

fn per_call(gpu: &Gpu, mut f: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    for _ in 0..CALLS {
        f()?;
    }
    gpu.synchronize()?;
    let mut v = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let t = Instant::now();
        for _ in 0..CALLS {
            f()?;
        }
        v.push(t.elapsed().as_nanos() as f64 / CALLS as f64);
        gpu.synchronize()?;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Ok(v[v.len() / 2])
}

/// Host cost of each step of a 4096-element bf16 vecadd (a decode-step residual add).
pub fn run(gpu: &Gpu) -> Result<Vec<Step>, Error> {
    let n = 4096;
    let bytes = vec![0u8; n * 2];
    let a = Tensor::from_host(gpu, &bytes, DType::BF16, vec![n])?;
    let b = Tensor::from_host(gpu, &bytes, DType::BF16, vec![n])?;
    let out = Tensor::from_host(gpu, &bytes, DType::BF16, vec![n])?;
    let (av, bv, ov) = (a.view(), b.view(), out.view());
    let checked = gpu.clone();
    let trusting = gpu.trusting_pointers();
    let side = gpu.context().new_stream().map_err(|e| Error::Driver {
        call: "cuStreamCreate".into(),
        message: format!("{e:?}"),
    })?;
    let on_side = trusting.on(Stream::of(&side));
    let mut steps = Vec::new();
    let mut step = |what, ns| {
        steps.push(Step {
            what,
            ns_per_call: ns,
        })
    };
    step(
        "ContextGuard save + restore (cuCtxGetCurrent x2)",
        per_call(gpu, || {
            let _g = ContextGuard::save();
            Ok(())
        })?,
    );
    step(
        "Stream::capture (cuStreamIsCapturing)",
        per_call(gpu, || {
            let _ = Stream::LEGACY.capture();
            Ok(())
        })?,
    );
    step(
        "vecadd_into, pointers trusted (validate + cuLaunchKernel)",
        per_call(gpu, || trusting.vecadd_into(&av, &bv, &ov))?,
    );
    step(
        "vecadd_into, pointers checked (+3 cuPointerGetAttributes)",
        per_call(gpu, || checked.vecadd_into(&av, &bv, &ov))?,
    );
    step(
        "vecadd, pointers trusted (+ cuMemAllocAsync, cuMemFreeAsync, capture query)",
        per_call(gpu, || trusting.vecadd(&av, &bv).map(drop))?,
    );
    step(
        "vecadd, pointers checked (the Rust default)",
        per_call(gpu, || checked.vecadd(&av, &bv).map(drop))?,
    );
    step(
        "order_after another stream (cuEventRecord + cuStreamWaitEvent)",
        per_call(gpu, || on_side.order_after(Stream::LEGACY))?,
    );
    step(
        "vecadd_into on a side stream, trusted",
        per_call(gpu, || on_side.vecadd_into(&av, &bv, &ov))?,
    );
    Ok(steps)
}
