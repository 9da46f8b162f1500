//! kiln's kernels: one fatbin with SASS for every target of the arch matrix (and PTX where the
//! matrix says `+PTX`), the manifest kiln-build derived from the compiled outputs, and the ABI
//! types bindgen generated from `kernels/include/`.

// The C ABI structs shared with the kernels (`abi`), the fatbin in `.nv_fatbin` (`fatbin()`)
// and the manifest in `.kiln_manifest` (`MANIFEST_JSON`): the same embedding every consumer
// of kiln-build uses.
kiln_embed::abi!(pub);
kiln_embed::embed!(pub);

/// The ELF section that carries the manifest.
pub const MANIFEST_SECTION_NAME: &str = kiln_embed::MANIFEST_SECTION_NAME;

/// The manifest, parsed.
pub fn manifest() -> kiln_manifest::Manifest {
    kiln_manifest::Manifest::from_json(MANIFEST_JSON).expect("kiln-build wrote a valid manifest")
}
