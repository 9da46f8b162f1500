//! kiln-gpu-bench: each memory-bound kernel's achieved bandwidth on this GPU, as a fraction of
//! a device-to-device copy (cuMemcpyDtoDAsync) of the same bytes measured in the same run.
//!
//! Bandwidth counts bytes read + written once (what the op must move); time is CUDA-event time
//! on the default stream, median over batches of back-to-back calls, after warmup. Every call
//! allocates its output, as users' calls do (kiln's per-stream block cache, see
//! kiln-runtime's cache.rs), and the copy baseline does the same. JSON on stdout, or to --out.
//! `--percall`: the host cost of each step of a decode-sized call instead (percall.rs).

use std::process::ExitCode;

use clap::Parser;
use kiln_runtime::{DType, Error, Gpu, Positions, Tensor, View};
use serde::Serialize;

#[derive(Parser)]
#[command(about = "Bandwidth of kiln's memory-bound kernels vs a device-to-device copy (JSON)")]
struct Args {
    /// Write the JSON here instead of stdout.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Small sizes and few repetitions (a smoke run).
    #[arg(long)]
    quick: bool,
    /// Timed batches per measurement (the median is reported).
    #[arg(long, default_value_t = 9)]
    batches: usize,
    /// Calls per batch.
    #[arg(long, default_value_t = 10)]
    per_batch: usize,
    /// Measure only these ops (comma-separated, e.g. `vecadd,silu_mul,rmsnorm`; a Rust
    /// kernel `rs.X` runs with its C++ twin X). Default: every op, and the bf16 matmul.
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,
    /// Only the host cost of each step of a decode-sized call (JSON), no bandwidth table.
    #[arg(long)]
    percall: bool,
}

mod percall;

#[derive(Serialize)]
struct Row {
    op: String,
    dtype: &'static str,
    shape: Vec<usize>,
    /// Bytes the op reads + writes.
    bytes: u64,
    median_ms: f64,
    min_ms: f64,
    gb_per_s: f64,
    /// Achieved bandwidth / copy bandwidth at the same size and dtype, this run.
    fraction_of_copy: f64,
    copy_gb_per_s: f64,
    note: Option<&'static str>,
}

#[derive(Serialize)]
struct Report {
    device: String,
    ordinal: usize,
    sm_count: u32,
    compute_capability: String,
    driver_cuda_version: i32,
    method: &'static str,
    rows: Vec<Row>,
    /// bf16 matmul (cuBLAS) TFLOP/s at 8192³ — a compute-bound reference, not a target.
    matmul_bf16_tflops: Option<f64>,
    /// Measurements that could not run, with the reason.
    skipped: Vec<String>,
}

/// Elements of the main tensor for each size step; row ops use rows of 4096.
fn sizes(quick: bool) -> Vec<usize> {
    // 2^26 and 2^27 elements are well past the 50 MB L2 of an H100/H200 for every dtype.
    if quick {
        vec![1 << 20, 1 << 22]
    } else {
        vec![1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 27]
    }
}

const COLS: usize = 4096;
const VOCAB: usize = 32000;

fn median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0])
}

/// Deterministic bytes for a dtype (values in [-1, 1)).
fn host_values(n: usize, dtype: DType, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let vals: Vec<f32> = (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    kiln_runtime::reference::from_f32(&vals, dtype).expect("float dtype")
}

fn tensor(
    gpu: &Gpu,
    n: usize,
    dtype: DType,
    shape: Vec<usize>,
    seed: u64,
) -> Result<Tensor, Error> {
    Tensor::from_host(gpu, &host_values(n, dtype, seed), dtype, shape)
}

struct Bench<'a> {
    gpu: &'a Gpu,
    args: &'a Args,
}

impl Bench<'_> {
    fn time(&self, f: impl FnMut() -> Result<(), Error>) -> Result<(f64, f64), Error> {
        let (batches, per_batch) = if self.args.quick {
            (3, 3)
        } else {
            (self.args.batches, self.args.per_batch)
        };
        Ok(median(self.gpu.time_calls(
            3,
            batches.max(1),
            per_batch,
            f,
        )?))
    }
}

fn run(args: &Args) -> Result<Report, Error> {
    let gpu = Gpu::new(args.device)?;
    let b = Bench { gpu: &gpu, args };
    let (major, minor) = gpu.compute_capability()?;
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let want = |op: &str| {
        args.ops.is_empty()
            || args
                .ops
                .iter()
                .any(|o| o == op || o.strip_prefix("rs.") == Some(op))
    };
    for dtype in DType::FLOATS {
        // One embedding table per dtype (32000 × 4096, Llama-sized), shared by all sizes.
        let table = tensor(&gpu, VOCAB * COLS, dtype, vec![VOCAB, COLS], 4)?;
        for &n in &sizes(args.quick) {
            let es = dtype.size() as u64;
            let nb = n as u64 * es;
            let x = tensor(&gpu, n, dtype, vec![n], 1)?;
            let y = tensor(&gpu, n, dtype, vec![n], 2)?;
            let (xv, yv) = (x.view(), y.view());

            // The roof: a device-to-device copy of the main tensor (read nb + write nb).
            let (copy_ms, copy_min) = b.time(|| gpu.copy(&xv).map(drop))?;
            let copy_bw = 2.0 * nb as f64 / (copy_ms * 1e-3) / 1e9;
            let mut push = |op: &str,
                            shape: Vec<usize>,
                            bytes: u64,
                            (ms, min): (f64, f64),
                            note: Option<&'static str>| {
                let bw = bytes as f64 / (ms * 1e-3) / 1e9;
                rows.push(Row {
                    op: op.into(),
                    dtype: dtype.name(),
                    shape,
                    bytes,
                    median_ms: ms,
                    min_ms: min,
                    gb_per_s: bw,
                    fraction_of_copy: bw / copy_bw,
                    copy_gb_per_s: copy_bw,
                    note,
                });
            };
            push(
                "copy",
                vec![n],
                2 * nb,
                (copy_ms, copy_min),
                Some("cuMemcpyDtoDAsync into a fresh allocation: the roof"),
            );
            if want("vecadd") {
                push(
                    "vecadd",
                    vec![n],
                    3 * nb,
                    b.time(|| gpu.vecadd(&xv, &yv).map(drop))?,
                    None,
                );
                push(
                    "rs.vecadd",
                    vec![n],
                    3 * nb,
                    b.time(|| gpu.rs().vecadd(&xv, &yv).map(drop))?,
                    Some("the Rust kernel (kernels/rust), twin of vecadd"),
                );
            }
            if want("axpby") {
                push(
                    "axpby",
                    vec![n],
                    3 * nb,
                    b.time(|| gpu.axpby(&xv, &yv, 0.5, 2.0).map(drop))?,
                    None,
                );
            }
            if want("silu_mul") {
                push(
                    "silu_mul",
                    vec![n],
                    3 * nb,
                    b.time(|| gpu.silu_mul(&xv, &yv).map(drop))?,
                    None,
                );
                push(
                    "rs.silu_mul",
                    vec![n],
                    3 * nb,
                    b.time(|| gpu.rs().silu_mul(&xv, &yv).map(drop))?,
                    Some("the Rust kernel (kernels/rust), twin of silu_mul"),
                );
            }

            let rows_n = n / COLS;
            let xr = View::new(x.ptr(), dtype, vec![rows_n, COLS]);
            let w = tensor(&gpu, COLS, dtype, vec![COLS], 3)?;
            let wv = w.view();
            if want("rmsnorm") {
                push(
                    "rmsnorm",
                    vec![rows_n, COLS],
                    2 * nb + COLS as u64 * es,
                    b.time(|| gpu.rmsnorm(&xr, &wv, 1e-6).map(drop))?,
                    None,
                );
                push(
                    "rs.rmsnorm",
                    vec![rows_n, COLS],
                    2 * nb + COLS as u64 * es,
                    b.time(|| gpu.rs().rmsnorm(&xr, &wv, 1e-6).map(drop))?,
                    Some("the Rust kernel (kernels/rust), twin of rmsnorm"),
                );
            }
            if !want("softmax") && !want("cudnn_softmax") && !want("rope") && !want("embedding") {
                continue;
            }
            push(
                "softmax",
                vec![rows_n, COLS],
                2 * nb,
                b.time(|| gpu.softmax(&xr).map(drop))?,
                None,
            );
            push(
                "rs.softmax",
                vec![rows_n, COLS],
                2 * nb,
                b.time(|| gpu.rs().softmax(&xr).map(drop))?,
                Some("the Rust kernel (kernels/rust), twin of softmax"),
            );
            // cuDNN is a comparison, not a target: an unsupported dtype is noted, not fatal.
            match b.time(|| gpu.cudnn_softmax(&xr).map(drop)) {
                Ok(t) => push(
                    "cudnn_softmax",
                    vec![rows_n, COLS],
                    2 * nb,
                    t,
                    Some("cuDNN cudnnSoftmaxForward, for comparison"),
                ),
                Err(e) => skipped.push(format!("cudnn_softmax {dtype} [{rows_n}, {COLS}]: {e}")),
            }

            let xq = View::new(x.ptr(), dtype, vec![rows_n, 32, 128]);
            push(
                "rope",
                vec![rows_n, 32, 128],
                2 * nb,
                b.time(|| gpu.rope(&xq, Positions::Offset(0), 10000.0).map(drop))?,
                None,
            );

            let ids: Vec<u8> = (0..rows_n as u64)
                .flat_map(|i| ((i * 7919) % VOCAB as u64).to_ne_bytes())
                .collect();
            let ids = Tensor::from_host(&gpu, &ids, DType::I64, vec![rows_n])?;
            let (tv, iv) = (table.view(), ids.view());
            let bytes = 2 * nb + rows_n as u64 * 8;
            push(
                "embedding",
                vec![rows_n, COLS],
                bytes,
                b.time(|| gpu.embedding(&tv, &iv).map(drop))?,
                None,
            );
            push(
                "embedding_checked",
                vec![rows_n, COLS],
                bytes,
                b.time(|| gpu.embedding_checked(&tv, &iv).map(drop))?,
                Some("with the id-range check: waits for an 8-byte read back per call"),
            );
        }
    }
    let matmul_bf16_tflops = if args.quick || !args.ops.is_empty() {
        None
    } else {
        let s = 8192;
        let a = tensor(&gpu, s * s, DType::BF16, vec![s, s], 5)?;
        let c = tensor(&gpu, s * s, DType::BF16, vec![s, s], 6)?;
        match b.time(|| gpu.matmul(&a.view(), &c.view()).map(drop)) {
            Ok((ms, _)) => Some(2.0 * (s as f64).powi(3) / (ms * 1e-3) / 1e12),
            Err(e) => {
                skipped.push(format!("matmul bf16 8192³: {e}"));
                None
            }
        }
    };
    Ok(Report {
        device: gpu.name().to_string(),
        ordinal: gpu.ordinal(),
        sm_count: gpu.sm_count(),
        compute_capability: format!("{major}.{minor}"),
        driver_cuda_version: Gpu::driver_version()?,
        method: "CUDA events on the legacy default stream; median over batches of back-to-back calls after 3 warmup calls; bytes = read + written once",
        rows,
        matmul_bf16_tflops,
        skipped,
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.percall {
        let steps = Gpu::new(args.device).and_then(|g| percall::run(&g));
        return match steps {
            Ok(steps) => {
                for s in &steps {
                    eprintln!("{:>9.0} ns  {}", s.ns_per_call, s.what);
                }
                let json = serde_json::to_string_pretty(&steps).expect("serialisable");
                match &args.out {
                    Some(p) => {
                        std::fs::write(p, json).map_or(ExitCode::from(2), |_| ExitCode::SUCCESS)
                    }
                    None => {
                        println!("{json}");
                        ExitCode::SUCCESS
                    }
                }
            }
            Err(e) => {
                eprintln!("kiln-gpu-bench: {e}");
                ExitCode::from(2)
            }
        };
    }
    let report = match run(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kiln-gpu-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let json = serde_json::to_string_pretty(&report).expect("serialisable");
    for r in &report.rows {
        eprintln!(
            "{:<18} {:<5} {:>12} elems  {:>8.4} ms  {:>7.0} GB/s  {:>5.2} of copy",
            r.op,
            r.dtype,
            r.shape.iter().product::<usize>(),
            r.median_ms,
            r.gb_per_s,
            r.fraction_of_copy
        );
    }
    match &args.out {
        Some(p) => {
            if let Err(e) = std::fs::write(p, json) {
                eprintln!("kiln-gpu-bench: writing {}: {e}", p.display());
                return ExitCode::from(2);
            }
        }
        None => println!("{json}"),
    }
    ExitCode::SUCCESS
}
