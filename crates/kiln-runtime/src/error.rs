//! The one error type of kiln-runtime. Every failure — missing driver, bad shape, a CUDA,
//! cuBLAS, cuDNN or NCCL status — comes back as a value; nothing here panics.

/// What went wrong. `Display` gives a complete, user-facing sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `libcuda.so.1` could not be loaded (no NVIDIA driver on this machine, or not on the
    /// library path). The message starts with "no NVIDIA driver found: libcuda.so.1".
    #[error("no NVIDIA driver found: libcuda.so.1 {0}")]
    NoDriver(String),
    /// The driver loaded but the requested device does not exist.
    #[error("no CUDA device {ordinal}: {count} device(s) visible")]
    NoDevice { ordinal: usize, count: usize },
    /// A CUDA driver call failed.
    #[error("CUDA driver error in {call}: {message}")]
    Driver { call: String, message: String },
    /// A runtime library (cuBLAS, cuDNN, NCCL) could not be loaded.
    #[error("{soname} could not be loaded ({purpose}): {reason}. Install {wheel} (pip) or put its lib directory on LD_LIBRARY_PATH")]
    MissingLibrary {
        soname: String,
        purpose: String,
        wheel: String,
        reason: String,
    },
    /// A runtime library in the process (loaded by kiln or already by torch or another package)
    /// is older than the range the wheel declares.
    #[error("{library} {loaded} is loaded ({path}), but kiln needs {requires}: {library} {loaded} is older than that range allows. Upgrade the library (pip install -U \"{requires}\"), or import kiln before the package that loaded the older copy")]
    LibraryTooOld {
        library: &'static str,
        loaded: String,
        path: String,
        requires: String,
    },
    /// A cuBLAS, cuDNN or NCCL call returned an error status.
    #[error("{library} error in {call}: {message}")]
    Library {
        library: &'static str,
        call: String,
        message: String,
    },
    /// Shapes of the operands do not fit the operation.
    #[error("shape error: {0}")]
    Shape(String),
    /// Element types do not fit the operation.
    #[error("dtype error: {0}")]
    DType(String),
    /// A pointer handed in is not usable device memory of this GPU.
    #[error("memory error: {0}")]
    Memory(String),
    /// An index (e.g. an embedding id) is out of range.
    #[error("index error: {0}")]
    Index(String),
    /// The operation cannot run while its stream captures a CUDA graph (it would wait for the
    /// GPU or read a result back); refused before anything is enqueued, so the capture is
    /// left intact.
    #[error("capture error: {0}")]
    Capture(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn driver(call: &str, e: cudarc::driver::DriverError) -> Error {
        Error::Driver {
            call: call.to_string(),
            message: driver_message(e),
        }
    }
}

/// "CUDA_ERROR_X: description" for a driver error, without panicking on unknown codes.
pub(crate) fn driver_message(e: cudarc::driver::DriverError) -> String {
    let name = e
        .error_name()
        .ok()
        .map(|s| s.to_string_lossy().into_owned());
    let text = e
        .error_string()
        .ok()
        .map(|s| s.to_string_lossy().into_owned());
    match (name, text) {
        (Some(n), Some(t)) => format!("{n}: {t}"),
        (Some(n), None) => n,
        _ => format!("{:?}", e.0),
    }
}
