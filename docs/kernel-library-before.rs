//! Throwaway evidence (issue 29): each trait of checks/kernel-library against the OLD kiln-build.
//! Every test asserts the OLD failure, so it passes when the old code fails as expected.
//! Run with --test-threads=1 (trait 6 sets NVCC_APPEND_FLAGS in the process environment).

mod common;

use std::path::{Path, PathBuf};

use kiln_build::{BuildError, BuildOutput, KernelBuild, Pins};

const FIXTURE: &str = "/work/main/checks/kernel-library";

/// A copy of the fixture's common/ and the chosen kernels/ files in a tempdir.
fn fixture(files: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    std::fs::create_dir_all(root.join("kernels")).unwrap();
    std::fs::create_dir_all(root.join("common")).unwrap();
    std::fs::copy(
        Path::new(FIXTURE).join("common/cuda_utils.cuh"),
        root.join("common/cuda_utils.cuh"),
    )
    .unwrap();
    for f in files {
        std::fs::copy(
            Path::new(FIXTURE).join("kernels").join(f),
            root.join("kernels").join(f),
        )
        .unwrap();
    }
    (tmp, root)
}

fn build_with(
    root: &Path,
    archs: &str,
    bindgen: bool,
    cache: Option<PathBuf>,
) -> Result<BuildOutput, BuildError> {
    let mut b = KernelBuild::new(
        common::pins_with_archs(archs),
        root.join("kernels"),
        root.join("out"),
    )
    .env(common::env_with_nvcc(common::real_nvcc()))
    .bindgen(bindgen);
    if let Some(c) = cache {
        b = b.cache_dir(c);
    }
    b.run()
}

fn build(root: &Path, archs: &str) -> Result<BuildOutput, BuildError> {
    build_with(root, archs, false, None)
}

fn show(trait_: &str, what: &str, text: &str) {
    eprintln!("\n===== {trait_}: {what} =====\n{text}\n===== end {trait_} =====\n");
}

fn counts(o: &BuildOutput) -> String {
    let s = &o.summary;
    format!(
        "compile_jobs={} compiled={} cached={} link_jobs={} linked={}",
        s.compile_jobs, s.compiled, s.cached, s.link_jobs, s.linked
    )
}

// 1a. fp8.cu (kernels only for __CUDA_ARCH__ >= 890) for 8.0, 8.9, 9.0+PTX (the fixture's matrix).
// Observed: the old build never reaches the gap check; its compute_90 job (nvcc -dc) fails first.
#[test]
fn t1_arch_gated_kernel_with_the_fixture_matrix() {
    let (_t, root) = fixture(&["fp8.cu"]);
    let err = build(&root, "[\"8.0\", \"8.9\", \"9.0+PTX\"]")
        .unwrap_err()
        .to_string();
    show("trait 1 (fp8.cu, [8.0, 8.9, 9.0+PTX])", "error", &err);
    assert!(err.contains("fp8.cu for compute_90"), "{err}");
    assert!(err.contains("was not declared in this scope"), "{err}");
}

// 1a'. The same file with the SASS-only matrix 8.0, 8.9, 9.0: the gap check fails it.
#[test]
fn t1_arch_gated_kernel_fails_the_gap_check_without_ptx() {
    let (_t, root) = fixture(&["fp8.cu"]);
    let err = build(&root, "[\"8.0\", \"8.9\", \"9.0\"]")
        .unwrap_err()
        .to_string();
    show("trait 1 (fp8.cu, [8.0, 8.9, 9.0])", "error", &err);
    assert!(
        err.contains("not every kernel was built for every target"),
        "{err}"
    );
    assert!(err.contains("cast_f32_fp8 missing for sm_80"), "{err}");
    assert!(err.contains("cast_fp8_f32 missing for sm_80"), "{err}");
}

// 1b. The gate cannot be declared: the old pins parser rejects the fixture's Cargo.toml.
#[test]
fn t1_gate_declaration_is_rejected_by_the_old_pins_parser() {
    let manifest = Path::new(FIXTURE).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let err = Pins::parse(&text, &manifest).unwrap_err().to_string();
    show("trait 1 (fixture Cargo.toml as written)", "Pins::parse error", &err);
    assert!(err.contains("kernels"), "{err}");

    // And a bare `gates` key in the kiln table itself.
    let bare = "[package]\nname = \"x\"\n[package.metadata.kiln]\narchs = [\"8.0\", \"8.9\", \"9.0+PTX\"]\n\
                gates = { \"fp8.cu\" = \">=8.9\" }\n";
    let err2 = Pins::parse(bare, Path::new("/tmp/x/Cargo.toml"))
        .unwrap_err()
        .to_string();
    show("trait 1 (bare gates key)", "Pins::parse error", &err2);
    assert!(err2.contains("gates"), "{err2}");

    // Through the build-script entry too (Pins::discover from the fixture dir).
    let err3 = Pins::discover(Path::new(FIXTURE)).unwrap_err().to_string();
    show("trait 1 (Pins::discover on the fixture dir)", "error", &err3);
    assert!(err3.contains("kernels"), "{err3}");
}

// 2. unary.cu's helper exists only for __CUDA_ARCH__ >= 800: the +PTX job (nvcc -dc, host pass) fails.
#[test]
fn t2_host_pass_guard_fails_the_ptx_job() {
    let (_t, root) = fixture(&["unary.cu"]);
    let err = build(&root, "[\"8.0\", \"8.9\", \"9.0+PTX\"]")
        .unwrap_err()
        .to_string();
    show("trait 2 (unary.cu, [8.0, 8.9, 9.0+PTX])", "error", &err);
    assert!(err.contains("unary.cu for compute_90"), "{err}");
    assert!(err.contains("load_streaming"), "{err}");
    assert!(err.contains(" -dc "), "the PTX job is an nvcc -dc compile: {err}");
    // The SASS-only matrix of the same file builds: the failure is the host pass of -dc.
    let (_t2, root2) = fixture(&["unary.cu"]);
    let ok = build(&root2, "[\"8.0\", \"8.9\", \"9.0\"]");
    show(
        "trait 2 control (unary.cu, [8.0, 8.9, 9.0], no PTX)",
        "result",
        &match &ok {
            Ok(o) => format!("Ok: {}", counts(o)),
            Err(e) => format!("Err: {e}"),
        },
    );
    assert!(ok.is_ok());
}

// 3. Same-named non-inline __device__ helpers in two files: -rdc=true + nvlink clash.
#[test]
fn t3_same_named_helpers_clash_in_nvlink() {
    let (_t, root) = fixture(&["affine.cu", "unary.cu"]);
    let err = build(&root, "[\"9.0\"]").unwrap_err().to_string();
    show("trait 3 (affine.cu + unary.cu, [9.0])", "error", &err);
    assert!(err.contains("nvlink"), "{err}");
    assert!(err.contains("Multiple definition"), "{err}");
    // Control: one file alone links.
    let (_t2, root2) = fixture(&["affine.cu"]);
    let ok = build(&root2, "[\"9.0\"]");
    show(
        "trait 3 control (affine.cu alone, [9.0])",
        "result",
        &match &ok {
            Ok(o) => format!("Ok: {}", counts(o)),
            Err(e) => format!("Err: {e}"),
        },
    );
    assert!(ok.is_ok());
}

// 4. common/cuda_utils.cuh lies outside kernels/: editing it leaves every job cached (stale).
#[test]
fn t4_header_outside_kernels_is_not_keyed() {
    let (_t, root) = fixture(&["affine.cu"]);
    let archs = "[\"8.0\", \"9.0+PTX\"]";
    let first = build(&root, archs).unwrap();
    let before = std::fs::read(&first.fatbin).unwrap();
    let hdr = root.join("common/cuda_utils.cuh");
    let text = std::fs::read_to_string(&hdr).unwrap();
    let edited = text.replace("size_t acc = 1;", "size_t acc = 2;");
    assert_ne!(text, edited);
    std::fs::write(&hdr, &edited).unwrap();
    let second = build(&root, archs).unwrap();
    let after = std::fs::read(&second.fatbin).unwrap();
    // What the edited header really compiles to (a fresh cache).
    let fresh = build_with(&root, archs, false, Some(root.join("fresh-cache"))).unwrap();
    let fresh_bytes = std::fs::read(&fresh.fatbin).unwrap();
    show(
        "trait 4 (affine.cu, [8.0, 9.0+PTX]; edit common/cuda_utils.cuh `acc = 1` -> `acc = 2`)",
        "summaries",
        &format!(
            "first build:            {}\nrebuild after edit:     {}\nfresh cache after edit: {}\n\
             fatbin after edit == fatbin before edit: {}\nfresh fatbin == stale fatbin: {}",
            counts(&first),
            counts(&second),
            counts(&fresh),
            before == after,
            fresh_bytes == after
        ),
    );
    assert_eq!((second.summary.compiled, second.summary.linked), (0, 0));
    assert_eq!(second.summary.cached, second.summary.compile_jobs);
    assert_eq!(before, after, "stale: the edit did not reach the fatbin");
    assert_ne!(fresh_bytes, after, "the edit does change the code");
}

// 5. No kernels/include: bindgen on (the default).
#[test]
fn t5_no_include_dir_with_bindgen_on() {
    let (_t, root) = fixture(&["affine.cu"]);
    assert!(!root.join("kernels/include").exists());
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| "<unset>".into());
    let r = build_with(&root, "[\"9.0\"]", true, None);
    let text = match &r {
        Ok(o) => {
            let abi = o.abi.as_ref().map(|p| std::fs::read_to_string(p).unwrap_or_default());
            format!(
                "Ok: {}\nabi file: {:?}\nabi contents ({} bytes):\n{}\nmanifest clang: {:?}",
                counts(o),
                o.abi,
                abi.as_ref().map_or(0, |s| s.len()),
                abi.unwrap_or_default(),
                o.manifest.provenance.clang
            )
        }
        Err(e) => format!("Err: {e}"),
    };
    show(
        "trait 5 (affine.cu, [9.0], bindgen on, no kernels/include)",
        &format!(
            "result (LIBCLANG_PATH={}, BINDGEN_EXTRA_CLANG_ARGS={})",
            env("LIBCLANG_PATH"),
            env("BINDGEN_EXTRA_CLANG_ARGS")
        ),
        &text,
    );
    // No assertion on the outcome: report it as it is (see the notes).
}

// 6. NVCC_APPEND_FLAGS is not part of the key: a rebuild with it set is all cached.
#[test]
fn t6_nvcc_append_flags_is_not_keyed() {
    let (_t, root) = fixture(&["affine.cu"]);
    let archs = "[\"8.0\", \"9.0+PTX\"]";
    std::env::remove_var("NVCC_APPEND_FLAGS");
    let first = build(&root, archs).unwrap();
    std::env::set_var("NVCC_APPEND_FLAGS", "-DX=1");
    let second = build(&root, archs);
    let first_bytes = std::fs::read(&first.fatbin).unwrap();
    // Proof nvcc does read the variable: -lineinfo changes the output bytes; a warm cache
    // still says all cached (and keeps the old bytes), a cold one compiles different bytes.
    std::env::set_var("NVCC_APPEND_FLAGS", "-lineinfo");
    let warm_li = build(&root, archs);
    let warm_li_bytes = warm_li.as_ref().ok().map(|o| std::fs::read(&o.fatbin).unwrap());
    let cold_li = build_with(&root, archs, false, Some(root.join("cold-cache")));
    let cold_li_bytes = cold_li.as_ref().ok().map(|o| std::fs::read(&o.fatbin).unwrap());
    std::env::remove_var("NVCC_APPEND_FLAGS");
    let r = |x: &Result<BuildOutput, BuildError>| match x {
        Ok(o) => format!("Ok: {}", counts(o)),
        Err(e) => format!("Err: {e}"),
    };
    show(
        "trait 6 (affine.cu, [8.0, 9.0+PTX])",
        "summaries",
        &format!(
            "first build (NVCC_APPEND_FLAGS unset):                {}\n\
             rebuild, NVCC_APPEND_FLAGS=-DX=1:                      {}\n\
             rebuild, NVCC_APPEND_FLAGS=-lineinfo (warm cache):     {}\n\
             build,   NVCC_APPEND_FLAGS=-lineinfo (cold cache):     {}\n\
             warm -lineinfo fatbin == first fatbin: {:?}\n\
             cold -lineinfo fatbin == first fatbin: {:?}",
            counts(&first),
            r(&second),
            r(&warm_li),
            r(&cold_li),
            warm_li_bytes.as_ref().map(|b| *b == first_bytes),
            cold_li_bytes.as_ref().map(|b| *b == first_bytes),
        ),
    );
    let second = second.unwrap();
    assert_eq!((second.summary.compiled, second.summary.linked), (0, 0));
    assert_eq!(second.summary.cached, second.summary.compile_jobs);
    let warm_li = warm_li.unwrap();
    assert_eq!(warm_li.summary.compiled, 0, "warm -lineinfo rebuild: all cached");
    assert_eq!(warm_li_bytes.unwrap(), first_bytes, "stale bytes kept");
    assert!(cold_li.unwrap().summary.compiled > 0);
    assert_ne!(cold_li_bytes.unwrap(), first_bytes, "nvcc does read NVCC_APPEND_FLAGS");
}

// Informational: the whole fixture as-is (all three files, the fixture's matrix).
#[test]
fn t0_whole_fixture_on_old_kiln_build() {
    let (_t, root) = fixture(&["affine.cu", "fp8.cu", "unary.cu"]);
    let r = build(&root, "[\"8.0\", \"8.9\", \"9.0+PTX\"]");
    let text = match &r {
        Ok(o) => format!("Ok: {}", counts(o)),
        Err(e) => format!("Err: {e}"),
    };
    show("whole fixture ([8.0, 8.9, 9.0+PTX])", "result", &text);
    assert!(r.is_err());
}
