//! The prebuilt mode (`KILN_PREBUILT_KERNELS`, `KernelBuild::prebuilt`): outputs another
//! executor built (here checks/plan/run_plan.py running `--emit-plan`'s jobs, as one Nix
//! derivation per job would) are taken when their recorded key is the plan's — nothing
//! compiles, the fatbin is byte-identical — and refused when it is not.

mod common;

use std::path::Path;
use std::process::Command;

use kiln_build::KernelBuild;

const ARCHS: &str = "[\"8.0\", \"9.0+PTX\"]";

fn build(kernels: &Path, out: &Path, cache: &Path) -> KernelBuild {
    KernelBuild::new(
        common::pins_with_archs(ARCHS),
        kernels.to_path_buf(),
        out.to_path_buf(),
    )
    .cache_dir(cache.to_path_buf())
    .env(common::env_with_nvcc(common::real_nvcc()))
    .bindgen(false)
    .progress(false)
}

fn kernels(dir: &Path) -> std::path::PathBuf {
    let k = dir.join("kernels");
    common::write(&k.join("include/shared.h"), "#define SCALE 2.0f\n");
    common::write(
        &k.join("a.cu"),
        "#include \"shared.h\"\nextern \"C\" __global__ void ka(float* x) { x[threadIdx.x] *= SCALE; }\n",
    );
    common::write(
        &k.join("b.cu"),
        "extern \"C\" __global__ void kb(float* x) { x[threadIdx.x] += 1.0f; }\n",
    );
    k
}

/// Runs the plan of a build of `k` elsewhere and files every output under `prebuilt`.
fn farm(k: &Path, dir: &Path, prebuilt: &Path) {
    let plan = build(k, &dir.join("farm-out"), &dir.join("farm-cache"))
        .plan()
        .unwrap();
    let plan_file = dir.join("plan.json");
    std::fs::write(&plan_file, plan.to_json()).unwrap();
    let r = Command::new("python3")
        .arg(common::repo_root().join("checks/plan/run_plan.py"))
        .arg(&plan_file)
        .arg("--prebuilt")
        .arg(prebuilt)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

#[test]
fn matching_prebuilt_outputs_are_taken_and_give_the_same_fatbin() {
    let tmp = tempfile::tempdir().unwrap();
    let k = kernels(tmp.path());
    let own = build(&k, &tmp.path().join("own"), &tmp.path().join("own-cache"))
        .run()
        .unwrap();
    let prebuilt = tmp.path().join("prebuilt");
    farm(&k, tmp.path(), &prebuilt);
    assert!(prebuilt.join("compile/a.cu/sm_80/key").is_file());
    let taken = build(&k, &tmp.path().join("out"), &tmp.path().join("empty-cache"))
        .prebuilt(prebuilt)
        .run()
        .unwrap();
    let s = &taken.summary;
    // 2 sources x 3 targets + 3 links, all prebuilt.
    assert_eq!((s.compiled, s.linked, s.prebuilt), (0, 0, 9), "{s}");
    assert_eq!(
        std::fs::read(&taken.fatbin).unwrap(),
        std::fs::read(&own.fatbin).unwrap()
    );
}

#[test]
fn a_prebuilt_output_from_other_inputs_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let k = kernels(tmp.path());
    let prebuilt = tmp.path().join("prebuilt");
    farm(&k, tmp.path(), &prebuilt);
    // The header changes after the farm built from it: a.cu's entries are stale.
    common::write(&k.join("include/shared.h"), "#define SCALE 3.0f\n");
    let e = build(&k, &tmp.path().join("out"), &tmp.path().join("cache"))
        .prebuilt(prebuilt.clone())
        .run()
        .unwrap_err()
        .to_string();
    assert!(e.contains("prebuilt output for compile:a.cu:"), "{e}");
    assert!(
        e.contains("recorded key") && e.contains("planned key"),
        "{e}"
    );
    // An entry with its key file missing is refused too, not silently rebuilt.
    let tmp2 = tempfile::tempdir().unwrap();
    let k2 = kernels(tmp2.path());
    let p2 = tmp2.path().join("prebuilt");
    farm(&k2, tmp2.path(), &p2);
    std::fs::remove_file(p2.join("compile/b.cu/sm_80/key")).unwrap();
    let e = build(&k2, &tmp2.path().join("out"), &tmp2.path().join("cache"))
        .prebuilt(p2)
        .run()
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs both `output` and `key`"), "{e}");
}

/// One process per job (what one Nix derivation per job runs): `kiln-kernel-job` files each
/// compile, then each link from those, and the build takes all of them.
#[test]
fn jobs_run_one_at_a_time_by_kiln_kernel_job_make_the_same_fatbin() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    kernels(&project);
    common::write(
        &project.join("Cargo.toml"),
        "[package]\nname = \"p\"\nversion = \"0.1.0\"\n\n[package.metadata.kiln]\narchs = [\"8.0\", \"9.0+PTX\"]\nruntime = {}\n",
    );
    let pins = || kiln_build::Pins::load(&project.join("Cargo.toml")).unwrap();
    let nvcc = common::real_nvcc();
    let build = |out: &str, cache: &str| {
        KernelBuild::new(pins(), project.join("kernels"), tmp.path().join(out))
            .cache_dir(tmp.path().join(cache))
            .env(common::env_with_nvcc(nvcc.clone()))
            .bindgen(false)
            .progress(false)
    };
    let own = build("own", "own-cache").run().unwrap();
    let prebuilt = tmp.path().join("jobs");
    let job = |id: &str| {
        let out = prebuilt.join(id.replace(':', "/"));
        let r = Command::new(env!("CARGO_BIN_EXE_kiln-kernel-job"))
            .args(["--project"])
            .arg(&project)
            .args(["--job", id, "--out"])
            .arg(&out)
            .arg("--prebuilt")
            .arg(&prebuilt)
            .env("KILN_NVCC", &nvcc)
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "{id}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    };
    for s in ["a.cu", "b.cu"] {
        for t in ["sm_80", "sm_90", "compute_90"] {
            job(&format!("compile:{s}:{t}"));
        }
    }
    for t in ["sm_80", "sm_90", "compute_90"] {
        job(&format!("link:{t}"));
    }
    let taken = build("out", "empty-cache")
        .prebuilt(prebuilt)
        .run()
        .unwrap();
    let s = &taken.summary;
    assert_eq!((s.compiled, s.linked, s.prebuilt), (0, 0, 9), "{s}");
    assert!(std::fs::read(&taken.fatbin).unwrap() == std::fs::read(&own.fatbin).unwrap());
}
