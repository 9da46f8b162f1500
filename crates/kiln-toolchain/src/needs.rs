//! Which optional parts of the toolchain a project's build uses, decided from its files the way
//! kiln-build decides: libclang only when bindgen runs (C headers in `<kernels dir>/include`),
//! the kernel rustc only for a `<kernels dir>/rust` crate. `kiln doctor` checks, and `kiln
//! bootstrap` requires, only what a build will actually run.

use std::path::{Path, PathBuf};

use kiln_pins::Pins;

/// The project's kernels directory: `<root>/<[…kernels] dir>` ("kernels" by default).
pub fn kernels_dir(pins: &Pins) -> PathBuf {
    pins.root().join(&pins.kernels.dir)
}

/// The C headers bindgen reads from `include_dir`, sorted: its `*.h` files (not `*.cuh`, which
/// are device-side). Empty — bindgen does not run — when there are none or the directory is
/// absent.
pub fn abi_headers(include_dir: &Path) -> Vec<PathBuf> {
    let mut hs: Vec<PathBuf> = match std::fs::read_dir(include_dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "h"))
            .collect(),
        Err(_) => Vec::new(),
    };
    hs.sort();
    hs
}

/// `<kernels dir>/include`, where the ABI headers live.
pub fn abi_include_dir(pins: &Pins) -> PathBuf {
    kernels_dir(pins).join("include")
}

/// The headers bindgen will read for this project (empty: bindgen, and so libclang, is not
/// needed).
pub fn bindgen_headers(pins: &Pins) -> Vec<PathBuf> {
    abi_headers(&abi_include_dir(pins))
}

/// The `<kernels dir>/rust` crate's manifest, when the project has Rust kernels (and so needs
/// the kernel rustc).
pub fn rust_kernels(pins: &Pins) -> Option<PathBuf> {
    let manifest = kernels_dir(pins).join("rust/Cargo.toml");
    manifest.is_file().then_some(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_rust_kernels_are_found_under_the_project_s_kernels_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = tmp.path().join("Cargo.toml");
        let text = "[package]\nname = \"c\"\n[package.metadata.kiln]\narchs = [\"8.9\"]\n\
                    [package.metadata.kiln.kernels]\ndir = \"cuda\"\n";
        let pins = Pins::parse(text, &manifest).unwrap();
        assert!(bindgen_headers(&pins).is_empty() && rust_kernels(&pins).is_none());
        let include = tmp.path().join("cuda/include");
        std::fs::create_dir_all(&include).unwrap();
        std::fs::write(include.join("ops.cuh"), "").unwrap();
        assert!(
            bindgen_headers(&pins).is_empty(),
            "*.cuh is not an ABI header"
        );
        std::fs::write(include.join("b.h"), "").unwrap();
        std::fs::write(include.join("a.h"), "").unwrap();
        assert_eq!(
            bindgen_headers(&pins),
            [include.join("a.h"), include.join("b.h")]
        );
        std::fs::create_dir_all(tmp.path().join("cuda/rust")).unwrap();
        std::fs::write(tmp.path().join("cuda/rust/Cargo.toml"), "").unwrap();
        assert_eq!(
            rust_kernels(&pins),
            Some(tmp.path().join("cuda/rust/Cargo.toml"))
        );
    }
}
