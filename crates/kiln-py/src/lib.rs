//! `kiln._kiln`: the extension module of the `kiln` wheel (python/kiln re-exports it).
//!
//! No CUDA library is linked: kiln-runtime opens the driver (`libcuda.so.1`) and cuBLAS,
//! cuDNN, NCCL at run time, so `import kiln` works on any machine and GPU calls without a
//! driver raise `kiln.NoDriverError`.

mod array;
mod build_info;
mod device;
mod dlpack;
mod errors;
mod ops;
mod rs_ops;
mod streams;

use pyo3::prelude::*;

#[pymodule]
fn _kiln(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<array::Array>()?;
    m.add_class::<streams::StreamScope>()?;
    m.add_function(wrap_pyfunction!(streams::stream, m)?)?;
    m.add_function(wrap_pyfunction!(streams::current_stream, m)?)?;
    m.add_function(wrap_pyfunction!(build_info::build_info, m)?)?;
    m.add_function(wrap_pyfunction!(build_info::_loaded_libraries, m)?)?;
    m.add_function(wrap_pyfunction!(ops::vecadd, m)?)?;
    m.add_function(wrap_pyfunction!(ops::axpby, m)?)?;
    m.add_function(wrap_pyfunction!(ops::silu_mul, m)?)?;
    m.add_function(wrap_pyfunction!(ops::rmsnorm, m)?)?;
    m.add_function(wrap_pyfunction!(ops::softmax, m)?)?;
    m.add_function(wrap_pyfunction!(ops::rope, m)?)?;
    m.add_function(wrap_pyfunction!(ops::embedding, m)?)?;
    m.add_function(wrap_pyfunction!(ops::embedding_checked, m)?)?;
    m.add_function(wrap_pyfunction!(ops::copy, m)?)?;
    m.add_function(wrap_pyfunction!(ops::asarray, m)?)?;
    #[cfg(feature = "cublas")]
    m.add_function(wrap_pyfunction!(ops::matmul, m)?)?;
    #[cfg(feature = "cudnn")]
    m.add_function(wrap_pyfunction!(ops::cudnn_softmax, m)?)?;
    #[cfg(feature = "nccl")]
    m.add_function(wrap_pyfunction!(ops::all_reduce_sum, m)?)?;
    rs_ops::add_submodule(m)?;
    m.add_function(wrap_pyfunction!(ops::device_count, m)?)?;
    m.add_function(wrap_pyfunction!(ops::synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(ops::device_info, m)?)?;
    Ok(())
}
