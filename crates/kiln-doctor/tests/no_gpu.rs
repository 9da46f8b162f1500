//! kiln-doctor on a machine without a GPU: a fake nvcc, a stub libcuda built here with the C
//! compiler, and the link preflight with and without it. Each test hands the doctor its own
//! environment, so nothing depends on the developer's shell.

use std::path::Path;
use std::process::Command;

use kiln_doctor::{Check, Env, Mode, Options, PinsSource, Report, Status};
use kiln_test_support::build_stub_libcuda as build_stub;
use kiln_test_support::repo_root as repo;

fn run(env: Env) -> Report {
    let mut opts = Options::new(Mode::Full, PinsSource::File(repo().join("Cargo.toml")));
    opts.env = env;
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

/// True when the system linker finds a libcuda.so by itself (a machine with the driver's
/// development link); the "nothing to link against" case cannot be made there.
fn system_has_libcuda() -> bool {
    let out = Command::new("cc")
        .arg("-print-file-name=libcuda.so")
        .output()
        .unwrap();
    Path::new(String::from_utf8_lossy(&out.stdout).trim()).is_absolute()
}

/// The process environment without any CUDA toolkit: PATH of system dirs only.
fn bare_env() -> Env {
    let mut env = Env::from_process();
    for k in [
        "CUDA_HOME",
        "CUDA_PATH",
        "KILN_NVCC",
        "LIBRARY_PATH",
        "LD_LIBRARY_PATH",
        "LIBCLANG_PATH",
    ] {
        env.remove(k);
    }
    env.set("PATH", "/usr/local/bin:/usr/bin:/bin");
    env
}

#[test]
fn fake_nvcc_with_another_version_fails_the_nvcc_check() {
    let mut env = bare_env();
    env.set("KILN_NVCC", repo().join("checks/doctor/fake-nvcc"));
    env.set("KILN_FAKE_NVCC_RELEASE", "12.4.131");
    let r = run(env);
    let c = one(&r, "toolchain.nvcc");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.message.contains("12.4.131") && c.message.contains("13.0.88"),
        "{}",
        c.message
    );
    assert!(
        c.fix.iter().any(|f| f.contains("cargo xtask bootstrap")),
        "{:?}",
        c.fix
    );
    // What needs a working nvcc says so instead of failing twice.
    assert_eq!(one(&r, "toolchain.cuda-targets").status, Status::Skip);
    assert_eq!(one(&r, "toolchain.host-compiler").status, Status::Skip);
    assert!(r.failed());
}

#[test]
fn cuda_home_of_another_release_than_path_nvcc_is_a_trap() {
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("cuda-12.4");
    std::fs::create_dir_all(other.join("bin")).unwrap();
    std::fs::copy(
        repo().join("checks/doctor/fake-nvcc"),
        other.join("bin/nvcc"),
    )
    .unwrap();
    // The nvcc on PATH: a second wrapper that reports the pinned release.
    let real_bin = tmp.path().join("pinned/bin");
    std::fs::create_dir_all(&real_bin).unwrap();
    let wrapper = real_bin.join("nvcc");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\nKILN_FAKE_NVCC_RELEASE=13.0.88 exec \"$(dirname \"$0\")/fake-nvcc\" \"$@\"\n",
    )
    .unwrap();
    std::fs::copy(
        repo().join("checks/doctor/fake-nvcc"),
        real_bin.join("fake-nvcc"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut env = bare_env();
    env.set("CUDA_HOME", &other);
    env.set("KILN_FAKE_NVCC_RELEASE", "12.4.131");
    env.set("PATH", format!("{}:/usr/bin:/bin", real_bin.display()));
    let r = run(env);
    let c = one(&r, "trap.cuda-home");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.message.contains("12.4.131") && c.message.contains("13.0.88"),
        "{}",
        c.message
    );
}

#[test]
fn stub_on_ld_library_path_is_found_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let stub = build_stub(&tmp.path().join("lib"), "libcuda.so.1");
    let mut env = bare_env();
    env.set("LD_LIBRARY_PATH", tmp.path().join("lib"));
    let r = run(env);
    let stubs: Vec<&Check> = r.by_id("trap.stub-libcuda").collect();
    let hit = stubs
        .iter()
        .find(|c| c.subject.as_deref() == Some(stub.to_str().unwrap()));
    let hit = hit.unwrap_or_else(|| panic!("stub not reported: {stubs:?}"));
    assert_eq!(hit.status, Status::Fail);
    assert!(
        hit.message.contains("CUDA_ERROR_STUB_LIBRARY") && hit.message.contains("LD_LIBRARY_PATH"),
        "{}",
        hit.message
    );
    assert!(
        hit.fix[0].contains("remove") && hit.fix[0].contains("LD_LIBRARY_PATH"),
        "{:?}",
        hit.fix
    );
}

#[test]
fn link_preflight_without_any_libcuda_fails_with_the_fix() {
    if system_has_libcuda() {
        println!("skipped: this machine's linker finds a libcuda.so by itself");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut env = bare_env();
    env.set("CUDA_HOME", tmp.path());
    let r = run(env);
    let c = one(&r, "link.driver-api");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.message.contains("-lcuda") && c.message.contains("no libcuda.so"),
        "{}",
        c.message
    );
    assert!(
        c.fix.iter().any(|f| f.contains("libcuda.so.1 at run time")),
        "{:?}",
        c.fix
    );
}

#[test]
fn link_preflight_with_only_the_unversioned_stub_reproduces_the_final_link_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let stub = build_stub(&tmp.path().join("lib64/stubs"), "libcuda.so");
    let mut env = bare_env();
    env.set("CUDA_HOME", tmp.path());
    let r = run(env);
    let c = one(&r, "link.driver-api");
    if system_has_libcuda() {
        println!("note: the system linker also sees a libcuda.so; only checking that the preflight ran: {}", c.message);
        return;
    }
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(c.message.contains(stub.to_str().unwrap()), "{}", c.message);
    assert!(c.message.contains("no libcuda.so.1"), "{}", c.message);
    assert!(
        c.message.contains("cuMemCreate") && c.message.contains("cuMemAlloc_v2"),
        "{}",
        c.message
    );
    assert!(
        c.fix.iter().any(|f| f.contains("rpath-link")),
        "{:?}",
        c.fix
    );
}

#[test]
fn link_preflight_passes_once_libcuda_so_1_is_visible() {
    let tmp = tempfile::tempdir().unwrap();
    let stub = build_stub(&tmp.path().join("lib64/stubs"), "libcuda.so");
    let versioned = build_stub(&tmp.path().join("driver"), "libcuda.so.1");
    let mut env = bare_env();
    env.set("CUDA_HOME", tmp.path());
    // ld resolves a shared library's NEEDED entries through LD_LIBRARY_PATH too.
    env.set("LD_LIBRARY_PATH", versioned.parent().unwrap());
    let r = run(env);
    let c = one(&r, "link.driver-api");
    assert_eq!(c.status, Status::Ok, "{c:?}");
    assert!(
        c.message.contains(stub.to_str().unwrap()) && c.message.contains("stub"),
        "{}",
        c.message
    );
}

#[test]
fn modes_soften_what_a_machine_does_not_need() {
    let mut env = bare_env();
    env.set("KILN_NVCC", "/nonexistent/nvcc");
    let mut opts = Options::new(
        Mode::RuntimeOnly,
        PinsSource::File(repo().join("Cargo.toml")),
    );
    opts.env = env;
    // Outside the workspace's .toolchain: pins from a copy of Cargo.toml in an empty directory.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(repo().join("Cargo.toml"), tmp.path().join("Cargo.toml")).unwrap();
    opts.pins = PinsSource::File(tmp.path().join("Cargo.toml"));
    let r = kiln_doctor::run(&opts).unwrap();
    let c = one(&r, "toolchain.nvcc");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(c.softened);
    assert!(r
        .checks
        .iter()
        .filter(|c| c.scope == kiln_doctor::Scope::Build)
        .all(|c| c.status != Status::Fail));
}

#[test]
fn unreadable_pins_are_an_error_not_a_panic() {
    let opts = Options::new(
        Mode::Full,
        PinsSource::File("/nonexistent/Cargo.toml".into()),
    );
    let e = kiln_doctor::run(&opts).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/Cargo.toml"), "{e}");
}

#[test]
fn outside_a_workspace_the_built_in_pins_are_used_and_said() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = Options::new(Mode::Full, PinsSource::Discover(tmp.path().to_path_buf()));
    opts.env = bare_env();
    let r = kiln_doctor::run(&opts).unwrap();
    let c = one(&r, "pins");
    assert_eq!(c.status, Status::Warn);
    assert!(
        c.message.contains("pins this kiln was built with") && c.message.contains("13.0.88"),
        "{}",
        c.message
    );
    assert!(r.pins.is_none());
}
