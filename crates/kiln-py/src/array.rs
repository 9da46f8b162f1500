//! `kiln.Array`: a result in device memory, owned by kiln, handed to torch/cupy/jax zero-copy
//! through DLPack, or copied to the host with `.numpy()`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::device;
use crate::dlpack::{self, Elem};
use crate::errors::IntoPy;

#[pyclass(module = "kiln", name = "Array", frozen)]
pub struct Array {
    pub tensor: Arc<kiln_runtime::Tensor>,
}

pub fn elem_of(d: kiln_runtime::DType) -> Elem {
    match d {
        kiln_runtime::DType::F32 => Elem::F32,
        kiln_runtime::DType::F16 => Elem::F16,
        kiln_runtime::DType::BF16 => Elem::BF16,
        kiln_runtime::DType::I32 => Elem::I32,
        kiln_runtime::DType::I64 => Elem::I64,
    }
}

pub fn dtype_of(e: Elem) -> kiln_runtime::DType {
    match e {
        Elem::F32 => kiln_runtime::DType::F32,
        Elem::F16 => kiln_runtime::DType::F16,
        Elem::BF16 => kiln_runtime::DType::BF16,
        Elem::I32 => kiln_runtime::DType::I32,
        Elem::I64 => kiln_runtime::DType::I64,
    }
}

impl Array {
    pub fn new(t: kiln_runtime::Tensor) -> Array {
        Array {
            tensor: Arc::new(t),
        }
    }
}

#[pymethods]
impl Array {
    /// The shape, as a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor.shape())
    }

    /// The element type's name: "float32", "float16", "bfloat16", "int32" or "int64".
    #[getter]
    fn dtype(&self) -> &'static str {
        self.tensor.dtype().long_name()
    }

    /// The CUDA device ordinal holding the memory.
    #[getter]
    fn device(&self) -> usize {
        self.tensor.device()
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.tensor.nbytes()
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.tensor.shape().len()
    }

    /// The device address of the first element (for debugging and interop checks).
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.tensor.ptr()
    }

    fn __len__(&self) -> PyResult<usize> {
        self.tensor
            .shape()
            .first()
            .copied()
            .ok_or_else(|| crate::errors::type_error("len() of a 0-d kiln.Array"))
    }

    fn __repr__(&self) -> String {
        format!(
            "kiln.Array(shape={:?}, dtype={}, device=cuda:{})",
            self.tensor.shape(),
            self.dtype(),
            self.device()
        )
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::KDL_CUDA, self.tensor.device() as i32)
    }

    /// The stream the array was produced on (its raw handle; 0 = legacy default stream).
    /// Its memory is freed in that stream's order when the last reference goes away.
    #[getter]
    fn stream(&self) -> u64 {
        self.tensor.stream().handle()
    }

    /// DLPack export (array API standard). `stream` is the consumer's stream: None or 1 the
    /// legacy default stream (0 is taken as the legacy stream too), 2 the per-thread default
    /// stream, -1 "no ordering", else a stream handle. Unless it is the stream the array was
    /// produced on (or -1), that stream is made to wait for the producer's work with an event
    /// (on the GPU; the host never waits), as the standard asks of a producer.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        dlpack::check_requested_device(dl_device, self.tensor.device() as i32)?;
        if copy == Some(true) {
            return Err(crate::errors::export_error(
                "kiln.Array.__dlpack__(copy=True) is not supported: kiln.copy(x) makes a device copy",
            ));
        }
        let consumer = match stream {
            Some(dlpack::STREAM_NO_SYNC) => None,
            None | Some(0) => Some(kiln_runtime::Stream::LEGACY),
            Some(s) if s < -1 => {
                return Err(crate::errors::value_error(format!(
                    "__dlpack__: stream {s} is not a CUDA stream (-1, 1, 2 or a handle)"
                )))
            }
            // SAFETY: the consumer names a live stream of this device (DLPack's contract).
            Some(s) => Some(unsafe { kiln_runtime::Stream::from_raw(s as u64) }),
        };
        if let Some(consumer) = consumer {
            if consumer != self.tensor.stream() {
                let gpu = device::gpu(py, self.tensor.device())?.on(consumer);
                let _restore = kiln_runtime::ContextGuard::save();
                gpu.order_after(self.tensor.stream()).py_err(py)?;
            }
        }
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        let t = self.tensor.clone();
        let export = dlpack::Export {
            data: t.ptr(),
            device_id: t.device() as i32,
            elem: elem_of(t.dtype()),
            shape: t.shape().to_vec(),
            owner: t,
        };
        dlpack::export(py, export, versioned)
    }

    /// A numpy array with a host copy of the data (waits for the GPU). bfloat16, which numpy
    /// lacks, comes back as float32 (exactly: every bfloat16 is a float32).
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.tensor.clone();
        crate::streams::refuse_if_capturing(
            py,
            &device::gpu(py, t.device())?,
            "kiln.Array.numpy()",
            "it waits for the GPU; read results after the graph has run",
        )?;
        let mut bytes = crate::device::detach(py, || t.to_host()).py_err(py)?;
        let mut dtype = self.dtype();
        if t.dtype() == kiln_runtime::DType::BF16 {
            bytes = bytes
                .chunks_exact(2)
                .flat_map(|b| ((u16::from_ne_bytes([b[0], b[1]]) as u32) << 16).to_ne_bytes())
                .collect();
            dtype = "float32";
        }
        let np = py.import("numpy").map_err(|e| {
            PyErr::new::<pyo3::exceptions::PyImportError, _>(format!(
                "kiln.Array.numpy() needs numpy: {e}"
            ))
        })?;
        let flat = np.call_method1("frombuffer", (PyBytes::new(py, &bytes), dtype))?;
        flat.call_method1("reshape", (PyTuple::new(py, t.shape())?,))?
            .call_method0("copy")
    }

    /// numpy's conversion hook: `numpy.asarray(kiln_array)` copies to the host.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(crate::errors::value_error(
                "a kiln.Array lives on the GPU: numpy needs a copy (copy=False cannot be honoured)",
            ));
        }
        let a = self.numpy(py)?;
        match dtype {
            Some(d) => a.call_method1("astype", (d,)),
            None => Ok(a),
        }
    }
}
