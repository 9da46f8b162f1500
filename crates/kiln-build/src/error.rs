use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Pins(#[from] kiln_pins::PinsError),
    /// Locating or preflighting the toolchain (nvcc, the kernel rustc).
    #[error(transparent)]
    Toolchain(#[from] kiln_toolchain::ToolchainError),
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
        "libclang {found} found, but kiln pins clang {pinned}.\n  Run `kiln bootstrap` (in a kiln checkout: `cargo xtask bootstrap`) or `nix develop` (LIBCLANG_PATH selects the library)"
    )]
    ClangVersion { found: String, pinned: u32 },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Env(String),
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
    let context = context.into();
    move |source| BuildError::Io { context, source }
}
