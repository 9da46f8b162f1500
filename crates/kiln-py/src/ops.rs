//! The Python functions: read every argument (kiln arrays and torch tensors directly, anything
//! else through DLPack; host arrays are copied to the device), pick the stream
//! (crate::streams), order the producers' pending work before it, launch, wrap the result.
//! Shapes and dtypes are validated by kiln-runtime before anything is launched.
//!
//! The per-call path is kept short (docs/streams.md, "Per-call cost"): no GIL release around
//! asynchronous launches, no pointer query for producer-declared CUDA memory, no Python-level
//! `__dlpack__` for torch tensors on the stream torch is using.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use kiln_runtime::{ContextGuard, Gpu, Stream, Tensor, View};

use crate::array::{dtype_of, Array};
use crate::device;
use crate::dlpack::{self, Imported, Place};
use crate::errors::{raise, IntoPy};
use crate::streams;

/// One argument as it arrived.
enum Source<'py> {
    /// A kiln.Array: its tensor, and the stream it was produced on.
    Kiln(Arc<Tensor>),
    /// A torch tensor, read through `torch._C._to_dlpack` (ordered by kiln, see `gather`).
    Torch(Imported<'py>),
    /// Any other DLPack producer's CUDA array, imported once the stream is known.
    Other(Bound<'py, PyAny>),
    /// A host array (any producer), already read: it is copied on the chosen stream.
    Host(Imported<'py>),
}

/// The operands of one call, all on one GPU, and the handle that runs it (on its stream).
/// Holds the producers' capsules and the staged copies of host arrays until the call returns.
pub(crate) struct Call<'py> {
    gpu: Gpu,
    views: Vec<View>,
    out: Option<(View, Bound<'py, PyAny>)>,
    _imported: Vec<Imported<'py>>,
    _staged: Vec<Tensor>,
    _kiln: Vec<Arc<Tensor>>,
}

/// Where the call's work goes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runs {
    /// On the chosen stream (every kiln kernel).
    OnStream,
    /// On the legacy default stream, fenced after the chosen one (cuBLAS, cuDNN: their handles
    /// live there); refused while the chosen stream captures a graph.
    Legacy(&'static str),
}

impl<'py> Call<'py> {
    /// `device`: where host-only operands go (default: device 0).
    pub(crate) fn gather(
        py: Python<'py>,
        args: &[(&str, &Bound<'py, PyAny>)],
        out: Option<&Bound<'py, PyAny>>,
        stream: Option<&Bound<'py, PyAny>>,
        device: Option<usize>,
        runs: Runs,
    ) -> PyResult<Call<'py>> {
        let explicit = streams::explicit(stream)?;
        let torch = streams::torch(py);
        let mut all: Vec<(&str, &Bound<'py, PyAny>)> = args.to_vec();
        if let Some(o) = out {
            all.push(("out", o));
        }
        // Classify, and find the device from the first CUDA operand.
        let mut sources = Vec::with_capacity(all.len());
        let mut ordinal: Option<(usize, &str)> = device.map(|d| (d, "device="));
        let mut any_torch_cuda = false;
        let mut any_cupy = false;
        let mut kiln_stream: Option<Stream> = None;
        for (name, obj) in &all {
            let (source, place) = if let Ok(a) = obj.cast::<Array>() {
                let t = a.get().tensor.clone();
                kiln_stream.get_or_insert(t.stream());
                let d = t.device() as i32;
                (Source::Kiln(t), Some(d))
            } else if let Some(t) =
                torch.filter(|t| obj.is_instance(t.tensor.bind(py)).unwrap_or(false))
            {
                let capsule = t.to_dlpack.bind(py).call1((*obj,))?;
                let imp = dlpack::read_capsule(capsule, obj, name)?;
                let d = match imp.place {
                    Place::Cuda(d) => {
                        any_torch_cuda = true;
                        Some(d)
                    }
                    Place::Host => None,
                };
                (Source::Torch(imp), d)
            } else {
                match dlpack::cuda_device_of(obj, name)? {
                    Some(d) => {
                        if obj
                            .get_type()
                            .module()
                            .map(|m| m.to_string().starts_with("cupy"))
                            .unwrap_or(false)
                        {
                            any_cupy = true;
                        }
                        (Source::Other((*obj).clone()), Some(d))
                    }
                    // Host memory: read now (dtype, layout errors before any GPU work).
                    None => (
                        Source::Host(dlpack::import(obj, name, dlpack::STREAM_LEGACY_DEFAULT)?),
                        None,
                    ),
                }
            };
            if let Some(id) = place {
                let id = id as usize;
                match ordinal {
                    None => ordinal = Some((id, name)),
                    Some((o, first)) if o != id => {
                        return Err(raise(
                            py,
                            "DeviceMemoryError",
                            format!("{name} is on cuda:{id} but {first} is on cuda:{o}; kiln does not move data between GPUs"),
                        ))
                    }
                    Some(_) => {}
                }
            }
            sources.push(source);
        }
        let ordinal = ordinal.map(|(o, _)| o).unwrap_or(0);
        let base = device::gpu(py, ordinal)?;
        let torch_stream = match (torch, any_torch_cuda) {
            (Some(t), true) => Some(t.current_stream(py, ordinal)?),
            _ => None,
        };
        let chosen = match (explicit, torch_stream) {
            (Some(s), _) => s,
            (None, Some(t)) => t,
            // kiln arrays follow their producer (kiln): the stream the first one was made on,
            // so a chain of kiln ops stays on one stream (and inside a capture).
            (None, None) => match kiln_stream {
                Some(k) => k,
                None if any_cupy => streams::cupy_current_stream(py)?.unwrap_or(Stream::LEGACY),
                None => Stream::LEGACY,
            },
        };
        let gpu = base.on(chosen).trusting_pointers();
        let _restore = ContextGuard::save();
        // Order every producer's pending work before the chosen stream.
        let mut views = Vec::with_capacity(sources.len());
        let mut imported = Vec::new();
        let mut staged = Vec::new();
        let mut kiln = Vec::new();
        let mut torch_ordered = false;
        for ((name, _), source) in all.iter().zip(sources) {
            let imp = match source {
                Source::Kiln(t) => {
                    gpu.order_after(t.stream()).py_err(py)?;
                    views.push(t.view());
                    kiln.push(t);
                    continue;
                }
                Source::Torch(imp) => {
                    if let (Place::Cuda(_), Some(t), false) =
                        (imp.place, torch_stream, torch_ordered)
                    {
                        gpu.order_after(t).py_err(py)?;
                        torch_ordered = true;
                    }
                    imp
                }
                Source::Other(obj) => dlpack::import(&obj, name, chosen.dlpack_value())?,
                Source::Host(imp) => imp,
            };
            let dtype = dtype_of(imp.elem);
            match imp.place {
                Place::Cuda(_) => views.push(View::new(imp.data, dtype, imp.shape.clone())),
                Place::Host if *name == "out" => {
                    return Err(raise(
                        py,
                        "DeviceMemoryError",
                        format!(
                            "out must be a CUDA array (on cuda:{ordinal}); it is in host memory"
                        ),
                    ))
                }
                Place::Host => {
                    if staged.is_empty() {
                        streams::refuse_if_capturing(
                            py,
                            &gpu,
                            "copying a host array to the GPU",
                            "a copy from pageable host memory cannot be captured; copy it before capturing",
                        )?;
                    }
                    let t = Tensor::from_host(&gpu, imp.host_bytes(), dtype, imp.shape.clone())
                        .py_err(py)?;
                    views.push(t.view());
                    staged.push(t);
                }
            }
            imported.push(imp);
        }
        let gpu = match runs {
            Runs::OnStream => gpu,
            Runs::Legacy(op) => {
                chosen
                    .refuse_capture(op, "it runs on the legacy default stream (its library handle's), which cannot join the capture")
                    .py_err(py)?;
                let legacy = base.trusting_pointers();
                legacy.order_after(chosen).py_err(py)?;
                legacy
            }
        };
        let out = out.map(|o| (views.pop().expect("out view"), o.clone()));
        Ok(Call {
            gpu,
            views,
            out,
            _imported: imported,
            _staged: staged,
            _kiln: kiln,
        })
    }

    /// Runs the op: into the caller's `out` when given (returns `out` itself), else into a
    /// fresh kiln.Array. Launches are asynchronous: the GIL stays held (a release and
    /// re-acquire would cost more than the launch).
    pub(crate) fn run<F, G>(self, py: Python<'py>, alloc: F, into: G) -> PyResult<Py<PyAny>>
    where
        F: FnOnce(&Gpu, &[View]) -> kiln_runtime::Result<Tensor>,
        G: FnOnce(&Gpu, &[View], &View) -> kiln_runtime::Result<()>,
    {
        let _restore = ContextGuard::save();
        match &self.out {
            None => {
                let t = alloc(&self.gpu, &self.views).py_err(py)?;
                Ok(Py::new(py, Array::new(t))?.into_any())
            }
            Some((view, obj)) => {
                into(&self.gpu, &self.views, view).py_err(py)?;
                Ok(obj.clone().unbind())
            }
        }
    }

    /// Runs an op that has no `out=` form and may wait (without the GIL).
    fn run_blocking<F>(self, py: Python<'py>, f: F) -> PyResult<Array>
    where
        F: FnOnce(&Gpu, &[View]) -> kiln_runtime::Result<Tensor> + Send,
    {
        let (gpu, views) = (&self.gpu, &self.views);
        let t = device::detach(py, || f(gpu, views)).py_err(py)?;
        Ok(Array::new(t))
    }
}

/// One Python function per kernel op, for the C++ kernels (`kiln.NAME`) and their Rust twins
/// (`kiln.rs.NAME`, `[rs]`) alike: the operands (gathered: kiln arrays, torch, DLPack, host
/// arrays), then the scalars, keyword-only `out=` and `stream=`; runs `op` on the chosen
/// stream, or `op_into` with `out`.
macro_rules! kernel_op {
    (
        $(#[$doc:meta])*
        fn $fname:ident $(as $pyname:literal)?
            ($($arg:ident),+ $(; $($param:ident: $pty:ty = $default:tt),+)?)
            => $([$set:ident])? $op:ident / $into:ident
    ) => {
        $(#[$doc])*
        #[pyfunction$((name = $pyname))?]
        #[pyo3(signature = ($($arg,)+ $($($param = $default,)+)? *, out = None, stream = None))]
        pub fn $fname<'py>(
            py: Python<'py>,
            $($arg: &Bound<'py, PyAny>,)+
            $($($param: $pty,)+)?
            out: Option<&Bound<'py, PyAny>>,
            stream: Option<&Bound<'py, PyAny>>,
        ) -> PyResult<Py<PyAny>> {
            let operands = [$((stringify!($arg), $arg)),+];
            let call = $crate::ops::Call::gather(py, &operands, out, stream, None, $crate::ops::Runs::OnStream)?;
            call.run(
                py,
                |g, v| {
                    let [$($arg),+] = v else { unreachable!("one view per operand") };
                    g$(.$set())?.$op($($arg,)+ $($($param),+)?)
                },
                |g, v, o| {
                    let [$($arg),+] = v else { unreachable!("one view per operand") };
                    g$(.$set())?.$into($($arg,)+ $($($param,)+)? o)
                },
            )
        }
    };
}
pub(crate) use kernel_op;

kernel_op!(
    /// out = a + b.
    fn vecadd(a, b) => vecadd / vecadd_into
);

kernel_op!(
    /// out = alpha * x + beta * y (math in float32).
    fn axpby(x, y; alpha: f32 = 1.0, beta: f32 = 1.0) => axpby / axpby_into
);

kernel_op!(
    /// out = silu(gate) * up (the SwiGLU gate).
    fn silu_mul(gate, up) => silu_mul / silu_mul_into
);

kernel_op!(
    /// RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight.
    fn rmsnorm(x, weight; eps: f32 = 1e-6) => rmsnorm / rmsnorm_into
);

kernel_op!(
    /// Numerically stable softmax over the last dimension.
    fn softmax(x) => softmax / softmax_into
);

/// Rotary embedding of x [tokens, heads, head_dim] (rotate-half layout). Token t is at
/// `positions[t]` (an int32/int64 array) or, without positions, at `offset + t`.
#[pyfunction]
#[pyo3(signature = (x, positions = None, *, offset = 0, theta = 10000.0, out = None, stream = None))]
pub fn rope<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    positions: Option<&Bound<'py, PyAny>>,
    offset: i64,
    theta: f32,
    out: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Py<PyAny>> {
    use kiln_runtime::Positions;
    match positions {
        Some(p) => {
            if offset != 0 {
                return Err(crate::errors::value_error(
                    "rope: give positions or offset, not both",
                ));
            }
            let call = Call::gather(
                py,
                &[("x", x), ("positions", p)],
                out,
                stream,
                None,
                Runs::OnStream,
            )?;
            call.run(
                py,
                |g, v| g.rope(&v[0], Positions::Ids(&v[1]), theta),
                |g, v, o| g.rope_into(&v[0], Positions::Ids(&v[1]), theta, o),
            )
        }
        None => {
            let call = Call::gather(py, &[("x", x)], out, stream, None, Runs::OnStream)?;
            call.run(
                py,
                |g, v| g.rope(&v[0], Positions::Offset(offset), theta),
                |g, v, o| g.rope_into(&v[0], Positions::Offset(offset), theta, o),
            )
        }
    }
}

kernel_op!(
    /// Embedding lookup: out[..., :] = table[ids[...], :] (ids int32 or int64, any shape).
    /// Never waits for the GPU: an id outside [0, vocab) gives a row of zeros.
    fn embedding(table, ids) => embedding / embedding_into
);

/// embedding, plus IdOutOfRangeError (an IndexError) for an id outside [0, vocab);
/// waits for the GPU (an 8-byte read back) on every call; CaptureError under graph capture.
#[pyfunction]
#[pyo3(signature = (table, ids, *, stream = None))]
pub fn embedding_checked<'py>(
    py: Python<'py>,
    table: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Array> {
    let call = Call::gather(
        py,
        &[("table", table), ("ids", ids)],
        None,
        stream,
        None,
        Runs::OnStream,
    )?;
    call.run_blocking(py, |g, v| g.embedding_checked(&v[0], &v[1]))
}

/// A device-to-device copy (cuMemcpyDtoDAsync) into a new kiln.Array.
#[pyfunction]
#[pyo3(signature = (x, *, stream = None))]
pub fn copy<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Array> {
    let call = Call::gather(py, &[("x", x)], None, stream, None, Runs::OnStream)?;
    let _restore = ContextGuard::save();
    let t = call.gpu.copy(&call.views[0]).py_err(py)?;
    Ok(Array::new(t))
}

/// A kiln.Array with the data of x: host arrays are copied to `device` (default 0), device
/// arrays are copied on their own device.
#[pyfunction]
#[pyo3(signature = (x, device = None, *, stream = None))]
pub fn asarray<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    device: Option<usize>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Array> {
    let mut call = Call::gather(py, &[("x", x)], None, stream, device, Runs::OnStream)?;
    if let Some(t) = call._staged.pop() {
        return Ok(Array::new(t));
    }
    let _restore = ContextGuard::save();
    let t = call.gpu.copy(&call.views[0]).py_err(py)?;
    Ok(Array::new(t))
}

/// a @ b through cuBLAS: a [m, k], b [k, n] -> [m, n].
#[cfg(feature = "cublas")]
#[pyfunction]
#[pyo3(signature = (a, b, *, stream = None))]
pub fn matmul<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Array> {
    let call = Call::gather(
        py,
        &[("a", a), ("b", b)],
        None,
        stream,
        None,
        Runs::Legacy("matmul"),
    )?;
    call.run_blocking(py, |g, v| g.matmul(&v[0], &v[1]))
}

/// Softmax over the last dimension through cuDNN.
#[cfg(feature = "cudnn")]
#[pyfunction]
#[pyo3(signature = (x, *, stream = None))]
pub fn cudnn_softmax<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Array> {
    let call = Call::gather(
        py,
        &[("x", x)],
        None,
        stream,
        None,
        Runs::Legacy("cudnn_softmax"),
    )?;
    call.run_blocking(py, |g, v| g.cudnn_softmax(&v[0]))
}

/// NCCL all-reduce (sum) across GPUs: one CUDA array per device, all the same shape and
/// dtype; returns one new array per device, each holding the sum. One array (one GPU) works.
#[cfg(feature = "nccl")]
#[pyfunction]
pub fn all_reduce_sum<'py>(
    py: Python<'py>,
    inputs: Vec<Bound<'py, PyAny>>,
) -> PyResult<Vec<Array>> {
    if inputs.is_empty() {
        return Err(raise(py, "ShapeError", "all_reduce_sum: no inputs".into()));
    }
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("inputs[{i}]")).collect();
    let imported = inputs
        .iter()
        .zip(&names)
        .map(|(o, n)| dlpack::import(o, n, dlpack::STREAM_LEGACY_DEFAULT))
        .collect::<PyResult<Vec<_>>>()?;
    let mut ordinals = Vec::with_capacity(imported.len());
    for (imp, name) in imported.iter().zip(&names) {
        match imp.place {
            Place::Cuda(id) => ordinals.push(id as usize),
            Place::Host => {
                return Err(raise(
                    py,
                    "DeviceMemoryError",
                    format!(
                        "all_reduce_sum: {name} is in host memory; give one CUDA array per GPU"
                    ),
                ))
            }
        }
    }
    streams::refuse_if_capturing(
        py,
        &device::gpu(py, ordinals[0])?,
        "all_reduce_sum",
        "NCCL runs on the legacy default streams here, which cannot join a capture",
    )?;
    let comm = device::communicator(py, &ordinals)?;
    let views: Vec<kiln_runtime::View> = imported
        .iter()
        .map(|i| kiln_runtime::View::new(i.data, dtype_of(i.elem), i.shape.clone()))
        .collect();
    let refs: Vec<&kiln_runtime::View> = views.iter().collect();
    let outs = crate::device::detach(py, || comm.all_reduce_sum(&refs)).py_err(py)?;
    Ok(outs.into_iter().map(Array::new).collect())
}

/// Number of visible CUDA devices: 0 without a driver or without a device (as
/// `torch.cuda.device_count()`); other driver failures raise.
#[pyfunction]
pub fn device_count(py: Python<'_>) -> PyResult<usize> {
    match crate::device::detach(py, kiln_runtime::Gpu::device_count) {
        Ok(n) => Ok(n),
        Err(kiln_runtime::Error::NoDriver(_)) => Ok(0),
        // cuInit answers CUDA_ERROR_NO_DEVICE when the driver sees no GPU.
        Err(e) if e.to_string().contains("CUDA_ERROR_NO_DEVICE") => Ok(0),
        Err(e) => Err(crate::errors::to_py(py, e)),
    }
}

/// Waits until all work on `device` has finished (every stream of its context). Raises
/// CaptureError while the current stream (kiln.stream's, else torch's) captures a graph.
#[pyfunction]
#[pyo3(signature = (device = 0))]
pub fn synchronize(py: Python<'_>, device: usize) -> PyResult<()> {
    let g = device::gpu(py, device)?;
    let current = match streams::explicit(None)? {
        Some(s) => Some(s),
        None => match streams::torch(py) {
            Some(t) => t.current_stream(py, device).ok(),
            None => None,
        },
    };
    if let Some(s) = current {
        let _restore = ContextGuard::save();
        g.on(s).context().bind_to_thread().ok();
        s.refuse_capture(
            "kiln.synchronize",
            "waiting for the GPU would invalidate the capture",
        )
        .py_err(py)?;
    }
    crate::device::detach(py, || g.synchronize()).py_err(py)
}

/// {"ordinal", "name", "sm_count", "compute_capability"} of a device.
#[pyfunction]
#[pyo3(signature = (device = 0))]
pub fn device_info(py: Python<'_>, device: usize) -> PyResult<Bound<'_, PyDict>> {
    let g = device::gpu(py, device)?;
    let d = PyDict::new(py);
    d.set_item("ordinal", g.ordinal())?;
    d.set_item("name", g.name())?;
    d.set_item("sm_count", g.sm_count())?;
    d.set_item("compute_capability", g.compute_capability().py_err(py)?)?;
    Ok(d)
}
