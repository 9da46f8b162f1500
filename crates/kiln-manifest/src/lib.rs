//! The build manifest: what a kiln build produced, re-derived from the compiled outputs (the
//! kernels each target really holds), plus the pins and tool versions it was built with.
//! Written by kiln-build, embedded by kiln-kernels, read by `kiln audit` and `kiln.build_info()`.

#![warn(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};

use kiln_pins::{Target, TargetKind};
use serde::{Deserialize, Serialize};

/// Version of the manifest's JSON layout.
pub const SCHEMA: u32 = 1;

/// One target the build produced code for, and the kernels it holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TargetKernels {
    /// In JSON "sm_90", "compute_120".
    pub target: Target,
    /// In JSON "sass" or "ptx".
    pub kind: TargetKind,
    /// PTX ISA ("9.0") for PTX targets.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ptx_isa: Option<String>,
    /// Kernel names (mangled) the linked output holds for this target.
    pub kernels: Vec<String>,
}

/// The pinned tool versions the build ran with (`[workspace.metadata.kiln.toolchain]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Toolchain {
    /// `nvcc --version` release.
    pub nvcc: String,
    /// The cuda-toolkit pin.
    pub cuda: String,
    /// The clang major Nix uses.
    pub clang_major: u32,
    /// The libclang wheel pin (without Nix).
    pub libclang: String,
    /// The nightly date the flake uses.
    pub rust_nightly: String,
    /// The kernel rustc pin without Nix (`kernel-rustc`); absent in older manifests.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_rustc: String,
    /// The maturin pin.
    pub maturin: String,
    /// The cuDNN runtime pin.
    pub cudnn: String,
    /// The NCCL runtime pin.
    pub nccl: String,
}

/// Where and with what the build ran. Nothing here may vary between two clean builds of the
/// same commit (no time stamps, no paths): the wheel must be byte-identical.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Provenance {
    /// Git commit of the sources ("unknown" outside a checkout).
    pub commit: String,
    /// Uncommitted changes to tracked files when the build ran.
    pub dirty: bool,
    /// `rustc --version` of the compiler cargo used.
    pub rustc: String,
    /// libclang version bindgen loaded ("" when bindgen did not run).
    pub clang: String,
}

/// The build manifest embedded in `.kiln_manifest`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// [`SCHEMA`] when written.
    pub schema: u32,
    /// The matrix as written in Cargo.toml.
    pub matrix: Vec<String>,
    /// `min-driver` from the pins.
    pub min_driver: u32,
    /// The pinned tool versions.
    pub toolchain: Toolchain,
    /// nvcc flags common to every job.
    pub flags: Vec<String>,
    /// kernels/ sources, relative names.
    pub sources: Vec<String>,
    /// Every target with the kernels its linked output really holds.
    pub targets: Vec<TargetKernels>,
    /// Commit and compilers of the build.
    #[serde(default)]
    pub provenance: Provenance,
    /// Source language of every kernel: "cuda" (kernels/*.cu) or "rust" (kernels/rust).
    /// Empty in manifests written before kiln had Rust kernels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_languages: BTreeMap<String, String>,
    /// `rustc -vV` of the rustc that compiled the Rust kernels ("" when there are none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_rustc_version: String,
}

impl Manifest {
    /// Every kernel name that any target has.
    pub fn all_kernels(&self) -> BTreeSet<&str> {
        self.targets
            .iter()
            .flat_map(|t| t.kernels.iter().map(String::as_str))
            .collect()
    }

    /// (target, kernel) pairs where a kernel some target has is missing.
    pub fn gaps(&self) -> Vec<(Target, String)> {
        let all = self.all_kernels();
        let mut gaps = Vec::new();
        for t in &self.targets {
            for k in &all {
                if !t.kernels.iter().any(|x| x == k) {
                    gaps.push((t.target, k.to_string()));
                }
            }
        }
        gaps
    }

    /// The kernels written in `language` ("cuda", "rust"), sorted.
    pub fn kernels_in(&self, language: &str) -> Vec<&str> {
        self.kernel_languages
            .iter()
            .filter(|(_, l)| *l == language)
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// The manifest as embedded: compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("manifest serializes")
    }

    /// Parses an embedded manifest.
    pub fn from_json(text: &str) -> Result<Manifest, serde_json::Error> {
        serde_json::from_str(text)
    }
}
