use std::path::PathBuf;

/// Why a kernel build failed: the pins, the toolchain, a compiler or tool run, or its output.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Reading the pins (the arch matrix, the toolchain versions) failed.
    #[error(transparent)]
    Pins(#[from] kiln_pins::PinsError),
    /// Locating or preflighting the toolchain (nvcc, the kernel rustc).
    #[error(transparent)]
    Toolchain(#[from] kiln_toolchain::ToolchainError),
    /// The kernels directory holds no `.cu` file to build.
    #[error("no CUDA sources (*.cu) in {0}")]
    NoSources(PathBuf),
    /// A compiler (nvcc, or cargo for `kernels/rust`) rejected a source.
    #[error("nvcc failed on {source_file} for {target}:\n{diagnostics}\n  command: {command}")]
    Compile {
        /// The `.cu` file or kernel crate being compiled.
        source_file: PathBuf,
        /// What it was compiled for: a target name, or the step (e.g. the dependency scan).
        target: String,
        /// The compiler's stderr.
        diagnostics: String,
        /// The command line, to rerun it by hand.
        command: String,
    },
    /// A tool could not be run or failed outside a single compile (nvlink, nvcc -MM, …).
    #[error("{tool} failed: {message}")]
    Tool {
        /// The tool, as named in the message.
        tool: String,
        /// Why it failed: its stderr or the error running it.
        message: String,
    },
    /// A step's output (or an input file it reads) is missing or not what it should be.
    #[error("{output} from {source_file}: {message}")]
    BadOutput {
        /// The source, crate or output file the output belongs to.
        source_file: PathBuf,
        /// Which output, e.g. "fatbin" or a target name.
        output: String,
        /// What is wrong with it.
        message: String,
    },
    /// bindgen could not generate the ABI bindings.
    #[error("bindgen over {header}: {message}")]
    Bindgen {
        /// The header (or include directory) bindgen read.
        header: PathBuf,
        /// bindgen's error.
        message: String,
    },
    /// The libclang bindgen loaded is not the pinned clang major.
    #[error(
        "libclang {found} found, but kiln pins clang {pinned}.\n  {fix} (LIBCLANG_PATH selects the library)"
    )]
    ClangVersion {
        /// The version libclang reports.
        found: String,
        /// The pinned clang major (`clang-major`).
        pinned: u32,
        /// How to get it, in the project's route (kiln's checkout or a consumer's).
        fix: String,
    },
    /// A file-system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A prebuilt job output ([`crate::prebuilt`]) that this build's plan does not match.
    #[error("prebuilt output for {job} ({entry}) refused: {message}")]
    Prebuilt {
        /// The job's plan id.
        job: String,
        /// Its entry in the prebuilt directory.
        entry: PathBuf,
        /// Why it was refused.
        message: String,
    },
    /// The build script's environment is unusable: a variable is unset or contradicts the build.
    #[error("{0}")]
    Env(String),
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
    let context = context.into();
    move |source| BuildError::Io { context, source }
}
