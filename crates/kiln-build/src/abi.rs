//! The C ABI shared by the kernels and Rust: bindgen (libclang, pinned major) over
//! `kernels/include/*.h`, with bindgen's layout tests, so both compilers agree on every struct.

use std::path::{Path, PathBuf};

use kiln_pins::Pins;

use crate::error::BuildError;

/// Points bindgen at the bootstrap's libclang when the environment names none: the checkout's
/// `.toolchain/`, or the per-user install `kiln bootstrap` made for a consumer.
fn default_libclang(pins: &Pins) {
    let env = |k: &str| std::env::var_os(k);
    let Some(layout) = kiln_toolchain::Route::of(pins).layout(&env, pins) else {
        return;
    };
    let dir = layout.libclang_dir();
    if std::env::var_os("LIBCLANG_PATH").is_none() && dir.join("libclang.so").exists() {
        std::env::set_var("LIBCLANG_PATH", &dir);
        if std::env::var_os("BINDGEN_EXTRA_CLANG_ARGS").is_none() {
            std::env::set_var(
                "BINDGEN_EXTRA_CLANG_ARGS",
                format!("-resource-dir={}", dir.join("resource").display()),
            );
        }
    }
}

/// `kiln_abi.rs` of a project without C ABI headers: bindgen does not run (no libclang
/// needed) and `kiln_embed::abi!` still includes a file.
pub const EMPTY: &str = "// kiln-build: no C ABI headers (kernels/include/*.h), so no bindings.\n";

/// The headers bindgen reads, sorted: the one rule kiln doctor and `kiln bootstrap` also use
/// ([`kiln_toolchain::needs::abi_headers`]).
pub fn headers(include_dir: &Path) -> Result<Vec<PathBuf>, BuildError> {
    Ok(kiln_toolchain::needs::abi_headers(include_dir))
}

/// Writes the Rust bindings for `include_dir`'s headers to `out` and returns the clang version.
pub fn generate(pins: &Pins, include_dir: &Path, out: &Path) -> Result<String, BuildError> {
    default_libclang(pins);
    let version = bindgen::clang_version();
    let major = version.parsed.map(|(m, _)| m);
    if major != Some(pins.toolchain.clang_major) {
        return Err(BuildError::ClangVersion {
            found: version.full.clone(),
            pinned: pins.toolchain.clang_major,
            fix: kiln_toolchain::Route::of(pins).install_fix(),
        });
    }
    let headers = headers(include_dir)?;
    let mut builder = bindgen::Builder::default()
        .clang_arg(format!("-I{}", include_dir.display()))
        .allowlist_file(format!(
            "{}/.*",
            regex_escape(&include_dir.display().to_string())
        ))
        .derive_default(true)
        .derive_copy(true)
        .derive_debug(true)
        .layout_tests(true)
        .generate_comments(true)
        .use_core();
    for h in &headers {
        builder = builder.header(h.display().to_string());
    }
    let bindings = builder.generate().map_err(|e| BuildError::Bindgen {
        header: include_dir.to_path_buf(),
        message: e.to_string(),
    })?;
    bindings
        .write_to_file(out)
        .map_err(crate::error::io(format!("writing {}", out.display())))?;
    Ok(version.full)
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
