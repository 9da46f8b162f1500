//! The two ways the Rust kernels get `core` for nvptx64 give the same PTX. The Nix toolchain
//! (rust-overlay's nightly with `targets = [ "nvptx64-nvidia-cuda" ]`) ships the target's
//! prebuilt `rust-std`, so kiln-build builds against its sysroot with no `-Zbuild-std` and no
//! standard-library lockfile; Debian's rustc-web has no such component, so it compiles `core`
//! from rust-src (`-Zbuild-std=core`). Here both run with one rustc: `core` is built once with
//! `-Zbuild-std`, laid out as a `rust-std` component is (`lib/rustlib/nvptx64-nvidia-cuda/lib`)
//! in a sysroot of its own, and kiln's kernels/rust is built against that sysroot with
//! `-Zbuild-std` off. The PTX must match byte for byte.

mod common;

use std::path::{Path, PathBuf};

use kiln_build::KernelBuild;

const TARGET: &str = "nvptx64-nvidia-cuda";

/// `rust:ptx` of kiln's own kernels/rust with the kernel rustc at `rustc`, into `out/output`.
fn rust_ptx(rustc: &Path, cache: &Path, out: &Path) -> Vec<u8> {
    let root = common::repo_root();
    let pins = kiln_build::Pins::load(&root.join("Cargo.toml")).unwrap();
    let nvcc = common::real_nvcc();
    let rustc = rustc.to_path_buf();
    KernelBuild::new(pins, root.join("kernels"), out.join("build"))
        .cache_dir(cache.to_path_buf())
        .env(move |k| match k {
            "KILN_NVCC" => Some(nvcc.clone().into_os_string()),
            "KILN_KERNEL_RUSTC" => Some(rustc.clone().into_os_string()),
            _ => None,
        })
        .bindgen(false)
        .progress(false)
        .run_job("rust:ptx", out)
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::read(out.join("output")).unwrap()
}

/// A sysroot holding the host's libraries (linked) and the device `core` built by
/// `-Zbuild-std` in `cache`, laid out as rustup's `rust-std-nvptx64-nvidia-cuda` is; a `rustc`
/// that uses it and a `cargo` beside it.
fn sysroot_with_device_core(real_sysroot: &Path, cache: &Path, dir: &Path) -> PathBuf {
    let rustlib = dir.join("lib/rustlib");
    std::fs::create_dir_all(&rustlib).unwrap();
    for e in std::fs::read_dir(real_sysroot.join("lib/rustlib"))
        .unwrap()
        .flatten()
    {
        let name = e.file_name();
        if name != TARGET && name != "src" && e.path().is_dir() {
            std::os::unix::fs::symlink(e.path(), rustlib.join(&name)).unwrap();
        }
    }
    let lib = rustlib.join(TARGET).join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let deps = cache.join("rust-target").join(TARGET).join("release/deps");
    let mut copied = Vec::new();
    for e in std::fs::read_dir(&deps).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let std_crate = [
            "libcore-",
            "libcompiler_builtins-",
            "librustc_std_workspace_core-",
        ]
        .iter()
        .any(|p| name.starts_with(p));
        if std_crate && name.ends_with(".rlib") {
            std::fs::copy(e.path(), lib.join(&name)).unwrap();
            copied.push(name);
        }
    }
    assert!(
        copied.iter().any(|n| n.starts_with("libcore-")),
        "-Zbuild-std left no libcore in {}: {copied:?}",
        deps.display()
    );
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let real_rustc = real_sysroot.join("bin/rustc");
    let wrapper = bin.join("rustc");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec {} --sysroot {} \"$@\"\n",
            real_rustc.display(),
            dir.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(real_sysroot.join("bin/cargo"), bin.join("cargo")).unwrap();
    wrapper
}

#[test]
fn prebuilt_device_core_and_build_std_give_the_same_ptx() {
    let debian = Path::new("/usr/bin/rustc");
    let sysroot = std::process::Command::new(debian)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let Some(sysroot) = sysroot.filter(|s| {
        kiln_toolchain::kernel_rustc::device_std_in(s)
            == Some(kiln_toolchain::kernel_rustc::DeviceStd::BuildStd)
    }) else {
        eprintln!(
            "SKIPPED: /usr/bin/rustc with rust-src and no prebuilt {TARGET} core is needed \
             (Debian's rustc-web and rust-web-src; .ci/run installs them)"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (cache_a, cache_b) = (tmp.path().join("cache-a"), tmp.path().join("cache-b"));
    let built = rust_ptx(debian, &cache_a, &tmp.path().join("a"));

    let wrapper = sysroot_with_device_core(&sysroot, &cache_a, &tmp.path().join("sysroot"));
    let env = |k: &str| (k == "KILN_KERNEL_RUSTC").then(|| wrapper.clone().into_os_string());
    let pins = kiln_build::Pins::load(&common::repo_root().join("Cargo.toml")).unwrap();
    let found = kiln_toolchain::kernel_rustc::locate(&env, &pins).unwrap();
    assert_eq!(
        found.std,
        kiln_toolchain::kernel_rustc::DeviceStd::Sysroot,
        "the laid-out sysroot must be taken as a prebuilt rust-std"
    );
    let prebuilt = rust_ptx(&wrapper, &cache_b, &tmp.path().join("b"));
    // The second route compiled no `core` of its own.
    let deps = cache_b
        .join("rust-target")
        .join(TARGET)
        .join("release/deps");
    let own_core: Vec<String> = std::fs::read_dir(&deps)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("libcore-"))
        .collect();
    assert!(
        own_core.is_empty(),
        "the sysroot route built core: {own_core:?}"
    );
    let (a, b) = (
        String::from_utf8_lossy(&built),
        String::from_utf8_lossy(&prebuilt),
    );
    if a != b {
        let diff: Vec<String> = (a.lines().zip(b.lines()))
            .filter(|(x, y)| x != y)
            .take(10)
            .map(|(x, y)| format!("-{x}\n+{y}"))
            .collect();
        panic!(
            "the PTX differs ({} vs {} bytes):\n{}",
            built.len(),
            prebuilt.len(),
            diff.join("\n")
        );
    }
    eprintln!(
        "same PTX from -Zbuild-std=core and from the sysroot's prebuilt core: {} bytes",
        built.len()
    );
}
