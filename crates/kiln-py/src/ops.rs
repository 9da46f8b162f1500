//! The Python functions: read every argument through DLPack (device arrays in place, host
//! arrays copied to the device), call kiln-runtime without the GIL, wrap the result.
//! Shapes and dtypes are validated by kiln-runtime before anything is launched.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::array::{dtype_of, Array};
use crate::device;
use crate::dlpack::{self, Imported, Place};
use crate::errors::{raise, IntoPy};

/// The operands of one call, all on one GPU. Holds the producers' capsules and the staged
/// copies of host arrays until the call returns.
pub(crate) struct Operands<'py> {
    gpu: kiln_runtime::Gpu,
    views: Vec<kiln_runtime::View>,
    _imported: Vec<Imported<'py>>,
    _staged: Vec<kiln_runtime::Tensor>,
}

impl<'py> Operands<'py> {
    /// `device`: where host-only operands go (default: device 0).
    pub(crate) fn gather(
        py: Python<'py>,
        args: &[(&str, &Bound<'py, PyAny>)],
        device: Option<usize>,
    ) -> PyResult<Operands<'py>> {
        let imported = args
            .iter()
            .map(|(name, obj)| dlpack::import(obj, name))
            .collect::<PyResult<Vec<_>>>()?;
        let mut ordinal: Option<(usize, &str)> = device.map(|d| (d, "device="));
        for ((name, _), imp) in args.iter().zip(&imported) {
            if let Place::Cuda(id) = imp.place {
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
        }
        let gpu = device::gpu(py, ordinal.map(|(o, _)| o).unwrap_or(0))?;
        let mut views = Vec::with_capacity(imported.len());
        let mut staged = Vec::new();
        for imp in &imported {
            let dtype = dtype_of(imp.elem);
            match imp.place {
                Place::Cuda(_) => {
                    views.push(kiln_runtime::View::new(imp.data, dtype, imp.shape.clone()))
                }
                Place::Host => {
                    let t = {
                        // The copy binds the GPU's context: give the caller theirs back.
                        let _restore = kiln_runtime::ContextGuard::save();
                        kiln_runtime::Tensor::from_host(
                            &gpu,
                            imp.host_bytes(),
                            dtype,
                            imp.shape.clone(),
                        )
                    }
                    .py_err(py)?;
                    views.push(t.view());
                    staged.push(t);
                }
            }
        }
        Ok(Operands {
            gpu,
            views,
            _imported: imported,
            _staged: staged,
        })
    }
}

/// Runs `f(gpu, views)` without the GIL and wraps the tensor it returns.
pub(crate) fn launch<F>(py: Python<'_>, ops: Operands<'_>, f: F) -> PyResult<Array>
where
    F: FnOnce(
            &kiln_runtime::Gpu,
            &[kiln_runtime::View],
        ) -> kiln_runtime::Result<kiln_runtime::Tensor>
        + Send,
{
    let (gpu, views) = (&ops.gpu, &ops.views);
    let t = crate::device::detach(py, || f(gpu, views)).py_err(py)?;
    Ok(Array::new(t))
}

/// out = a + b.
#[pyfunction]
pub fn vecadd<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("a", a), ("b", b)], None)?;
    launch(py, ops, |g, v| g.vecadd(&v[0], &v[1]))
}

/// out = alpha * x + beta * y (math in float32).
#[pyfunction]
#[pyo3(signature = (x, y, alpha = 1.0, beta = 1.0))]
pub fn axpby<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    alpha: f32,
    beta: f32,
) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("x", x), ("y", y)], None)?;
    launch(py, ops, |g, v| g.axpby(&v[0], &v[1], alpha, beta))
}

/// out = silu(gate) * up (the SwiGLU gate).
#[pyfunction]
pub fn silu_mul<'py>(
    py: Python<'py>,
    gate: &Bound<'py, PyAny>,
    up: &Bound<'py, PyAny>,
) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("gate", gate), ("up", up)], None)?;
    launch(py, ops, |g, v| g.silu_mul(&v[0], &v[1]))
}

/// RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight.
#[pyfunction]
#[pyo3(signature = (x, weight, eps = 1e-6))]
pub fn rmsnorm<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    weight: &Bound<'py, PyAny>,
    eps: f32,
) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("x", x), ("weight", weight)], None)?;
    launch(py, ops, |g, v| g.rmsnorm(&v[0], &v[1], eps))
}

/// Numerically stable softmax over the last dimension.
#[pyfunction]
pub fn softmax<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("x", x)], None)?;
    launch(py, ops, |g, v| g.softmax(&v[0]))
}

/// Rotary embedding of x [tokens, heads, head_dim] (rotate-half layout). Token t is at
/// `positions[t]` (an int32/int64 array) or, without positions, at `offset + t`.
#[pyfunction]
#[pyo3(signature = (x, positions = None, *, offset = 0, theta = 10000.0))]
pub fn rope<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    positions: Option<&Bound<'py, PyAny>>,
    offset: i64,
    theta: f32,
) -> PyResult<Array> {
    match positions {
        Some(p) => {
            if offset != 0 {
                return Err(PyValueError::new_err(
                    "rope: give positions or offset, not both",
                ));
            }
            let ops = Operands::gather(py, &[("x", x), ("positions", p)], None)?;
            launch(py, ops, |g, v| {
                g.rope(&v[0], kiln_runtime::Positions::Ids(&v[1]), theta)
            })
        }
        None => {
            let ops = Operands::gather(py, &[("x", x)], None)?;
            launch(py, ops, |g, v| {
                g.rope(&v[0], kiln_runtime::Positions::Offset(offset), theta)
            })
        }
    }
}

/// Embedding lookup: out[..., :] = table[ids[...], :] (ids int32 or int64, any shape).
/// Never waits for the GPU: an id outside [0, vocab) gives a row of zeros.
#[pyfunction]
pub fn embedding<'py>(
    py: Python<'py>,
    table: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyAny>,
) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("table", table), ("ids", ids)], None)?;
    launch(py, ops, |g, v| g.embedding(&v[0], &v[1]))
}

/// embedding, plus IdOutOfRangeError (an IndexError) for an id outside [0, vocab);
/// waits for the GPU (an 8-byte read back) on every call.
#[pyfunction]
pub fn embedding_checked<'py>(
    py: Python<'py>,
    table: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyAny>,
) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("table", table), ("ids", ids)], None)?;
    launch(py, ops, |g, v| g.embedding_checked(&v[0], &v[1]))
}

/// A device-to-device copy (cuMemcpyDtoD) into a new kiln.Array.
#[pyfunction]
pub fn copy<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("x", x)], None)?;
    launch(py, ops, |g, v| g.copy(&v[0]))
}

/// A kiln.Array with the data of x: host arrays are copied to `device` (default 0), device
/// arrays are copied on their own device.
#[pyfunction]
#[pyo3(signature = (x, device = None))]
pub fn asarray<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    device: Option<usize>,
) -> PyResult<Array> {
    let mut ops = Operands::gather(py, &[("x", x)], device)?;
    if let Some(t) = ops._staged.pop() {
        return Ok(Array::new(t));
    }
    launch(py, ops, |g, v| g.copy(&v[0]))
}

/// a @ b through cuBLAS: a [m, k], b [k, n] -> [m, n].
#[cfg(feature = "cublas")]
#[pyfunction]
pub fn matmul<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("a", a), ("b", b)], None)?;
    launch(py, ops, |g, v| g.matmul(&v[0], &v[1]))
}

/// Softmax over the last dimension through cuDNN.
#[cfg(feature = "cudnn")]
#[pyfunction]
pub fn cudnn_softmax<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Array> {
    let ops = Operands::gather(py, &[("x", x)], None)?;
    launch(py, ops, |g, v| g.cudnn_softmax(&v[0]))
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
        .map(|(o, n)| dlpack::import(o, n))
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
    let comm = device::communicator(py, &ordinals)?;
    let views: Vec<kiln_runtime::View> = imported
        .iter()
        .map(|i| kiln_runtime::View::new(i.data, dtype_of(i.elem), i.shape.clone()))
        .collect();
    let refs: Vec<&kiln_runtime::View> = views.iter().collect();
    let outs = crate::device::detach(py, || comm.all_reduce_sum(&refs)).py_err(py)?;
    Ok(outs.into_iter().map(Array::new).collect())
}

/// Number of visible CUDA devices (raises NoDriverError without a driver).
#[pyfunction]
pub fn device_count(py: Python<'_>) -> PyResult<usize> {
    crate::device::detach(py, kiln_runtime::Gpu::device_count).py_err(py)
}

/// Waits until every kiln operation on `device` has finished.
#[pyfunction]
#[pyo3(signature = (device = 0))]
pub fn synchronize(py: Python<'_>, device: usize) -> PyResult<()> {
    let g = device::gpu(py, device)?;
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
