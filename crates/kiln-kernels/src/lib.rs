//! kiln's kernels: one fatbin with SASS for every target of the arch matrix (and PTX where the
//! matrix says `+PTX`), the manifest kiln-build derived from the compiled outputs, and the ABI
//! types bindgen generated from `kernels/include/`.

/// The C ABI structs shared with the kernels (bindgen output, with layout tests).
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code
)]
pub mod abi {
    include!(concat!(env!("OUT_DIR"), "/kiln_abi.rs"));
}

#[repr(C, align(8))]
struct Aligned<T: ?Sized>(T);

/// In `.nv_fatbin`, where cuobjdump and `kiln audit` look for device code in any ELF.
#[used]
#[link_section = ".nv_fatbin"]
static FATBIN: Aligned<[u8; include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin")).len()]> =
    Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin")));

/// The fatbin, 8-byte aligned as `cuModuleLoadData` requires.
pub fn fatbin() -> &'static [u8] {
    &FATBIN.0
}

/// The build manifest (JSON) written by kiln-build.
pub const MANIFEST_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels.manifest.json"));

/// The manifest's bytes in their own ELF section, so `kiln audit` finds them in any binary that
/// links this crate (and compares them with the `.nv_fatbin` it re-reads from the same file).
#[used]
#[link_section = ".kiln_manifest"]
static MANIFEST_SECTION: [u8; MANIFEST_JSON.len()] =
    *include_bytes!(concat!(env!("OUT_DIR"), "/kernels.manifest.json"));

/// The ELF section that carries the manifest.
pub const MANIFEST_SECTION_NAME: &str = ".kiln_manifest";

/// The manifest, parsed.
pub fn manifest() -> kiln_manifest::Manifest {
    kiln_manifest::Manifest::from_json(MANIFEST_JSON).expect("kiln-build wrote a valid manifest")
}
