use std::path::PathBuf;

/// Why the pinned toolchain could not be found, verified or installed.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error(
        "nvcc not found (looked in: {searched}).\n  \
         Install the pinned CUDA toolkit with `kiln bootstrap` (in a kiln checkout: `cargo xtask bootstrap`; no Nix needed), \
         or enter the pinned shell with `nix develop`."
    )]
    NvccNotFound { searched: String },
    #[error(
        "nvcc at {path} is {found}, but kiln pins nvcc {pinned} ([workspace.metadata.kiln.toolchain] in Cargo.toml).\n  \
         Use the pinned toolkit: `kiln bootstrap` (in a kiln checkout: `cargo xtask bootstrap`, then `source .toolchain/env`) or `nix develop`."
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
    #[error("{tool} failed: {message}")]
    Tool { tool: String, message: String },
    #[error("kernel rustc: {0}")]
    KernelRustc(String),
    #[error("installing {component}: {message}")]
    Install { component: String, message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ToolchainError {
    let context = context.into();
    move |source| ToolchainError::Io { context, source }
}
