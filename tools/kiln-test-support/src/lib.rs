//! Helpers the product crates' integration tests share (a dev-dependency only; never shipped).
//! One copy each, instead of one per test file.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (where the workspace Cargo.toml is): this crate sits two levels below it
/// (tools/kiln-test-support), as every product crate does (crates/<name>).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tools/kiln-test-support sits two levels below the root")
        .to_path_buf()
}

/// nvcc from CUDA_HOME (set by `cargo xtask test`, `.toolchain/env` and the Nix derivations); a
/// clear failure otherwise.
pub fn nvcc() -> PathBuf {
    let home = std::env::var_os("CUDA_HOME").map(PathBuf::from).unwrap_or_else(|| {
        panic!("CUDA_HOME is not set: run the tests with `cargo xtask test` (it bootstraps the pinned CUDA and sets CUDA_HOME) or in `nix develop`")
    });
    let nvcc = home.join("bin/nvcc");
    assert!(
        nvcc.exists(),
        "nvcc not found at {} (CUDA_HOME): run the tests with `cargo xtask test` or in `nix develop`",
        nvcc.display()
    );
    nvcc
}

/// cuobjdump, located the way every build environment provides tools: `CUOBJDUMP`, else PATH
/// (the Nix derivation puts cudaPackages.cuda_cuobjdump there; `cargo xtask` its bootstrapped
/// copy), else `$CUDA_HOME/bin`. Never a checkout-relative path: a Nix build has no .toolchain/.
pub fn cuobjdump() -> PathBuf {
    let from_env = std::env::var_os("CUOBJDUMP").map(PathBuf::from);
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("cuobjdump"))
            .find(|c| c.is_file())
    });
    let in_cuda_home =
        std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("bin/cuobjdump"));
    from_env
        .or(on_path)
        .or(in_cuda_home)
        .filter(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "cuobjdump not found (CUOBJDUMP, PATH, $CUDA_HOME/bin): run the tests through `cargo xtask test` \
                 (it puts the bootstrapped cuobjdump on PATH) or in `nix develop`"
            )
        })
}

/// Builds checks/doctor/stub_libcuda.c into `dir/name` with the real stub's SONAME
/// (libcuda.so.1), using the host C compiler.
pub fn build_stub_libcuda(dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join(name);
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(&out)
        .arg(repo_root().join("checks/doctor/stub_libcuda.c"))
        .status()
        .expect("cc runs");
    assert!(status.success(), "building the stub failed");
    out
}
