//! A tiny PyO3 binding over kernels built by kiln-build: the fatbin (in `.nv_fatbin`, where
//! `kiln audit` and cuobjdump look), the build manifest (in `.kiln_manifest`) and the ABI types.

use pyo3::prelude::*;

// The C ABI structs of kernels/include (`abi`), every target of the matrix in `.nv_fatbin`
// (`fatbin()`, 8-byte aligned as `cuModuleLoadData` requires) and the build manifest in
// `.kiln_manifest` (`MANIFEST_JSON`), so `kiln audit` compares it with the fatbin it re-reads.
kiln_embed::abi!();
kiln_embed::embed!();

/// The build manifest kiln-build wrote (JSON): the kernels each target holds, tool versions.
#[pyfunction]
fn build_manifest() -> &'static str {
    MANIFEST_JSON
}

/// The fatbin's size in bytes (load it with the CUDA driver API, e.g. cudarc, to launch).
#[pyfunction]
fn fatbin_size() -> usize {
    fatbin().len()
}

#[pymodule]
fn kiln_consumer_example(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(build_manifest, m)?)?;
    m.add_function(wrap_pyfunction!(fatbin_size, m)?)?;
    m.add(
        "SCALE_ARGS_SIZE",
        std::mem::size_of::<abi::ConsumerScaleArgs>(),
    )?;
    Ok(())
}
