//! The Rust source kind with the real kernel rustc, nvcc, ptxas and nvlink: a Rust kernel crate
//! lands in every target's module beside the C++ kernels (recorded as "rust" in the
//! manifest), a rebuild compiles nothing, an edit to the Rust crate reruns only the Rust jobs,
//! and a device parameter struct that differs from the host's fails the build naming the field.

mod common;

use std::path::{Path, PathBuf};

use kiln_build::{BuildError, KernelBuild};

/// Two SASS targets and a PTX one: every Rust job kind runs (PTX, ptxas, PTX merge).
const ARCHS: &str = "[\"8.0\", \"9.0+PTX\"]";

/// One cache for every test here, so `core` for nvptx64 is built once per machine (the cache
/// is content-addressed; the nonces below keep each test's own jobs fresh).
fn shared_cache() -> PathBuf {
    common::rust_kernel_cache()
}

fn build(kernels: &Path, out: &Path) -> Result<kiln_build::BuildOutput, BuildError> {
    KernelBuild::new(
        common::pins_with_archs(ARCHS),
        kernels.to_path_buf(),
        out.to_path_buf(),
    )
    .cache_dir(shared_cache())
    .env(common::env_with_nvcc(common::real_nvcc()))
    .bindgen(false)
    .progress(false)
    .run()
}

fn nonce() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A kernels directory: one .cu file and a Rust crate whose `params` module is `params_mod`.
fn kernels_dir(root: &Path, params_mod: &str, kernel_body: &str) -> PathBuf {
    let k = root.join("kernels");
    common::write(
        &k.join("scale.cu"),
        "extern \"C\" __global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n",
    );
    common::write_rust_kernels(&k, params_mod, kernel_body);
    k
}

#[test]
fn rust_kernels_join_every_target_and_rebuild_incrementally() {
    let tmp = tempfile::tempdir().unwrap();
    // The nonce is in the code, so the PTX (and every job after it) is new to the cache.
    let body = format!(
        "    if p.rows > 0 {{ *x = p.eps * p.cols as f32 + {}.0; }}",
        nonce() % (1 << 20)
    );
    let k = kernels_dir(tmp.path(), "pub use kiln_kernel_params as params;", &body);
    let first = build(&k, &tmp.path().join("out")).unwrap_or_else(|e| panic!("{e}"));
    // One PTX, ptxas for sm_80 and sm_90, one merge into compute_90's PTX.
    assert_eq!(
        (first.summary.rust_jobs, first.summary.rust_compiled),
        (4, 4),
        "{}",
        first.summary
    );
    for t in &first.manifest.targets {
        for kernel in ["scale", "rs_fixture"] {
            assert!(
                t.kernels.iter().any(|k| k == kernel),
                "{kernel} missing for {}: {:?}",
                t.target,
                t.kernels
            );
        }
    }
    assert_eq!(first.manifest.kernels_in("rust"), ["rs_fixture"]);
    assert_eq!(first.manifest.kernels_in("cuda"), ["scale"]);
    assert!(
        first.manifest.kernel_rustc_version.contains("release: "),
        "rustc -vV recorded: {:?}",
        first.manifest.kernel_rustc_version
    );

    // No-op: nothing compiles.
    let again = build(&k, &tmp.path().join("out")).unwrap();
    assert_eq!(
        (again.summary.compiled, again.summary.rust_compiled),
        (0, 0),
        "{}",
        again.summary
    );

    // An edit to the Rust kernel: every Rust job reruns, no C++ job does.
    let lib = k.join("rust/src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(
        &lib,
        text.replace("p.eps * p.cols as f32", "p.eps + p.cols as f32"),
    )
    .unwrap();
    let edited = build(&k, &tmp.path().join("out")).unwrap();
    assert_eq!(
        (edited.summary.compiled, edited.summary.cached),
        (0, 3),
        "{}",
        edited.summary
    );
    assert_eq!(edited.summary.rust_compiled, 4, "{}", edited.summary);
}

#[test]
fn a_device_struct_that_differs_from_the_host_fails_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    // `eps` and `cols` swapped on the device side: same names, different offsets.
    let params = "pub mod params {\n\
        pub use kiln_kernel_params::{SiluMulParams, VecaddParams};\n\
        #[repr(C)]\n\
        pub struct RmsnormParams { pub rows: u64, pub eps: f32, pub cols: u64 }\n\
        }";
    let body = format!(
        "    if p.rows > 0 {{ *x = p.eps + {}.0; }}",
        nonce() % (1 << 20)
    );
    let k = kernels_dir(tmp.path(), params, &body);
    let err = build(&k, &tmp.path().join("out")).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, BuildError::Compile { .. }), "{err:?}");
    assert!(
        msg.contains(
            "kiln: parameter struct RmsnormParams, field `cols`: the host puts it at byte offset 8"
        ),
        "names the struct and the field: {msg}"
    );
}
