//! Which CUDA stream a kiln call runs on (docs/streams.md has the rules and why):
//! 1. the call's `stream=` argument;
//! 2. else the innermost `with kiln.stream(s):` block of this thread;
//! 3. else the producer's stream: torch's current stream of the inputs' device when any input
//!    is a torch tensor, else the stream the first kiln.Array input was produced on, else
//!    cupy's current stream when any input is a cupy array;
//! 4. else the legacy default stream.
//!
//! A stream is given as a raw handle (int) or an object with the CUDA stream protocol:
//! `__cuda_stream__` (a method or attribute giving `(version, handle)` or a handle), or a
//! `cuda_stream` (torch) or `ptr` (cupy) attribute.

use std::cell::RefCell;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};

use kiln_runtime::Stream;

thread_local! {
    /// The `kiln.stream(...)` blocks open on this thread (None: "follow the producer").
    static SCOPES: RefCell<Vec<Option<Stream>>> = const { RefCell::new(Vec::new()) };
}

/// The stream handle an object names, or None for Python `None`.
pub fn parse(obj: &Bound<'_, PyAny>) -> PyResult<Option<Stream>> {
    if obj.is_none() {
        return Ok(None);
    }
    let handle = if let Ok(h) = obj.extract::<i128>() {
        h
    } else if let Ok(proto) = obj.getattr("__cuda_stream__") {
        let value = if proto.is_callable() {
            proto.call0()?
        } else {
            proto
        };
        match value.cast::<PyTuple>() {
            Ok(t) if t.len() == 2 => t.get_item(1)?.extract::<i128>()?,
            Ok(_) => {
                return Err(crate::errors::type_error(
                    "stream: __cuda_stream__ must give (version, handle)",
                ))
            }
            Err(_) => value.extract::<i128>()?,
        }
    } else if let Ok(h) = obj.getattr("cuda_stream") {
        h.extract::<i128>()?
    } else if let Ok(h) = obj.getattr("ptr") {
        h.extract::<i128>()?
    } else {
        return Err(crate::errors::type_error(format!(
            "stream: expected a CUDA stream handle (int) or a stream object (__cuda_stream__, \
             .cuda_stream as torch has, .ptr as cupy has), got {}",
            obj.get_type().name()?
        )));
    };
    if !(0..=u64::MAX as i128).contains(&handle) {
        return Err(crate::errors::value_error(format!(
            "stream: {handle} is not a CUDA stream handle (0 or 1: legacy default stream, 2: per-thread default stream, else a CUstream address)"
        )));
    }
    // SAFETY: the caller hands kiln a live stream of the device the op runs on and keeps it
    // alive while kiln work or memory is on it (docs/streams.md); the driver rejects handles
    // of other contexts at launch.
    Ok(Some(unsafe { Stream::from_raw(handle as u64) }))
}

/// The stream the call asked for: its `stream=` argument, else this thread's innermost
/// `kiln.stream(...)` block; None: follow the producer.
pub fn explicit(arg: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Stream>> {
    if let Some(a) = arg {
        if let Some(s) = parse(a)? {
            return Ok(Some(s));
        }
    }
    Ok(SCOPES.with(|s| s.borrow().last().copied().flatten()))
}

/// `with kiln.stream(s): ...` — every kiln call inside the block (on this thread) runs on `s`
/// unless it passes its own `stream=`. `kiln.stream(None)` restores the default rule inside.
#[pyclass(module = "kiln", name = "StreamScope")]
pub struct StreamScope {
    stream: Option<Stream>,
    entered: bool,
}

#[pymethods]
impl StreamScope {
    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        if slf.entered {
            return Err(crate::errors::kiln_error(
                "kiln.stream(...) block entered twice",
            ));
        }
        slf.entered = true;
        let s = slf.stream;
        SCOPES.with(|v| v.borrow_mut().push(s));
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, PyTuple>) -> bool {
        if self.entered {
            SCOPES.with(|v| v.borrow_mut().pop());
            self.entered = false;
        }
        false
    }

    /// The raw handle this block runs kiln on (None: the default rule).
    #[getter]
    fn handle(&self) -> Option<u64> {
        self.stream.map(|s| s.handle())
    }
}

/// `kiln.stream(s)`: a context manager that makes `s` the stream of kiln calls in its block.
#[pyfunction]
#[pyo3(signature = (stream))]
pub fn stream(stream: &Bound<'_, PyAny>) -> PyResult<StreamScope> {
    Ok(StreamScope {
        stream: parse(stream)?,
        entered: false,
    })
}

/// The stream set by the innermost `kiln.stream(...)` block of this thread (its raw handle;
/// 0 = legacy default stream), or None when calls follow their inputs' producer.
#[pyfunction]
pub fn current_stream() -> Option<u64> {
    SCOPES.with(|s| s.borrow().last().copied().flatten().map(|s| s.handle()))
}

/// torch's pieces kiln uses on every call with torch inputs, looked up once (after torch was
/// imported by the caller; kiln never imports torch itself).
pub struct Torch {
    pub tensor: Py<PyType>,
    /// `torch._C._to_dlpack`: the capsule without `Tensor.__dlpack__`'s Python-level stream
    /// handling (kiln orders streams itself: [`kiln_runtime::Gpu::order_after`]).
    pub to_dlpack: Py<PyAny>,
    /// `torch._C._cuda_getCurrentRawStream(device)`: the current stream's handle as an int.
    pub raw_stream: Py<PyAny>,
}

static TORCH: PyOnceLock<Torch> = PyOnceLock::new();

/// torch's hooks, when the process has imported torch (with CUDA support) already.
pub fn torch(py: Python<'_>) -> Option<&'static Torch> {
    if let Some(t) = TORCH.get(py) {
        return Some(t);
    }
    let modules = py.import("sys").ok()?.getattr("modules").ok()?;
    let torch = modules.get_item("torch").ok()?;
    let c = torch.getattr("_C").ok()?;
    let t = Torch {
        tensor: torch
            .getattr("Tensor")
            .ok()?
            .cast_into::<PyType>()
            .ok()?
            .unbind(),
        to_dlpack: c.getattr("_to_dlpack").ok()?.unbind(),
        raw_stream: c.getattr("_cuda_getCurrentRawStream").ok()?.unbind(),
    };
    Some(TORCH.get_or_init(py, || t))
}

impl Torch {
    /// torch's current stream on CUDA device `device`.
    pub fn current_stream(&self, py: Python<'_>, device: usize) -> PyResult<Stream> {
        let h: u64 = self.raw_stream.bind(py).call1((device,))?.extract()?;
        // SAFETY: a stream torch created on that device (torch never destroys its streams).
        Ok(unsafe { Stream::from_raw(h) })
    }
}

/// cupy's current stream (on its current device), when cupy is imported.
pub fn cupy_current_stream(py: Python<'_>) -> PyResult<Option<Stream>> {
    let modules = py.import("sys")?.getattr("modules")?;
    let Ok(cupy) = modules.get_item("cupy") else {
        return Ok(None);
    };
    let s = cupy
        .getattr("cuda")?
        .getattr("get_current_stream")?
        .call0()?;
    parse(&s)
}

/// CaptureError when the stream the caller is working on — this thread's `kiln.stream(...)`
/// block, else torch's current stream of `device` — is capturing a CUDA graph. For calls that
/// wait for the GPU or copy from pageable host memory: in torch's (global) capture mode such a
/// call invalidates the capture even when it uses another stream, so it is refused first.
pub fn refuse_if_capturing(
    py: Python<'_>,
    gpu: &kiln_runtime::Gpu,
    op: &str,
    why: &str,
) -> PyResult<()> {
    use crate::errors::IntoPy;
    let mut candidates = Vec::with_capacity(2);
    if let Some(s) = explicit(None)? {
        candidates.push(s);
    }
    if let Some(t) = torch(py) {
        if let Ok(s) = t.current_stream(py, gpu.ordinal()) {
            candidates.push(s);
        }
    }
    let _restore = kiln_runtime::ContextGuard::save();
    gpu.context()
        .bind_to_thread()
        .map_err(|e| crate::errors::cuda_error(format!("cuCtxSetCurrent: {e:?}")))?;
    for s in candidates {
        s.refuse_capture(op, why).py_err(py)?;
    }
    Ok(())
}
