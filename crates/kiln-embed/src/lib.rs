//! What a crate whose build script runs kiln-build (`KernelBuild::for_build_script()`) embeds
//! from its `OUT_DIR`, written once: [`embed!`] puts the fatbin in `.nv_fatbin` (where
//! cuobjdump and `kiln audit` look for device code in any ELF) and the build manifest in
//! `.kiln_manifest` (where `kiln audit` finds it and compares it with that fatbin); [`abi!`]
//! includes the bindgen ABI types. kiln's own kernels (kiln-kernels) and every consumer call
//! them instead of copying the statics.
//!
//! ```ignore
//! kiln_embed::embed!(pub); // pub fn fatbin() -> &'static [u8]; pub const MANIFEST_JSON: &str
//! kiln_embed::abi!(pub);   // pub mod abi { … }
//! ```
//!
//! The expansion is valid in every edition (2021 and 2024 alike): the sections are named with
//! `#[unsafe(link_section = …)]`, accepted since Rust 1.82. Dependency-free, so a consumer's
//! only new dependency is this crate.

#![no_std]

/// The ELF section that holds the fatbin (the name cuobjdump and the CUDA tools use).
pub const FATBIN_SECTION_NAME: &str = ".nv_fatbin";

/// The ELF section that holds the build manifest's JSON bytes.
pub const MANIFEST_SECTION_NAME: &str = ".kiln_manifest";

/// 8-byte alignment, as `cuModuleLoadData` requires of a fatbin image.
#[doc(hidden)]
#[repr(C, align(8))]
pub struct Aligned<T: ?Sized>(pub T);

/// Embeds `OUT_DIR/kernels.fatbin` in `.nv_fatbin` and `OUT_DIR/kernels.manifest.json` in
/// `.kiln_manifest` (both `#[used]`, so they stay in the linked binary), and defines, with the
/// given visibility (none: private):
///
/// - `fn fatbin() -> &'static [u8]`: the fatbin, 8-byte aligned as `cuModuleLoadData` requires;
/// - `fn module(name: &str) -> Option<&'static [u8]>` and `const MODULES`: each module's
///   fatbin (per source file with `modules = "per-source"`; one, `"kernels"`, otherwise);
/// - `const MANIFEST_JSON: &str`: the build manifest kiln-build wrote.
///
/// Call it once per crate, at module level (it also defines the statics `FATBIN` and
/// `MANIFEST_SECTION` there).
#[macro_export]
macro_rules! embed {
    () => {
        $crate::embed!(pub(self));
    };
    ($vis:vis) => {
        /// The fatbin, in `.nv_fatbin`, where cuobjdump and `kiln audit` look for device code.
        #[used]
        #[unsafe(link_section = ".nv_fatbin")]
        static FATBIN: $crate::Aligned<
            [u8; include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin")).len()],
        > = $crate::Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/kernels.fatbin")));

        /// The fatbin, 8-byte aligned as `cuModuleLoadData` requires.
        $vis fn fatbin() -> &'static [u8] {
            &FATBIN.0
        }

        /// One module's fatbin by name, 8-byte aligned: the source file's stem in a build with
        /// `modules = "per-source"` (each loaded on its own, e.g. lazily), `"kernels"` (the
        /// whole fatbin) in a one-module build.
        #[allow(dead_code)]
        $vis fn module(name: &str) -> ::core::option::Option<&'static [u8]> {
            MODULES
                .iter()
                .find(|m| m.0 == name)
                .map(|&(_, offset, len)| &FATBIN.0[offset..offset + len])
        }

        /// Every module: (name, offset, length) inside [`fatbin`]'s bytes.
        #[allow(dead_code)]
        $vis const MODULES: &[(&str, usize, usize)] =
            &include!(concat!(env!("OUT_DIR"), "/kernels.modules.rs"));

        /// The build manifest (JSON) written by kiln-build.
        $vis const MANIFEST_JSON: &str =
            include_str!(concat!(env!("OUT_DIR"), "/kernels.manifest.json"));

        /// The manifest's bytes in their own ELF section, so `kiln audit` finds them in any
        /// binary that links this crate (and compares them with the `.nv_fatbin` it re-reads
        /// from the same file).
        #[used]
        #[unsafe(link_section = ".kiln_manifest")]
        static MANIFEST_SECTION: [u8; MANIFEST_JSON.len()] =
            *include_bytes!(concat!(env!("OUT_DIR"), "/kernels.manifest.json"));
    };
}

/// `mod abi`, with the given visibility: the C ABI structs of `kernels/include/` that
/// kiln-build's bindgen wrote to `OUT_DIR/kiln_abi.rs` (with bindgen's layout tests).
#[macro_export]
macro_rules! abi {
    () => {
        $crate::abi!(pub(self));
    };
    ($vis:vis) => {
        /// The C ABI structs shared with the kernels (bindgen output, with layout tests).
        #[allow(
            non_camel_case_types,
            non_upper_case_globals,
            non_snake_case,
            dead_code
        )]
        $vis mod abi {
            include!(concat!(env!("OUT_DIR"), "/kiln_abi.rs"));
        }
    };
}
