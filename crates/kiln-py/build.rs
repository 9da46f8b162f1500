//! Captures what `kiln.build_info()` reports beyond the kernel manifest: the runtime libraries
//! this build reaches, taken from `[workspace.metadata.kiln.runtime]` for each enabled feature.
//! The arch matrix is NOT read here: `build_info()` takes it (and `matrix_targets`) from the
//! kernel manifest, the one place the build records it.
//! The commit/dirty/toolchain provenance is NOT captured here: its single source is the kernel
//! manifest's `provenance` (kiln-build, from KILN_BUILD_COMMIT / KILN_BUILD_DIRTY).

use std::path::Path;

fn main() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pins = match kiln_pins::Pins::discover(crate_dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: kiln-py needs the workspace pins: {e}");
            std::process::exit(1);
        }
    };
    println!("cargo:rerun-if-changed={}", pins.manifest.display());

    let mut libs = serde_json::Map::new();
    for (key, lib) in &pins.runtime {
        // Cargo sets CARGO_FEATURE_<NAME> for each enabled feature of this crate.
        if std::env::var_os(format!(
            "CARGO_FEATURE_{}",
            key.to_uppercase().replace('-', "_")
        ))
        .is_some()
        {
            libs.insert(
                key.clone(),
                serde_json::json!({
                    "wheel": lib.wheel,
                    "version": lib.version,
                    // The declared range (Requires-Dist); `version` is the exact test pin.
                    "requires": lib.requires,
                    "requirement": lib.requirement(),
                    "lib_dir": lib.lib_dir,
                    "sonames": lib.sonames,
                }),
            );
        }
    }
    let info = serde_json::json!({ "runtime_libraries": libs });
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("py_build_info.json");
    std::fs::write(&out, serde_json::to_string_pretty(&info).expect("json"))
        .expect("writing OUT_DIR");
}
