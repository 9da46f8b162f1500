//! A tiny PyO3 binding over kernels built by kiln-build: the fatbin (in `.nv_fatbin`, where
//! `kiln audit` and cuobjdump look), the build manifest (in `.kiln_manifest`) and the ABI types.

use pyo3::prelude::*;

/// The C ABI structs of kernels/include (bindgen output, with layout tests).
#[allow(non_camel_case_types, non_snake_case, dead_code)]
pub mod abi {
    include!(concat!(env!("OUT_DIR"), "/kiln_abi.rs"));
}

#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);

/// Every target of the matrix, 8-byte aligned as `cuModuleLoadData` requires.
#[used]
#[link_section = ".nv_fatbin"]
static FATBIN: Aligned<[u8; include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin")).len()]> =
    Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin")));

const MANIFEST_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels.manifest.json"));

/// The manifest in its own section, so `kiln audit` compares it with the fatbin it re-reads.
#[used]
#[link_section = ".kiln_manifest"]
static MANIFEST_SECTION: [u8; MANIFEST_JSON.len()] =
    *include_bytes!(concat!(env!("OUT_DIR"), "/kernels.manifest.json"));

/// The build manifest kiln-build wrote (JSON): the kernels each target holds, tool versions.
#[pyfunction]
fn build_manifest() -> &'static str {
    MANIFEST_JSON
}

/// The fatbin's size in bytes (load it with the CUDA driver API, e.g. cudarc, to launch).
#[pyfunction]
fn fatbin_size() -> usize {
    FATBIN.0.len()
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
