//! kiln-doctor in a consumer project (a crate with its own `[package.metadata.kiln]`, layered
//! over kiln's pins) against kiln's own workspace: the consumer is checked for what its table
//! asks for and told its own route (`kiln bootstrap`), kiln's workspace keeps every check.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use kiln_doctor::{Check, Env, Mode, Options, PinsSource, ProbeCommand, Report, Status};
use kiln_test_support::repo_root as repo;

/// A probe child that answers `libclang` with "not found" (so a libclang check that runs
/// fails, visibly) and refuses anything else.
fn fake_probe(dir: &Path) -> ProbeCommand {
    let script = dir.join("fake-probe");
    std::fs::write(
        &script,
        "#!/bin/sh\n[ \"$1\" = libclang ] || exit 2\n\
         echo '{\"path\":null,\"version\":null,\"major\":null,\"stddef_error\":null,\"error\":\"fake probe: no libclang here\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    ProbeCommand {
        program: script,
        args: Vec::new(),
    }
}

/// No toolkit, no libclang variables, HOME in the tempdir (so the per-user install is absent).
fn bare_env(home: &Path) -> Env {
    let mut env = Env::from_process();
    for k in [
        "CUDA_HOME",
        "CUDA_PATH",
        "KILN_NVCC",
        "LIBRARY_PATH",
        "LD_LIBRARY_PATH",
        "LIBCLANG_PATH",
        "BINDGEN_EXTRA_CLANG_ARGS",
        "XDG_DATA_HOME",
        "PYTHONPATH",
    ] {
        env.remove(k);
    }
    env.set("PATH", "/usr/local/bin:/usr/bin:/bin");
    env.set("HOME", home);
    env
}

/// A consumer project in `dir`: `extra` is appended to its `[package.metadata.kiln]`.
fn consumer(dir: &Path, extra: &str) -> PathBuf {
    let manifest = dir.join("Cargo.toml");
    std::fs::write(
        &manifest,
        format!(
            "[package]\nname = \"kernels-lib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [package.metadata.kiln]\narchs = [\"8.9\"]\n{extra}"
        ),
    )
    .unwrap();
    manifest
}

fn doctor(manifest: &Path, env: Env, tmp: &Path) -> Report {
    let mut opts = Options::new(Mode::Full, PinsSource::File(manifest.to_path_buf()));
    opts.env = env;
    opts.probe = Some(fake_probe(tmp));
    kiln_doctor::run(&opts).expect("the doctor runs")
}

fn one<'a>(r: &'a Report, id: &'a str) -> &'a Check {
    let mut it = r.by_id(id);
    let c = it
        .next()
        .unwrap_or_else(|| panic!("no check {id} in {}", r.to_json()));
    assert!(it.next().is_none(), "{id} appears more than once");
    c
}

fn says(c: &Check, words: &[&str]) -> bool {
    let text = format!(
        "{} {} {}",
        c.message,
        c.fix.join(" "),
        c.subject.as_deref().unwrap_or("")
    )
    .to_lowercase();
    words.iter().any(|w| text.contains(w))
}

#[test]
fn a_consumer_without_headers_or_runtime_is_not_warned_about_them() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = consumer(tmp.path(), "");
    let r = doctor(&manifest, bare_env(&tmp.path().join("home")), tmp.path());

    // Nothing about libraries it never asked for, nor about libclang, warns or fails.
    for c in r
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Warn | Status::Fail))
    {
        assert!(
            !says(c, &["cudnn", "nccl", "cublas", "libclang", "bindgen"]),
            "{c:?}"
        );
    }
    let c = one(&r, "toolchain.libclang");
    assert_eq!(c.status, Status::Skip, "{c:?}");
    assert!(
        c.message
            .starts_with("bindgen will not run: no headers in kernels/include"),
        "{}",
        c.message
    );
    // kiln's runtime list is inherited, not asked for: one line that says so.
    let c = one(&r, "trap.runtime-lib");
    assert_eq!(c.status, Status::Skip, "{c:?}");
    assert!(
        c.message
            .contains(&format!("not asked for by {}", manifest.display()))
            && c.message.contains("cudnn"),
        "{}",
        c.message
    );
    assert_eq!(one(&r, "toolchain.kernel-rustc").status, Status::Skip);

    // No nvcc here: the fix is the consumer's route, the place looked in is the per-user
    // install, never a `.toolchain/` in the project or `cargo xtask`.
    let c = one(&r, "toolchain.nvcc");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.message.contains(
            &tmp.path()
                .join("home/.local/share/kiln/toolchain")
                .display()
                .to_string()
        ),
        "{}",
        c.message
    );
    assert!(
        c.fix
            .iter()
            .any(|f| f.contains("kiln bootstrap --env-file")),
        "{:?}",
        c.fix
    );
    let json = r.to_json();
    assert!(
        !json.contains("xtask") && !json.contains(".toolchain"),
        "{json}"
    );
}

#[test]
fn a_consumer_with_abi_headers_has_libclang_checked_with_its_own_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = consumer(tmp.path(), "");
    let include = tmp.path().join("kernels/include");
    std::fs::create_dir_all(&include).unwrap();
    std::fs::write(
        include.join("lib_abi.h"),
        "typedef struct { int n; } lib_args;\n",
    )
    .unwrap();
    let r = doctor(&manifest, bare_env(&tmp.path().join("home")), tmp.path());
    let c = one(&r, "toolchain.libclang");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.message.contains("fake probe: no libclang here"),
        "{}",
        c.message
    );
    assert!(
        c.fix.iter().any(|f| f.contains("kiln bootstrap")) && !c.fix.concat().contains("xtask"),
        "{:?}",
        c.fix
    );
}

#[test]
fn a_consumer_that_states_runtime_has_those_libraries_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = consumer(
        tmp.path(),
        "\n[package.metadata.kiln.runtime.nccl]\nwheel = \"nvidia-nccl-cu13\"\n\
         version = \"2.28.3\"\nrequires = \">=2.28,<3\"\nlib-dir = \"nvidia/nccl/lib\"\n\
         sonames = [\"libnccl.so.2\"]\n",
    );
    let r = doctor(&manifest, bare_env(&tmp.path().join("home")), tmp.path());
    let c = one(&r, "trap.runtime-lib");
    assert_eq!(c.subject.as_deref(), Some("nccl"), "{c:?}");
    assert!(c.message.contains("libnccl.so.2"), "{}", c.message);
    assert!(!c.message.contains("not asked for"), "{}", c.message);
}

#[test]
fn a_consumer_s_cuda_range_decides_which_nvcc_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = bare_env(&tmp.path().join("home"));
    env.set("KILN_NVCC", repo().join("checks/doctor/fake-nvcc"));
    env.set("KILN_FAKE_NVCC_RELEASE", "12.9.41");

    let manifest = consumer(
        tmp.path(),
        "\n[package.metadata.kiln.kernels]\ncuda = \">=12.8,<14\"\n",
    );
    let r = doctor(&manifest, env.clone(), tmp.path());
    let c = one(&r, "toolchain.nvcc");
    assert_eq!(c.status, Status::Ok, "{c:?}");
    assert!(
        c.message.contains("12.9.41") && c.message.contains("cuda range >=12.8,<14"),
        "{}",
        c.message
    );

    // Without a range only the pin is accepted, and the fix says how to declare one.
    let manifest = consumer(tmp.path(), "");
    let r = doctor(&manifest, env, tmp.path());
    let c = one(&r, "toolchain.nvcc");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.message.contains("12.9.41") && c.message.contains("[package.metadata.kiln.kernels]"),
        "{}",
        c.message
    );
    let fix = c.fix.concat();
    assert!(
        fix.contains("`cuda = \">=12.9,<14\"`") && fix.contains("kiln bootstrap"),
        "{fix}"
    );
    assert!(!fix.contains("xtask"), "{fix}");
}

#[test]
fn kiln_s_own_workspace_keeps_the_libclang_and_runtime_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let r = doctor(
        &repo().join("Cargo.toml"),
        bare_env(&tmp.path().join("home")),
        tmp.path(),
    );
    // kernels/include/kiln_abi.h exists: bindgen runs, so libclang is checked (and fails here).
    let c = one(&r, "toolchain.libclang");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.fix.iter().any(|f| f.contains("cargo xtask bootstrap")),
        "{:?}",
        c.fix
    );
    let subjects: Vec<&str> = r
        .by_id("trap.runtime-lib")
        .filter_map(|c| c.subject.as_deref())
        .collect();
    for lib in ["cudart", "cublas", "cudnn", "nccl"] {
        assert!(subjects.contains(&lib), "{lib}: {subjects:?}");
    }
    // kernels/rust exists: the kernel rustc is checked, not skipped for want of Rust kernels.
    let c = one(&r, "toolchain.kernel-rustc");
    assert!(!c.message.contains("no Rust kernels"), "{c:?}");
}
