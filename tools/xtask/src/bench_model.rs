//! `cargo xtask bench-kernels --model`: a scale model of a large kernel build.
//!
//! It generates a kernel library (`--model-sources` sources, default 60, each a few templated
//! element-wise and reduction kernels, the 6-SASS-target matrix 8.0 8.6 8.9 9.0 10.0 12.0, one
//! module per target), measures every job of its plan alone (one process at a time), and
//! predicts the wall time on N builders by scheduling those measured jobs (longest first, as
//! kiln-build does) — compiles, then each target's link once all its compiles are done (the link
//! fan-in), then the combine. The prediction is checked against kiln-build's own clean build
//! here with 1 and 2 parallel slots (its jobserver), and given for 1, 4, 16 and 64 builders,
//! clean and after a one-file edit (the cache hits everything but that file's jobs).
//!
//! What the model leaves out, and says so: moving inputs and outputs to remote builders (a Nix
//! remote builder copies each job's closure), and the builders' own start-up.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use kiln_build::plan::{PlannedJob, Stage};

/// One measured job of the plan.
struct Job {
    stage: Stage,
    target: String,
    source: Option<String>,
    seconds: f64,
}

/// Generates the library into `root` (Cargo.toml + kernels/).
fn generate(root: &Path, sources: usize) -> Result<()> {
    let k = root.join("kernels");
    std::fs::create_dir_all(k.join("include"))?;
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"scale-model\"\nversion = \"0.1.0\"\n\n[package.metadata.kiln]\n\
         archs = [\"8.0\", \"8.6\", \"8.9\", \"9.0\", \"10.0\", \"12.0\"]\nruntime = {}\n",
    )?;
    std::fs::write(
        k.join("include/model_ops.cuh"),
        "#pragma once\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n\
         template <typename T> __device__ __forceinline__ float to_f(T v) { return static_cast<float>(v); }\n\
         template <typename T> __device__ __forceinline__ T from_f(float v) { return static_cast<T>(v); }\n",
    )?;
    for i in 0..sources {
        let mut text = String::from("#include \"model_ops.cuh\"\n\n");
        text.push_str(&format!(
            "template <typename T> __global__ void scale_bias_{i}(size_t n, const T* x, T* y, float a, float b) {{\n\
             \x20 for (size_t j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += blockDim.x * gridDim.x)\n\
             \x20   y[j] = from_f<T>(to_f(x[j]) * a + b * {i}.0f);\n}}\n\
             template <typename T> __global__ void row_sum_{i}(size_t rows, size_t cols, const T* x, float* out) {{\n\
             \x20 __shared__ float acc[256];\n\
             \x20 size_t r = blockIdx.x; float s = 0.f;\n\
             \x20 for (size_t c = threadIdx.x; c < cols; c += blockDim.x) s += to_f(x[r * cols + c]);\n\
             \x20 acc[threadIdx.x] = s; __syncthreads();\n\
             \x20 for (int w = blockDim.x / 2; w > 0; w >>= 1) {{ if (threadIdx.x < w) acc[threadIdx.x] += acc[threadIdx.x + w]; __syncthreads(); }}\n\
             \x20 if (threadIdx.x == 0 && r < rows) out[r] = acc[0];\n}}\n"
        ));
        for (t, name) in [
            ("float", "f32"),
            ("__half", "f16"),
            ("__nv_bfloat16", "bf16"),
        ] {
            text.push_str(&format!(
                "template __global__ void scale_bias_{i}<{t}>(size_t, const {t}*, {t}*, float, float);\n\
                 template __global__ void row_sum_{i}<{t}>(size_t, size_t, const {t}*, float*);\n\
                 // {name}\n"
            ));
        }
        std::fs::write(k.join(format!("k{i:02}.cu")), text)?;
    }
    Ok(())
}

/// Runs every job of `plan` alone, in stage order, and times it.
fn measure(plan: &[PlannedJob]) -> Result<Vec<Job>> {
    let mut jobs = Vec::new();
    for stage in Stage::ALL {
        for j in plan.iter().filter(|j| j.stage == stage) {
            if let Some(dir) = j.output.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let t = Instant::now();
            let out = Command::new(&j.command[0])
                .args(&j.command[1..])
                .envs(&j.env)
                .output()
                .with_context(|| format!("running {}", j.id))?;
            if !out.status.success() {
                bail!("{}: {}", j.id, String::from_utf8_lossy(&out.stderr));
            }
            let source =
                j.id.strip_prefix("compile:")
                    .and_then(|r| r.rsplit_once(':'))
                    .map(|(s, _)| s.to_string());
            jobs.push(Job {
                stage,
                target: j.target.clone(),
                source,
                seconds: t.elapsed().as_secs_f64(),
            });
        }
    }
    Ok(jobs)
}

/// Predicted wall time on `n` builders: compiles longest first onto the earliest free builder;
/// a target's link starts when its compiles are done and a builder is free; the combine last.
fn predict(jobs: &[&Job], n: usize) -> f64 {
    let mut free = vec![0.0f64; n.max(1)];
    let mut done_by_target: BTreeMap<&str, f64> = BTreeMap::new();
    let mut compiles: Vec<&&Job> = jobs.iter().filter(|j| j.stage == Stage::Compile).collect();
    compiles.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    for j in compiles {
        let (i, start) = earliest(&free);
        free[i] = start + j.seconds;
        let e = done_by_target.entry(&j.target).or_default();
        *e = e.max(free[i]);
    }
    let mut end = free.iter().copied().fold(0.0, f64::max);
    let mut links: Vec<&&Job> = jobs.iter().filter(|j| j.stage == Stage::Link).collect();
    links.sort_by(|a, b| {
        done_by_target
            .get(a.target.as_str())
            .unwrap_or(&0.0)
            .total_cmp(done_by_target.get(b.target.as_str()).unwrap_or(&0.0))
    });
    for j in links {
        let ready = done_by_target
            .get(j.target.as_str())
            .copied()
            .unwrap_or(0.0);
        let (i, free_at) = earliest(&free);
        free[i] = free_at.max(ready) + j.seconds;
        end = end.max(free[i]);
    }
    let combine: f64 = jobs
        .iter()
        .filter(|j| j.stage == Stage::Combine)
        .map(|j| j.seconds)
        .sum();
    end + combine
}

/// Restricts this process (and what it starts) to the first `n` CPUs.
fn set_cpus(n: usize) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write only into it, and
    // sched_setaffinity reads it for this process (pid 0).
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for cpu in 0..n {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        bail!(
            "sched_setaffinity to {n} CPUs: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn earliest(free: &[f64]) -> (usize, f64) {
    free.iter()
        .copied()
        .enumerate()
        .fold((0, f64::MAX), |b, (i, t)| if t < b.1 { (i, t) } else { b })
}

/// The model, its check at 1 and 2 slots, and the table.
pub fn run(nvcc: &Path, sources: usize) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("model");
    generate(&root, sources)?;
    let pins = kiln_build::Pins::load(&root.join("Cargo.toml"))?;
    let env_nvcc = nvcc.to_path_buf();
    let build = |out: &str| -> kiln_build::KernelBuild {
        let nvcc = env_nvcc.clone();
        kiln_build::KernelBuild::new(pins.clone(), root.join("kernels"), tmp.path().join(out))
            .cache_dir(tmp.path().join(format!("{out}-cache")))
            .env(move |k| (k == "KILN_NVCC").then(|| nvcc.clone().into_os_string()))
            .bindgen(false)
            .progress(false)
    };
    let plan = build("measured").plan()?;
    eprintln!(
        "model: {} sources, {} jobs; measuring each job alone",
        sources,
        plan.jobs.len()
    );
    let jobs = measure(&plan.jobs)?;
    let all: Vec<&Job> = jobs.iter().collect();
    let mut measured = Vec::new();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for slots in [1usize, 2].into_iter().filter(|s| *s <= cpus) {
        // `slots` CPUs for this process and its nvcc children: kiln-build sizes its jobs to them.
        set_cpus(slots)?;
        let t = Instant::now();
        let s = build(&format!("kiln-{slots}")).run();
        set_cpus(cpus)?;
        let s = s?.summary;
        anyhow::ensure!(s.cached == 0, "the clean build found cached jobs");
        measured.push((slots, t.elapsed().as_secs_f64()));
    }
    let first = jobs
        .iter()
        .find_map(|j| j.source.clone())
        .context("no compile job")?;
    let edit: Vec<&Job> = jobs
        .iter()
        .filter(|j| j.stage != Stage::Compile || j.source.as_deref() == Some(first.as_str()))
        .collect();
    let per_job: Vec<f64> = jobs
        .iter()
        .filter(|j| j.stage == Stage::Compile)
        .map(|j| j.seconds)
        .collect();
    let total: f64 = per_job.iter().sum();
    let longest = per_job.iter().copied().fold(0.0, f64::max);
    let link_total: f64 = jobs
        .iter()
        .filter(|j| j.stage == Stage::Link)
        .map(|j| j.seconds)
        .sum();
    println!(
        "scale model: {sources} sources x 6 targets = {} compile jobs ({total:.1} s of work, {:.2} s mean, {longest:.2} s longest), {} links ({link_total:.2} s), measured one at a time",
        per_job.len(),
        total / per_job.len() as f64,
        jobs.iter().filter(|j| j.stage == Stage::Link).count()
    );
    println!("  check against kiln-build's own clean build here:");
    for (slots, wall) in &measured {
        let p = predict(&all, *slots);
        println!(
            "    {slots} slot(s): predicted {p:.1} s, measured {wall:.1} s ({:+.0}%)",
            (p / wall - 1.0) * 100.0
        );
    }
    println!("  predicted wall time on N builders (clean / after editing {first}: its 6 compiles, every link, the combine):");
    for n in [1usize, 4, 16, 64] {
        println!(
            "    {n:>3} builders: {:>7.1} s / {:>5.1} s",
            predict(&all, n),
            predict(&edit, n)
        );
    }
    let floor = longest
        + jobs
            .iter()
            .filter(|j| j.stage == Stage::Link)
            .map(|j| j.seconds)
            .fold(0.0, f64::max);
    println!("  the critical path (longest compile, then the longest link): {floor:.2} s; no number of builders goes below it");
    Ok(())
}
