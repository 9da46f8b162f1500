//! `KernelBuild::plan` round trip with real nvcc (and the kernel rustc): an external runner
//! (checks/plan/run_plan.py) runs the planned jobs — C++ and Rust kernels alike —, kiln-build
//! takes their outputs back, compiles nothing, and writes a fatbin byte-identical to its own
//! build's.

mod common;

use std::path::Path;
use std::process::Command;

use kiln_build::plan::Stage;
use kiln_build::KernelBuild;

const ARCHS: &str = "[\"8.0\", \"9.0+PTX\"]"; // sm_80, sm_90, compute_90

fn build(kernels: &Path, out: &Path, cache: &Path) -> KernelBuild {
    build_for(ARCHS, kernels, out, cache)
}

fn build_for(archs: &str, kernels: &Path, out: &Path, cache: &Path) -> KernelBuild {
    KernelBuild::new(
        common::pins_with_archs(archs),
        kernels.to_path_buf(),
        out.to_path_buf(),
    )
    .cache_dir(cache.to_path_buf())
    .env(common::env_with_nvcc(common::real_nvcc()))
    .bindgen(false)
    .progress(false)
}

#[test]
fn an_external_runner_hands_back_a_byte_identical_fatbin() {
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("kernels");
    common::write(&k.join("include/shared.h"), "#define SCALE 2.0f\n");
    common::write(&k.join("a.cu"), "#include \"shared.h\"\nextern \"C\" __global__ void ka(float* x) { x[threadIdx.x] *= SCALE; }\n");
    common::write(
        &k.join("b.cu"),
        "extern \"C\" __global__ void kb(float* x) { x[threadIdx.x] += 1.0f; }\n",
    );

    // kiln-build's own build, its own cache.
    let own = build(&k, &tmp.path().join("own"), &tmp.path().join("own-cache"))
        .run()
        .unwrap();

    // The plan for a second, empty cache: 2 sources x 3 targets + 3 links.
    let cache = tmp.path().join("farm-cache");
    let plan = build(&k, &tmp.path().join("farm"), &cache).plan().unwrap();
    let stages: Vec<Stage> = plan.jobs.iter().map(|j| j.stage).collect();
    assert_eq!(stages.iter().filter(|s| **s == Stage::Compile).count(), 6);
    assert_eq!(stages.iter().filter(|s| **s == Stage::Link).count(), 3);
    let a_sm90 = plan
        .jobs
        .iter()
        .find(|j| j.id == "compile:a.cu:sm_90")
        .unwrap();
    assert!(
        a_sm90
            .inputs
            .iter()
            .any(|p| p.ends_with("include/shared.h")),
        "{a_sm90:?}"
    );
    assert!(
        plan.jobs.iter().all(|j| !j.output.exists()),
        "planning runs nothing"
    );
    let plan_file = tmp.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_json()).unwrap();

    let runner = common::repo_root().join("checks/plan/run_plan.py");
    let r = Command::new("python3")
        .arg(&runner)
        .arg(&plan_file)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(plan.jobs.iter().all(|j| j.output.is_file()));

    let farm = build(&k, &tmp.path().join("farm"), &cache).run().unwrap();
    assert_eq!(
        (farm.summary.compiled, farm.summary.linked),
        (0, 0),
        "every job came from the runner: {}",
        farm.summary
    );
    assert_eq!(
        std::fs::read(&farm.fatbin).unwrap(),
        std::fs::read(&own.fatbin).unwrap(),
        "byte-identical fatbin"
    );
}

/// Runs `plan` with checks/plan/run_plan.py; panics with its stderr if it fails.
fn run_plan(plan: &kiln_build::plan::Plan, dir: &Path) {
    let plan_file = dir.join("plan.json");
    std::fs::write(&plan_file, plan.to_json()).unwrap();
    let r = Command::new("python3")
        .arg(common::repo_root().join("checks/plan/run_plan.py"))
        .arg(&plan_file)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

#[test]
fn the_rust_kernel_jobs_are_planned_and_the_runner_hands_them_back() {
    // Two SASS targets and a PTX one: every Rust job kind (PTX, ptxas, merge) is planned.
    const RUST_ARCHS: &str = "[\"8.0\", \"9.0+PTX\"]";
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("kernels");
    common::write(
        &k.join("scale.cu"),
        "extern \"C\" __global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n",
    );
    common::write_rust_kernels(
        &k,
        "pub use kiln_kernel_params as params;",
        "    if p.rows > 0 { *x = p.eps * p.cols as f32; }",
    );

    // kiln-build's own build in the Rust-kernel tests' cache (`core` is built once there).
    let shared = common::rust_kernel_cache();
    let own = build_for(RUST_ARCHS, &k, &tmp.path().join("own"), &shared)
        .run()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(own.manifest.kernels_in("rust"), ["rs_fixture"]);

    // A second cache, empty but for cargo's build directory (so `core` is not rebuilt; the
    // planned PTX path is new to cargo, so rustc runs all the same).
    let cache = tmp.path().join("farm-cache");
    std::fs::create_dir_all(shared.join("rust-target")).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    std::os::unix::fs::symlink(shared.join("rust-target"), cache.join("rust-target")).unwrap();
    let farm = || build_for(RUST_ARCHS, &k, &tmp.path().join("farm"), &cache);
    let plan = farm().plan().unwrap();
    let ids: Vec<&str> = plan.jobs.iter().map(|j| j.id.as_str()).collect();
    for id in [
        "compile:scale.cu:sm_80",
        "rust:ptx",
        "ptxas:sm_80",
        "ptxas:sm_90",
        "link:compute_90",
        "merge:compute_90",
        "combine",
    ] {
        assert!(ids.contains(&id), "{id} is not planned: {ids:?}");
    }
    let stage = |id: &str| plan.jobs.iter().find(|j| j.id == id).unwrap().stage;
    assert_eq!(
        [
            stage("rust:ptx"),
            stage("ptxas:sm_90"),
            stage("merge:compute_90")
        ],
        [Stage::Compile, Stage::Assemble, Stage::Merge]
    );
    assert!(
        plan.jobs.iter().all(|j| !j.output.exists()),
        "planning runs nothing"
    );

    run_plan(&plan, tmp.path());
    assert!(plan.jobs.iter().all(|j| j.output.is_file()));
    let combine = plan.jobs.iter().find(|j| j.id == "combine").unwrap();
    assert_eq!(
        std::fs::read(&combine.output).unwrap(),
        std::fs::read(&own.fatbin).unwrap(),
        "the runner's own combine writes the same bytes"
    );

    let back = farm().run().unwrap();
    let s = &back.summary;
    assert_eq!(
        (s.compiled, s.linked, s.rust_compiled, s.rust_jobs),
        (0, 0, 0, 4),
        "every job, the Rust ones too, came from the runner: {s}"
    );
    assert_eq!(
        std::fs::read(&back.fatbin).unwrap(),
        std::fs::read(&own.fatbin).unwrap(),
        "byte-identical fatbin"
    );
}

#[test]
fn a_failing_job_fails_the_runner_with_its_diagnostics() {
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("kernels");
    common::write(
        &k.join("a.cu"),
        "extern \"C\" __global__ void ka(float* x) { x[0] = 1.0f; }\n",
    );
    let plan = build(&k, &tmp.path().join("o"), &tmp.path().join("c"))
        .plan()
        .unwrap();
    // The source changes after planning: the planned compile now fails.
    common::write(
        &k.join("a.cu"),
        "extern \"C\" __global__ void ka(float* x) { x[0] = 1.0f }\n",
    );
    let plan_file = tmp.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_json()).unwrap();
    let r = Command::new("python3")
        .arg(common::repo_root().join("checks/plan/run_plan.py"))
        .arg(&plan_file)
        .output()
        .unwrap();
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("compile:a.cu:sm_80 failed") && err.contains("expected a \";\""),
        "{err}"
    );
}
