use std::path::PathBuf;

/// Why the pinned toolchain could not be found, verified or installed.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    /// No nvcc in any of the places [`crate::nvcc`] searches.
    #[error("nvcc not found (looked in: {searched}).\n  {fix}")]
    NvccNotFound {
        /// The places looked in, summarized for the message.
        searched: String,
        /// How to install it, for this project's [`crate::Route`].
        fix: String,
    },
    /// The nvcc found is not a release the project accepts.
    #[error("nvcc at {path} is {found}, but {accepted}.\n  {fix}")]
    NvccVersion {
        /// The nvcc that was found.
        path: PathBuf,
        /// The release it reports (`nvcc --version`).
        found: String,
        /// The release kiln's toolchain pins (`toolchain.nvcc`).
        pinned: String,
        /// What the project accepts and where that is stated: its `cuda` range, else the pin.
        accepted: String,
        /// What to do, for this project's [`crate::Route`].
        fix: String,
    },
    /// The nvcc found cannot compile one of the arch matrix's targets.
    #[error("nvcc at {path} does not support {target} (it supports: {supported}); fix the arch matrix or the toolkit pin")]
    UnsupportedTarget {
        /// The nvcc that was asked.
        path: PathBuf,
        /// The matrix target it lacks, e.g. "sm_120".
        target: String,
        /// The targets it lists, space-separated.
        supported: String,
    },
    /// A toolkit program could not be run, failed, gave unrecognised output, or is missing
    /// beside nvcc.
    #[error("{tool} failed: {message}")]
    Tool {
        /// The program (with its arguments when it ran and failed).
        tool: String,
        /// What went wrong: its stderr, or why it could not be used.
        message: String,
    },
    /// The kernel rustc (for `kernels/rust`) is missing or not a pinned release.
    #[error("kernel rustc: {0}")]
    KernelRustc(String),
    /// Installing a toolchain component failed.
    #[error("installing {component}: {message}")]
    Install {
        /// The component being installed, e.g. "cuda" or "rust-kernel".
        component: String,
        /// Why it failed.
        message: String,
    },
    /// A file-system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ToolchainError {
    let context = context.into();
    move |source| ToolchainError::Io { context, source }
}
