//! kiln_runtime::Error -> the Python exceptions of `kiln._errors` (defined in Python so that,
//! e.g., ShapeError is both a KilnError and a ValueError).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

pub fn to_py(py: Python<'_>, e: kiln_runtime::Error) -> PyErr {
    use kiln_runtime::Error as E;
    let class = match &e {
        E::NoDriver(_) => "NoDriverError",
        E::NoDevice { .. } => "NoDeviceError",
        E::MissingLibrary { .. } => "MissingLibraryError",
        E::Driver { .. } | E::Library { .. } => "CudaError",
        E::Shape(_) => "ShapeError",
        E::DType(_) => "DTypeError",
        E::Memory(_) => "DeviceMemoryError",
        E::Index(_) => "IdOutOfRangeError",
        E::Capture(_) => "CaptureError",
        // A variant kiln-runtime adds later is still a KilnError until it gets its own class.
        #[allow(unreachable_patterns)]
        _ => "KilnError",
    };
    raise(py, class, e.to_string())
}

/// An instance of `kiln._errors.<class>`; RuntimeError if that module cannot be imported.
pub fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    match py.import("kiln._errors").and_then(|m| m.getattr(class)) {
        Ok(cls) => match cls.call1((message.clone(),)) {
            Ok(instance) => PyErr::from_value(instance),
            Err(err) => err,
        },
        Err(_) => PyRuntimeError::new_err(message),
    }
}

/// `?`-friendly: kiln_runtime::Result<T> -> PyResult<T>.
pub trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for kiln_runtime::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// A `kiln._errors.<class>` built with the GIL held (or taken): for the argument checks, which
/// run where no `py` token is at hand.
fn lazy(class: &'static str, message: String) -> PyErr {
    Python::attach(|py| raise(py, class, message))
}

/// Not a DLPack array, not a stream: `kiln.ArgumentTypeError` (a TypeError).
pub fn type_error(message: impl Into<String>) -> PyErr {
    lazy("ArgumentTypeError", message.into())
}

/// A value kiln cannot use: `kiln.ArgumentValueError` (a ValueError).
pub fn value_error(message: impl Into<String>) -> PyErr {
    lazy("ArgumentValueError", message.into())
}

/// An element type kiln has no kernel for: `kiln.DTypeError` (a TypeError).
pub fn dtype_error(message: impl Into<String>) -> PyErr {
    lazy("DTypeError", message.into())
}

/// Not contiguous row-major: `kiln.LayoutError` (a ValueError).
pub fn layout_error(message: impl Into<String>) -> PyErr {
    lazy("LayoutError", message.into())
}

/// A DLPack export kiln cannot honour: `kiln.ExportError` (a BufferError).
pub fn export_error(message: impl Into<String>) -> PyErr {
    lazy("ExportError", message.into())
}

/// Misuse of kiln's own objects: `kiln.KilnError`.
pub fn kiln_error(message: impl Into<String>) -> PyErr {
    lazy("KilnError", message.into())
}

/// A failed CUDA call outside kiln-runtime: `kiln.CudaError`.
pub fn cuda_error(message: impl Into<String>) -> PyErr {
    lazy("CudaError", message.into())
}
