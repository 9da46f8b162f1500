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
