//! `kiln.rs`: the kernels written in Rust (kernels/rust) with the same DLPack contract as
//! their C++ twins at the top level (`kiln.rs.vecadd` beside `kiln.vecadd`): the same operand
//! import, the same validation, the same output `kiln.Array`.

use pyo3::prelude::*;

use crate::ops::{Call, Runs};

/// out = a + b, by the Rust kernel.
#[pyfunction(name = "vecadd")]
#[pyo3(signature = (a, b, *, out = None, stream = None))]
pub fn rs_vecadd<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let call = Call::gather(py, &[("a", a), ("b", b)], out, stream, None, Runs::OnStream)?;
    call.run(
        py,
        |g, v| g.rs().vecadd(&v[0], &v[1]),
        |g, v, o| g.rs().vecadd_into(&v[0], &v[1], o),
    )
}

/// out = silu(gate) * up, by the Rust kernel.
#[pyfunction(name = "silu_mul")]
#[pyo3(signature = (gate, up, *, out = None, stream = None))]
pub fn rs_silu_mul<'py>(
    py: Python<'py>,
    gate: &Bound<'py, PyAny>,
    up: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let call = Call::gather(
        py,
        &[("gate", gate), ("up", up)],
        out,
        stream,
        None,
        Runs::OnStream,
    )?;
    call.run(
        py,
        |g, v| g.rs().silu_mul(&v[0], &v[1]),
        |g, v, o| g.rs().silu_mul_into(&v[0], &v[1], o),
    )
}

/// RMSNorm over the last dimension, by the Rust kernel.
#[pyfunction(name = "rmsnorm")]
#[pyo3(signature = (x, weight, eps = 1e-6, *, out = None, stream = None))]
pub fn rs_rmsnorm<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    weight: &Bound<'py, PyAny>,
    eps: f32,
    out: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let call = Call::gather(
        py,
        &[("x", x), ("weight", weight)],
        out,
        stream,
        None,
        Runs::OnStream,
    )?;
    call.run(
        py,
        |g, v| g.rs().rmsnorm(&v[0], &v[1], eps),
        |g, v, o| g.rs().rmsnorm_into(&v[0], &v[1], eps, o),
    )
}

/// Numerically stable softmax over the last dimension, by the Rust kernel.
#[pyfunction(name = "softmax")]
#[pyo3(signature = (x, *, out = None, stream = None))]
pub fn rs_softmax<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let call = Call::gather(py, &[("x", x)], out, stream, None, Runs::OnStream)?;
    call.run(
        py,
        |g, v| g.rs().softmax(&v[0]),
        |g, v, o| g.rs().softmax_into(&v[0], o),
    )
}

/// Adds the `rs` submodule to `kiln._kiln` (re-exported as `kiln.rs`).
pub fn add_submodule(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let rs = PyModule::new(parent.py(), "rs")?;
    rs.add(
        "__doc__",
        "kiln's kernels written in Rust (kernels/rust): vecadd, silu_mul, rmsnorm, softmax — the same DLPack contract and results as the C++ kernels at the top level.",
    )?;
    rs.add_function(wrap_pyfunction!(rs_vecadd, &rs)?)?;
    rs.add_function(wrap_pyfunction!(rs_silu_mul, &rs)?)?;
    rs.add_function(wrap_pyfunction!(rs_rmsnorm, &rs)?)?;
    rs.add_function(wrap_pyfunction!(rs_softmax, &rs)?)?;
    parent.add_submodule(&rs)
}
