//! `kiln.build_info()`: what this extension was built from, read from what was embedded at
//! build time, never re-derived. Provenance (commit, dirty, rustc, clang) has one source: the
//! kernel build manifest's `provenance` (kiln-build sets it from KILN_BUILD_COMMIT /
//! KILN_BUILD_DIRTY, which `cargo xtask wheel` passes); kiln-py's build script only adds the
//! runtime libraries of the enabled features.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// kiln-py's build script output: the runtime libraries of this build (the matrix is the
/// manifest's).
pub const PY_BUILD_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/py_build_info.json"));

/// The build info as one JSON document (the manifest's fields at the top level).
pub fn build_info_json() -> serde_json::Value {
    let manifest: serde_json::Value = serde_json::from_str(kiln_kernels::MANIFEST_JSON)
        .expect("kiln-build embeds valid manifest JSON");
    let py_build: serde_json::Value =
        serde_json::from_str(PY_BUILD_JSON).expect("build.rs writes valid JSON");
    let libs = py_build["runtime_libraries"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut info = match manifest {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("the manifest is a JSON object"),
    };
    info.insert("version".into(), env!("CARGO_PKG_VERSION").into());
    // The manifest's provenance, also at the top level (where users look first).
    let provenance = &kiln_kernels::manifest().provenance;
    info.insert("commit".into(), provenance.commit.clone().into());
    info.insert("dirty".into(), provenance.dirty.into());
    info.insert("rustc".into(), provenance.rustc.clone().into());
    info.insert("clang".into(), provenance.clang.clone().into());
    info.insert(
        "features".into(),
        serde_json::json!({
            // The kernels: every target in `targets` above.
            "cuda": !kiln_kernels::fatbin().is_empty(),
            "cublas": libs.contains_key("cublas"),
            "cudnn": libs.contains_key("cudnn"),
            "nccl": libs.contains_key("nccl"),
        }),
    );
    info.insert("runtime_libraries".into(), serde_json::Value::Object(libs));
    info.insert("matrix_targets".into(), matrix_targets());
    serde_json::Value::Object(info)
}

/// What the manifest's matrix asks for, `[{target, kind}]` (SASS first, then PTX), in
/// kiln-arch's vocabulary: a view of the manifest's `matrix`, not a second record of it, so
/// that checks compare the built targets against it without parsing the matrix themselves.
fn matrix_targets() -> serde_json::Value {
    let manifest = kiln_kernels::manifest();
    let entries = &manifest.matrix;
    let sass = entries.iter().map(|e| kiln_arch::Target::sass(e.arch));
    let ptx = entries
        .iter()
        .filter(|e| e.ptx)
        .map(|e| kiln_arch::Target::ptx(e.arch));
    sass.chain(ptx)
        .map(|t| serde_json::json!({ "target": t.to_string(), "kind": t.kind.to_string() }))
        .collect()
}

/// What is in the process now, per runtime soname kiln calls: the version the library reports
/// at run time, the file it was mapped from, and whether it was already loaded before kiln
/// asked (torch, the preload); or why it cannot be used (missing, older than the declared range).
pub fn loaded_libraries_json() -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for lib in kiln_runtime::runtime_libraries() {
        let entry = match &lib.status {
            Ok(l) => serde_json::json!({
                "version": l.version,
                "path": l.path,
                "already_loaded": l.already_loaded,
                "requires": lib.wheel,
            }),
            Err(e) => serde_json::json!({ "error": e.to_string(), "requires": lib.wheel }),
        };
        out.insert(lib.soname.to_string(), entry);
    }
    serde_json::Value::Object(out)
}

/// `{soname: {version, path, already_loaded, requires} | {error, requires}}`: loads (or adopts)
/// cuBLAS, cuDNN and NCCL and asks each its version; no GPU needed. Called by
/// `kiln.build_info()` after the import-time preload, never before it.
#[pyfunction]
pub fn _loaded_libraries(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let text = serde_json::to_string(&loaded_libraries_json()).expect("serializes");
    py.import("json")?
        .call_method1("loads", (text,))?
        .cast_into::<PyDict>()
        .map_err(Into::into)
}

/// Returns a dict: the embedded manifest (targets with their kernels, matrix, min_driver,
/// toolchain, flags, sources, provenance), plus version, commit, dirty, rustc, clang (copied
/// from the manifest's provenance), features, runtime_libraries and matrix_targets (what the
/// manifest's matrix asks for: `[{target, kind}]`).
#[pyfunction]
pub fn build_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let text = serde_json::to_string(&build_info_json()).expect("serializes");
    py.import("json")?
        .call_method1("loads", (text,))?
        .cast_into::<PyDict>()
        .map_err(Into::into)
}
