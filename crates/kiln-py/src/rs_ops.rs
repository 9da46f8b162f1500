//! `kiln.rs`: the kernels written in Rust (kernels/rust) with the same DLPack contract as
//! their C++ twins at the top level (`kiln.rs.vecadd` beside `kiln.vecadd`): the same
//! `kernel_op!` wrapper (operand import, validation, output `kiln.Array`) over `gpu.rs()`.

use pyo3::prelude::*;

use crate::ops::kernel_op;

kernel_op!(
    /// out = a + b, by the Rust kernel.
    fn rs_vecadd as "vecadd" (a, b) => [rs] vecadd / vecadd_into
);

kernel_op!(
    /// out = silu(gate) * up, by the Rust kernel.
    fn rs_silu_mul as "silu_mul" (gate, up) => [rs] silu_mul / silu_mul_into
);

kernel_op!(
    /// RMSNorm over the last dimension, by the Rust kernel.
    fn rs_rmsnorm as "rmsnorm" (x, weight; eps: f32 = 1e-6) => [rs] rmsnorm / rmsnorm_into
);

kernel_op!(
    /// Numerically stable softmax over the last dimension, by the Rust kernel.
    fn rs_softmax as "softmax" (x) => [rs] softmax / softmax_into
);

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
