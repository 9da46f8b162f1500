//! The build manifest: what a kiln build produced, re-derived from the compiled outputs (the
//! kernels each target really holds), plus the pins and tool versions it was built with.
//! Written by kiln-build, embedded by kiln-kernels, read by `kiln audit` and `kiln.build_info()`.

#![warn(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};

use kiln_arch::{MatrixEntry, Target, TargetKind};
use serde::{Deserialize, Serialize};

/// Version of the manifest's JSON layout.
pub const SCHEMA: u32 = 1;

/// One target the build produced code for, and the kernels it holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct TargetKernels {
    /// In JSON "sm_90", "compute_120".
    #[serde(with = "text")]
    #[schemars(with = "String")]
    pub target: Target,
    /// In JSON "sass" or "ptx".
    #[serde(with = "text")]
    #[schemars(with = "String")]
    pub kind: TargetKind,
    /// PTX ISA ("9.0") for PTX targets.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ptx_isa: Option<String>,
    /// Kernel names (mangled) the linked output holds for this target.
    pub kernels: Vec<String>,
}

/// One loadable module of a build that splits its kernels by source file
/// (`modules = "per-source"`): its own fatbin, and what each of its targets holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Module {
    /// The module's name: the source file's stem ("softmax" for softmax.cu).
    pub name: String,
    /// The sources compiled into it, relative names.
    pub sources: Vec<String>,
    /// Its targets and the kernels each holds.
    pub targets: Vec<TargetKernels>,
}

/// The pinned tool versions the build ran with (`[workspace.metadata.kiln.toolchain]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Manifest {
    /// [`SCHEMA`] when written.
    pub schema: u32,
    /// The matrix it was built for, typed; in JSON the entries as Cargo.toml writes them
    /// ("9.0", "12.0+PTX"), read back with the one grammar (kiln-arch).
    #[serde(with = "text_list")]
    #[schemars(with = "Vec<String>")]
    pub matrix: Vec<MatrixEntry>,
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
    /// Declared arch gates: each gated kernel and the targets (names, "sm_89") it exists for.
    /// A kernel not listed exists for every target; a gated kernel missing elsewhere is not a
    /// hole. kiln-build checked the declaration against the built bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", with = "gate_map")]
    #[schemars(with = "BTreeMap<String, Vec<String>>")]
    pub gates: BTreeMap<String, Vec<Target>>,
    /// Per-source modules (`modules = "per-source"`); empty for one module per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<Module>,
    /// Host-launched kernels (`host-sources`): the static library the crate links (name
    /// `lib<name>.a`), its sources and what its objects' device code holds per target. Their
    /// kernels are in `targets` too (the linked binary's `.nv_fatbin` holds them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_lib: Option<Module>,
    /// The nvcc releases the project accepts (`kernels.cuda`); absent: the exact pin
    /// (`toolchain.nvcc` always records the release that ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_range: Option<String>,
    /// The build-time narrowing of the matrix (`KILN_ARCHS`), as given; `matrix` is then the
    /// narrowed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix_override: Option<String>,
}

impl Manifest {
    /// Every kernel name that any target has.
    pub fn all_kernels(&self) -> BTreeSet<&str> {
        self.targets
            .iter()
            .flat_map(|t| t.kernels.iter().map(String::as_str))
            .collect()
    }

    /// Whether `kernel` is meant to exist for `target`: everywhere unless a gate names the
    /// targets it exists for.
    pub fn expects(&self, kernel: &str, target: &Target) -> bool {
        match self.gates.get(kernel) {
            Some(targets) => targets.contains(target),
            None => true,
        }
    }

    /// (target, kernel) pairs where a kernel some target has is missing, and no gate says it
    /// does not exist there.
    pub fn gaps(&self) -> Vec<(Target, String)> {
        let all = self.all_kernels();
        let mut gaps = Vec::new();
        for t in &self.targets {
            for k in &all {
                if self.expects(k, &t.target) && !t.kernels.iter().any(|x| x == k) {
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

    /// The matrix as one line, "8.0 9.0a 12.0+PTX".
    pub fn matrix_text(&self) -> String {
        let entries: Vec<String> = self.matrix.iter().map(MatrixEntry::to_string).collect();
        entries.join(" ")
    }

    /// The manifest as embedded in `.kiln_manifest`: pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("manifest serializes")
    }

    /// Parses an embedded manifest.
    pub fn from_json(text: &str) -> Result<Manifest, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// kiln-arch has no dependencies, so its types carry no serde impls: the manifest spells each
/// one by its `Display` and reads it back with its `FromStr` (the one grammar).
pub mod text {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `value` as its `Display` text.
    pub fn serialize<T: Display, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    /// Reads a string and parses it with `FromStr`.
    pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// [`text`] for a list: a JSON array of strings.
pub mod text_list {
    use std::fmt::Display;
    use std::str::FromStr;

    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes each value as its `Display` text.
    pub fn serialize<T: Display, S: Serializer>(values: &[T], s: S) -> Result<S::Ok, S::Error> {
        struct Text<'a, T>(&'a T);
        impl<T: Display> serde::Serialize for Text<'_, T> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self.0)
            }
        }
        let mut seq = s.serialize_seq(Some(values.len()))?;
        for v in values {
            seq.serialize_element(&Text(v))?;
        }
        seq.end()
    }

    /// Reads an array of strings, each parsed with `FromStr`.
    pub fn deserialize<'de, T, D>(d: D) -> Result<Vec<T>, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|text| text.parse().map_err(serde::de::Error::custom))
            .collect()
    }
}

/// The manifest's `gates`: kernel name -> its targets, in JSON an object of arrays of target
/// names ("sm_89", "compute_90"), each read back with [`Target`]'s grammar. A name that is no
/// target is an error naming the kernel, never dropped.
mod gate_map {
    use std::collections::BTreeMap;

    use kiln_arch::Target;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        gates: &BTreeMap<String, Vec<Target>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(gates.iter().map(|(kernel, targets)| {
            let names: Vec<String> = targets.iter().map(Target::name).collect();
            (kernel, names)
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Vec<Target>>, D::Error> {
        BTreeMap::<String, Vec<String>>::deserialize(d)?
            .into_iter()
            .map(|(kernel, names)| {
                let targets = names
                    .iter()
                    .map(|name| name.parse::<Target>())
                    .collect::<Result<Vec<Target>, _>>()
                    .map_err(|e| serde::de::Error::custom(format!("gates.{kernel}: {e}")))?;
                Ok((kernel, targets))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture manifest (not kiln's live matrix): the JSON survives the typed round trip
    /// byte for byte, and a bad entry is refused by the one grammar.
    #[test]
    fn typed_matrix_round_trips_to_the_same_bytes() {
        let json = r#"{
  "schema": 1,
  "matrix": [
    "8.0",
    "9.0a",
    "12.0f+PTX"
  ],
  "min_driver": 580,
  "toolchain": {
    "nvcc": "n",
    "cuda": "c",
    "clang_major": 21,
    "libclang": "l",
    "rust_nightly": "r",
    "maturin": "m",
    "cudnn": "d",
    "nccl": "x"
  },
  "flags": [],
  "sources": [],
  "targets": [
    {
      "target": "compute_120f",
      "kind": "ptx",
      "ptx_isa": "9.0",
      "kernels": [
        "k"
      ]
    }
  ],
  "provenance": {
    "commit": "unknown",
    "dirty": false,
    "rustc": "",
    "clang": ""
  }
}"#;
        let m = Manifest::from_json(json).unwrap();
        assert_eq!(m.matrix_text(), "8.0 9.0a 12.0f+PTX");
        assert_eq!(m.targets[0].kind, TargetKind::Ptx);
        assert_eq!(m.to_json(), json);
        let bad = json.replace("\"9.0a\"", "\"9.1\"");
        let e = Manifest::from_json(&bad).unwrap_err().to_string();
        assert!(e.contains("9.1 is not a compute capability"), "{e}");
        let bad = json.replace("\"ptx\"", "\"PTX\"");
        assert!(Manifest::from_json(&bad).is_err());
    }

    /// A manifest as kiln-build wrote it before gates were typed (names in JSON, the same
    /// spelling it writes now): it reads, its gates are targets, and it writes back byte for byte.
    const OLD_MANIFEST_WITH_GATES: &str = r#"{
  "schema": 1,
  "matrix": [
    "8.0",
    "8.9",
    "9.0+PTX"
  ],
  "min_driver": 580,
  "toolchain": {
    "nvcc": "13.0.88",
    "cuda": "13.0.2",
    "clang_major": 21,
    "libclang": "21.1.8.2",
    "rust_nightly": "2026-08-20",
    "maturin": "1.14.1",
    "cudnn": "9.22.0.52",
    "nccl": "2.30.7"
  },
  "flags": [],
  "sources": [
    "add.cu",
    "fp8.cu"
  ],
  "targets": [
    {
      "target": "sm_80",
      "kind": "sass",
      "kernels": [
        "add"
      ]
    },
    {
      "target": "sm_89",
      "kind": "sass",
      "kernels": [
        "add",
        "fp8_scale"
      ]
    },
    {
      "target": "sm_90",
      "kind": "sass",
      "kernels": [
        "add",
        "fp8_scale"
      ]
    },
    {
      "target": "compute_90",
      "kind": "ptx",
      "ptx_isa": "9.0",
      "kernels": [
        "add",
        "fp8_scale"
      ]
    }
  ],
  "provenance": {
    "commit": "unknown",
    "dirty": false,
    "rustc": "",
    "clang": ""
  },
  "gates": {
    "fp8_scale": [
      "sm_89",
      "sm_90",
      "compute_90"
    ]
  }
}"#;

    #[test]
    fn an_old_manifest_reads_its_gates_as_targets() {
        let m = Manifest::from_json(OLD_MANIFEST_WITH_GATES).unwrap();
        let t = |name: &str| Target::parse(name).unwrap();
        assert_eq!(
            m.gates["fp8_scale"],
            [t("sm_89"), t("sm_90"), t("compute_90")]
        );
        assert!(!m.expects("fp8_scale", &t("sm_80")));
        assert!(m.expects("fp8_scale", &t("compute_90")));
        assert!(m.expects("add", &t("sm_80")));
        assert!(m.gaps().is_empty());
        assert_eq!(m.to_json(), OLD_MANIFEST_WITH_GATES);
        // No gates: the key stays absent, as before.
        let mut none = m.clone();
        none.gates.clear();
        assert!(!none.to_json().contains("gates"));
    }

    #[test]
    fn an_unknown_gate_target_is_an_error_naming_the_kernel() {
        for bad in ["sm89", "gfx90a", "sm_9.0", "", "SM_90"] {
            let json =
                OLD_MANIFEST_WITH_GATES.replace("[\n      \"sm_89\"", &format!("[\n      {bad:?}"));
            assert_ne!(json, OLD_MANIFEST_WITH_GATES);
            let e = Manifest::from_json(&json).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "gates.fp8_scale: {bad:?} is not a target (sm_NN[a|f] or compute_NN[a|f])"
                )),
                "{bad}: {e}"
            );
        }
        let json = OLD_MANIFEST_WITH_GATES.replace("[\n      \"sm_89\"", "[\n      89");
        assert!(Manifest::from_json(&json).is_err());
    }
}
