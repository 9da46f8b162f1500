//! Real nvcc runs: diagnostics on bad sources, and the cache's compiled/cached counts.

mod common;

use std::path::Path;

use kiln_build::{BuildError, KernelBuild};

fn build(kernels: &Path, out: &Path, archs: &str) -> Result<kiln_build::BuildOutput, BuildError> {
    KernelBuild::new(
        common::pins_with_archs(archs),
        kernels.to_path_buf(),
        out.to_path_buf(),
    )
    .env(common::env_with_nvcc(common::real_nvcc()))
    .bindgen(false)
    .run()
}

#[test]
fn syntax_error_shows_nvccs_diagnostics_and_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("kernels");
    common::write(
        &k.join("good.cu"),
        "extern \"C\" __global__ void good(float* x) { x[0] = 1.0f; }\n",
    );
    common::write(
        &k.join("broken.cu"),
        "extern \"C\" __global__ void broken(float* x) { x[0] = 1.0f }\n",
    );
    let err = build(&k, &tmp.path().join("out"), "[\"9.0\"]").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("broken.cu"), "names the file: {msg}");
    assert!(
        msg.contains("error: expected a \";\""),
        "shows nvcc's own diagnostic: {msg}"
    );
    assert!(!msg.contains("good.cu\n"), "{msg}");
}

#[test]
fn edits_recompile_only_the_jobs_that_read_them() {
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("kernels");
    let out = tmp.path().join("out");
    let archs = "[\"8.0\", \"9.0+PTX\"]"; // 3 targets: sm_80, sm_90, compute_90
    common::write(&k.join("include/shared.h"), "#define SCALE 2.0f\n");
    common::write(&k.join("a.cu"), "#include \"shared.h\"\nextern \"C\" __global__ void ka(float* x) { x[threadIdx.x] *= SCALE; }\n");
    common::write(
        &k.join("b.cu"),
        "extern \"C\" __global__ void kb(float* x) { x[threadIdx.x] += 1.0f; }\n",
    );

    let first = build(&k, &out, archs).unwrap().summary;
    assert_eq!(
        (first.compile_jobs, first.compiled, first.cached),
        (6, 6, 0),
        "{first}"
    );

    let again = build(&k, &out, archs).unwrap().summary;
    assert_eq!(
        (again.compiled, again.cached, again.linked),
        (0, 6, 0),
        "no-op: {again}"
    );

    // A touch changes no content: nothing to compile.
    let a = std::fs::read_to_string(k.join("a.cu")).unwrap();
    common::write(&k.join("a.cu"), &a);
    let touched = build(&k, &out, archs).unwrap().summary;
    assert_eq!(touched.compiled, 0, "{touched}");

    // Editing b.cu recompiles b's three jobs only.
    common::write(
        &k.join("b.cu"),
        "extern \"C\" __global__ void kb(float* x) { x[threadIdx.x] += 2.0f; }\n",
    );
    let edited = build(&k, &out, archs).unwrap().summary;
    assert_eq!((edited.compiled, edited.cached), (3, 3), "{edited}");

    // Editing a header recompiles exactly the sources that include it (a.cu).
    common::write(&k.join("include/shared.h"), "#define SCALE 3.0f\n");
    let header = build(&k, &out, archs).unwrap();
    assert_eq!(
        (header.summary.compiled, header.summary.cached),
        (3, 3),
        "{}",
        header.summary
    );

    // The manifest is derived from the outputs: both kernels, every target.
    let targets: Vec<(kiln_pins::Target, &Vec<String>)> = header
        .manifest
        .targets
        .iter()
        .map(|t| (t.target, &t.kernels))
        .collect();
    assert_eq!(targets.len(), 3);
    for (t, kernels) in targets {
        assert_eq!(kernels, &vec!["ka".to_string(), "kb".to_string()], "{t}");
    }
    assert!(header.manifest.gaps().is_empty());
}

#[test]
fn a_kernel_missing_for_one_target_fails_the_build() {
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("kernels");
    // Compiled out for sm_80 only: the build must notice from the outputs, not the sources.
    common::write(
        &k.join("a.cu"),
        "extern \"C\" __global__ void always(float* x) { x[0] = 1; }\n\
         #if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ != 800\n\
         extern \"C\" __global__ void not_on_80(float* x) { x[0] = 2; }\n#endif\n",
    );
    let err = build(&k, &tmp.path().join("out"), "[\"8.0\", \"9.0\"]")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not_on_80 missing for sm_80"), "{err}");
}
