//! Shared by the kiln-build integration tests: the real pins with a smaller matrix, and the
//! real nvcc (from `cargo xtask bootstrap` or the environment) — never a mock.

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kiln_pins::Pins;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The workspace pins with `archs` replaced (keeps the tests fast: two targets, not seven).
pub fn pins_with_archs(archs: &str) -> Pins {
    let manifest = repo_root().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let start = text.find("\narchs = [").expect("archs line") + 1;
    let end = start + text[start..].find('\n').unwrap();
    let text = format!("{}archs = {archs}{}", &text[..start], &text[end..]);
    Pins::parse(&text, &manifest).unwrap()
}

/// The real nvcc, or a test failure that says how to get it.
pub fn real_nvcc() -> PathBuf {
    let env = |k: &str| std::env::var_os(k);
    kiln_build::toolkit::locate(
        &env,
        &kiln_build::Pins::load(&repo_root().join("Cargo.toml")).unwrap(),
    )
    .unwrap_or_else(|e| {
        panic!("these tests need the pinned nvcc: run `cargo xtask bootstrap` first\n{e}")
    })
}

/// An environment in which only `nvcc` is visible.
pub fn env_with_nvcc(nvcc: PathBuf) -> impl Fn(&str) -> Option<OsString> + Send + Sync + 'static {
    move |k: &str| {
        if k == "KILN_NVCC" {
            Some(nvcc.clone().into_os_string())
        } else {
            None
        }
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The kernel cache the Rust-kernel tests share, so `core` for nvptx64 is built once per
/// machine (the cache is content-addressed; its `rust-target` is cargo's build directory).
pub fn rust_kernel_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-kernel-cache")
}

/// A Rust kernel crate at `kernels/rust` whose `params` module is `params_mod` and whose one
/// kernel, `rs_fixture(p: RmsnormParams, x: *mut f32)`, runs `kernel_body`.
pub fn write_rust_kernels(kernels: &Path, params_mod: &str, kernel_body: &str) {
    let params = repo_root().join("crates/kiln-kernel-params");
    write(
        &kernels.join("rust/Cargo.toml"),
        &format!(
            "[package]\nname = \"fixture-kernels\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [lib]\ncrate-type = [\"rlib\"]\n\n\
             [dependencies]\nkiln-kernel-params = {{ path = \"{}\" }}\n\n\
             [workspace]\n\n[profile.release]\npanic = \"abort\"\ncodegen-units = 1\n",
            params.display()
        ),
    );
    write(
        &kernels.join("rust/src/lib.rs"),
        &format!(
            "#![no_std]\n#![feature(abi_ptx)]\n\n{params_mod}\n\n\
             include!(env!(\"KILN_HOST_LAYOUT\"));\n\n\
             #[panic_handler]\nfn panic(_: &core::panic::PanicInfo) -> ! {{ loop {{}} }}\n\n\
             #[no_mangle]\npub unsafe extern \"ptx-kernel\" fn rs_fixture(p: params::RmsnormParams, x: *mut f32) {{\n{kernel_body}\n}}\n"
        ),
    );
}
