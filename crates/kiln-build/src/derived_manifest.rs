//! Builds the manifest from the pins and the linked outputs (see kiln-manifest for the schema).

use std::path::Path;

use kiln_manifest::{Manifest, Provenance, TargetKernels, Toolchain, SCHEMA};
use kiln_pins::{Pins, TargetKind};

use crate::error::BuildError;

pub fn new(pins: &Pins, nvcc_version: &str, flags: &[String], sources: Vec<String>) -> Manifest {
    let t = &pins.toolchain;
    Manifest {
        schema: SCHEMA,
        matrix: pins
            .matrix
            .entries()
            .iter()
            .map(|e| format!("{}{}", e.arch, if e.ptx { "+PTX" } else { "" }))
            .collect(),
        min_driver: pins.min_driver,
        toolchain: Toolchain {
            nvcc: nvcc_version.to_string(),
            cuda: t.cuda.clone(),
            clang_major: t.clang_major,
            libclang: t.libclang_ng.clone(),
            rust_nightly: t.rust_nightly.clone(),
            maturin: t.maturin.clone(),
            cudnn: t.cudnn.clone(),
            nccl: t.nccl.clone(),
        },
        flags: flags.to_vec(),
        sources,
        targets: Vec::new(),
        provenance: Provenance::default(),
    }
}

/// Reads the kernels out of one linked output and records them.
pub fn add_output(
    manifest: &mut Manifest,
    target: kiln_pins::Target,
    output: &Path,
) -> Result<(), BuildError> {
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
            kernels: kiln_fatbin::cubin::kernels(&bytes).map_err(|e| bad(e.to_string()))?,
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
    manifest.targets.push(entry);
    Ok(())
}
