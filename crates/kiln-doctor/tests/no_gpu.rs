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
fn link_preflight_without_driver_or_stub_is_skipped_with_the_reason() {
    if system_has_libcuda() {
        println!("skipped: this machine's linker finds a libcuda.so by itself");
        return;
    }
    // The PyPI toolkit's layout: lib/ without any stubs directory (FACTS: no libcuda stub ships).
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("lib")).unwrap();
    let mut env = bare_env();
    env.set("CUDA_HOME", tmp.path());
    let r = run(env);
    let c = one(&r, "link.driver-api");
    assert_eq!(c.status, Status::Skip, "{c:?}");
    assert!(
        c.message.contains("not checked") && c.message.contains("no NVIDIA driver"),
        "{}",
        c.message
    );
    // No fix may send the user to a stubs directory this toolkit does not have.
    assert!(
        c.fix.iter().all(|f| !f.contains("lib64/stubs")),
        "{:?}",
        c.fix
    );
    assert!(
        c.fix.iter().any(|f| f.contains("libcuda.so.1 at run time")),
        "{:?}",
        c.fix
    );
    assert!(!r.verdict.can_run && r.verdict.run_blocker.as_ref().unwrap().id == "driver.libcuda");
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

/// A `pip install --target` / site-packages tree holding one nvidia-* wheel as pip leaves it:
/// `<name>-<version>.dist-info/{METADATA,RECORD}` and the library under the wheel's lib-dir
/// (nvidia-cublas 13.x: `nvidia/cu13/lib/libcublas.so.13`, `libcublasLt.so.13`, as installed
/// from PyPI into a fresh venv on 2026-12-03). The library files are empty: only their place
/// and their RECORD entry are read.
fn fake_site(root: &Path, dist: &str, version: &str, files: &[&str]) {
    let info = root.join(format!("{}-{version}.dist-info", dist.replace('-', "_")));
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(
        info.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"),
    )
    .unwrap();
    let mut record = String::new();
    for f in files {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"").unwrap();
        record.push_str(&format!(
            "{f},sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
        ));
    }
    record.push_str(&format!(
        "{}-{version}.dist-info/RECORD,,\n",
        dist.replace('-', "_")
    ));
    std::fs::write(info.join("RECORD"), record).unwrap();
}

fn runtime_lib<'a>(r: &'a Report, subject: &str) -> &'a Check {
    r.by_id("trap.runtime-lib")
        .find(|c| c.subject.as_deref() == Some(subject))
        .unwrap_or_else(|| panic!("no trap.runtime-lib for {subject}: {}", r.to_json()))
}

#[test]
fn runtime_libraries_are_reported_as_installed_not_as_pinned() {
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("site");
    let cublas = [
        "nvidia/cu13/lib/libcublas.so.13",
        "nvidia/cu13/lib/libcublasLt.so.13",
    ];
    fake_site(&site, "nvidia-cublas", "13.10.0.20", &cublas);
    fake_site(
        &site,
        "nvidia-nccl-cu13",
        "2.27.3",
        &["nvidia/nccl/lib/libnccl.so.2"],
    );
    // torch as its wheel installs it: torch/version.py in the form torch's build writes
    // (`cuda: Optional[str] = '13.0'`, as in torch 2.11.0+cu130), read without importing torch.
    fake_site(&site, "torch", "2.11.0+cu130", &["torch/version.py"]);
    std::fs::write(
        site.join("torch/version.py"),
        "from typing import Optional\n__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n",
    )
    .unwrap();
    let mut env = bare_env();
    env.set("PYTHONPATH", &site);
    let r = run(env);
    let torch = r
        .inventory
        .python
        .as_ref()
        .unwrap()
        .torch
        .as_ref()
        .expect("torch found");
    assert_eq!(torch.version, "2.11.0+cu130");
    assert_eq!(torch.cuda.as_deref(), Some("13.0"));
    let c = runtime_lib(&r, "cublas");
    assert_eq!(c.status, Status::Ok, "{c:?}");
    // The release pip installed, not the pin (13.1.0.3), and the directory named once.
    assert!(
        c.message.contains("nvidia-cublas 13.10.0.20"),
        "{}",
        c.message
    );
    assert!(!c.message.contains("13.1.0.3"), "{}", c.message);
    assert_eq!(
        c.message.matches("Python site-packages").count(),
        1,
        "{}",
        c.message
    );
    // Older than the range the wheel declares (>=2.28): that matters, and is said.
    let c = runtime_lib(&r, "nccl");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(
        c.message.contains("2.27.3") && c.message.contains(">=2.28,<3"),
        "{}",
        c.message
    );
    // The inventory lists what is installed, by its dist-info.
    let py = r.inventory.python.as_ref().expect("python3 inventoried");
    assert!(py
        .nvidia
        .iter()
        .any(|d| d.name == "nvidia-cublas" && d.version == "13.10.0.20"));
}

#[test]
fn a_library_the_wheel_does_not_require_is_not_asked_for() {
    // No CUDA_HOME and no site tree: cudart (in the pins, but no default feature of kiln-py
    // names it, so it is not in the wheel's Requires-Dist) is missing, and that is fine.
    let r = run(bare_env());
    let c = runtime_lib(&r, "cudart");
    assert_eq!(c.status, Status::Skip, "{c:?}");
    assert!(
        c.message.contains("not needed")
            && c.message.contains("does not require nvidia-cuda-runtime"),
        "{}",
        c.message
    );
    assert!(!c.message.contains("pulls it in"), "{}", c.message);
    // cuBLAS is required: missing, it warns, and its fix is a quoted pip line.
    let c = runtime_lib(&r, "cublas");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(
        c.fix[0].contains("'nvidia-cublas>=13.0,<14'"),
        "{:?}",
        c.fix
    );
}

#[test]
fn an_installed_kiln_wheel_is_what_declares_the_libraries() {
    // kiln's wheel as pip installs it: kiln/_kiln.abi3.so and METADATA with its Requires-Dist
    // (the lines `kiln wheel finalize` writes from the pins).
    let tmp = tempfile::tempdir().unwrap();
    let site = tmp.path().join("site");
    let info = site.join("kiln_cuda-0.1.0.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::create_dir_all(site.join("kiln")).unwrap();
    std::fs::write(site.join("kiln/_kiln.abi3.so"), b"").unwrap();
    std::fs::write(
        info.join("METADATA"),
        "Metadata-Version: 2.4\nName: kiln-cuda\nVersion: 0.1.0\nRequires-Dist: nvidia-cublas>=13.0,<14\n",
    )
    .unwrap();
    std::fs::write(
        info.join("RECORD"),
        "kiln/_kiln.abi3.so,,\nkiln_cuda-0.1.0.dist-info/METADATA,,\nkiln_cuda-0.1.0.dist-info/RECORD,,\n",
    )
    .unwrap();
    let mut env = bare_env();
    env.set("PYTHONPATH", &site);
    let r = run(env);
    let k = r
        .inventory
        .python
        .as_ref()
        .unwrap()
        .kiln
        .as_ref()
        .expect("kiln found");
    assert_eq!(
        (k.name.as_str(), k.version.as_str()),
        ("kiln-cuda", "0.1.0")
    );
    let c = runtime_lib(&r, "cublas");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(
        c.message.contains("the installed kiln-cuda 0.1.0 requires"),
        "{}",
        c.message
    );
    assert!(c.fix[0].contains("--no-deps"), "{:?}", c.fix);
    // This wheel names only cuBLAS: a missing cuDNN is not asked for.
    assert_eq!(runtime_lib(&r, "cudnn").status, Status::Skip);
}

#[test]
fn the_json_report_carries_the_verdict_and_the_inventory() {
    let r = run(bare_env());
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["verdict"]["can_run"], false);
    assert_eq!(v["verdict"]["run_blocker"]["id"], "driver.libcuda");
    assert!(v["inventory"]["glibc"]
        .as_str()
        .is_some_and(|g| g.starts_with("2.")));
    assert!(v["inventory"]["python"]["version"].is_string());
    assert!(v["checks"].as_array().unwrap().len() >= kiln_doctor::CHECK_IDS.len());
}
