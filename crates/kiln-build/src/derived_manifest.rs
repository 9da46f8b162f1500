//! Builds the manifest from the pins and the linked outputs (see kiln-manifest for the schema).

use std::path::Path;

use kiln_manifest::{Manifest, Provenance, TargetKernels, Toolchain, SCHEMA};
use kiln_pins::{Pins, TargetKind};

use crate::error::BuildError;

/// The manifest before any target is described: the matrix, the toolchain and the build inputs.
pub fn new(pins: &Pins, nvcc_version: &str, flags: &[String], sources: Vec<String>) -> Manifest {
    let t = &pins.toolchain;
    Manifest {
        schema: SCHEMA,
        matrix: pins.matrix.entries().to_vec(),
        min_driver: pins.min_driver,
        toolchain: Toolchain {
            nvcc: nvcc_version.to_string(),
            cuda: t.cuda.clone(),
            clang_major: t.clang_major,
            libclang: t.libclang_ng.clone(),
            rust_nightly: t.rust_nightly.clone(),
            kernel_rustc: t.kernel_rustc.clone(),
            maturin: t.maturin.clone(),
            // The exact runtime releases the build and tests use (Nix gives the same ones:
            // checks/nix/facts/nixpkgs.toml); the wheel declares their ranges.
            cudnn: runtime_version(pins, "cudnn"),
            nccl: runtime_version(pins, "nccl"),
        },
        flags: flags.to_vec(),
        sources,
        targets: Vec::new(),
        provenance: Provenance::default(),
        kernel_languages: Default::default(),
        kernel_rustc_version: String::new(),
        gates: Default::default(),
        modules: Vec::new(),
        static_lib: None,
        cuda_range: pins.kernels.cuda.clone(),
        matrix_override: None,
    }
}

/// The exact pinned release of a runtime library, or "" when the pins have none.
fn runtime_version(pins: &Pins, name: &str) -> String {
    pins.runtime
        .get(name)
        .map(|l| l.version.clone())
        .unwrap_or_default()
}

/// Reads the kernels out of one linked output and records them.
pub fn add_output(
    manifest: &mut Manifest,
    target: kiln_pins::Target,
    output: &Path,
) -> Result<(), BuildError> {
    manifest.targets.push(read_output(target, output)?);
    Ok(())
}

/// Adds a per-source module's target to the whole build's view of that target: the union of
/// every module's kernels, sorted.
pub fn merge_target(manifest: &mut Manifest, entry: &TargetKernels) {
    merge_into(&mut manifest.targets, entry);
}

/// `entry`'s kernels into the same target of `targets` (sorted, each once), or `entry` added.
pub fn merge_into(targets: &mut Vec<TargetKernels>, entry: &TargetKernels) {
    match targets.iter_mut().find(|t| t.target == entry.target) {
        Some(t) => {
            t.kernels.extend(entry.kernels.iter().cloned());
            t.kernels.sort();
            t.kernels.dedup();
        }
        None => targets.push(entry.clone()),
    }
}

/// The kernels one output (a cubin, or PTX text) holds, for `target`.
pub fn read_output(target: kiln_pins::Target, output: &Path) -> Result<TargetKernels, BuildError> {
    let bytes =
        std::fs::read(output).map_err(crate::error::io(format!("reading {}", output.display())))?;
    let bad = |message: String| BuildError::BadOutput {
        source_file: output.to_path_buf(),
        output: target.name(),
        message,
    };
    let entry = match target.kind {
        TargetKind::Sass => TargetKernels {
            target,
            kind: target.kind,
            ptx_isa: None,
            kernels: kiln_fatbin::cubin::kernels(bytes.as_slice())
                .map_err(|e| bad(e.to_string()))?,
        },
        TargetKind::Ptx => {
            let text = String::from_utf8(bytes).map_err(|_| bad("PTX is not UTF-8".into()))?;
            let info = kiln_fatbin::ptx::parse(&text).map_err(|e| bad(e.to_string()))?;
            TargetKernels {
                target,
                kind: target.kind,
                ptx_isa: Some(format!("{}.{}", info.isa.0, info.isa.1)),
                kernels: info.kernels,
            }
        }
    };
    Ok(entry)
}

/// Records which kernels came from Rust (the rest of every target's kernels are CUDA C++) and
/// the exact rustc that compiled them. Call after every output was added.
pub fn record_languages(manifest: &mut Manifest, rust_kernels: &[String], rustc_vv: &str) {
    let all: Vec<String> = manifest
        .all_kernels()
        .into_iter()
        .map(String::from)
        .collect();
    for k in all {
        let language = if rust_kernels.contains(&k) {
            "rust"
        } else {
            "cuda"
        };
        manifest.kernel_languages.insert(k, language.into());
    }
    manifest.kernel_rustc_version = rustc_vv.to_string();
}
