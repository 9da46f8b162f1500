use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Pins(#[from] kiln_pins::PinsError),
    #[error(
        "nvcc not found (looked in: {searched}).\n  \
         Install the pinned CUDA toolkit with `cargo xtask bootstrap` (no Nix needed), \
         or enter the pinned shell with `nix develop`."
    )]
    NvccNotFound { searched: String },
    #[error(
        "nvcc at {path} is {found}, but kiln pins nvcc {pinned} ([workspace.metadata.kiln.toolchain] in Cargo.toml).\n  \
         Use the pinned toolkit: `cargo xtask bootstrap` (then `source .toolchain/env`) or `nix develop`."
    )]
    NvccVersion {
        path: PathBuf,
        found: String,
        pinned: String,
    },
    #[error("nvcc at {path} does not support {target} (it supports: {supported}); fix the arch matrix or the toolkit pin")]
    UnsupportedTarget {
        path: PathBuf,
        target: String,
        supported: String,
    },
    #[error("no CUDA sources (*.cu) in {0}")]
    NoSources(PathBuf),
    #[error("nvcc failed on {source_file} for {target}:\n{diagnostics}\n  command: {command}")]
    Compile {
        source_file: PathBuf,
        target: String,
        diagnostics: String,
        command: String,
    },
    #[error("{tool} failed: {message}")]
    Tool { tool: String, message: String },
    #[error("{output} from {source_file}: {message}")]
    BadOutput {
        source_file: PathBuf,
        output: String,
        message: String,
    },
    #[error("bindgen over {header}: {message}")]
    Bindgen { header: PathBuf, message: String },
    #[error(
        "libclang {found} found, but kiln pins clang {pinned}.\n  Run `cargo xtask bootstrap` or `nix develop` (LIBCLANG_PATH selects the library)"
    )]
    ClangVersion { found: String, pinned: u32 },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Env(String),
    #[error("kernel rustc: {0}")]
    KernelRustc(String),
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
    let context = context.into();
    move |source| BuildError::Io { context, source }
}
