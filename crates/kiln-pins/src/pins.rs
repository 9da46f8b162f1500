use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{ArchMatrix, PinsError};

/// Pinned tool versions (`[workspace.metadata.kiln.toolchain]`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Toolchain {
    /// cuda-toolkit meta-package version, e.g. "13.0.2".
    pub cuda: String,
    /// Exact nvcc release, e.g. "13.0.88".
    pub nvcc: String,
    /// cuobjdump / nvdisasm version for cross-checks.
    pub cuda_tools: String,
    /// LLVM major release of clang (`llvmPackages_<N>` in Nix), e.g. 21.
    pub clang_major: u32,
    /// libclang PyPI wheel version (`libclang-ng`), for bindgen without Nix.
    pub libclang_ng: String,
    /// rust-overlay nightly date, "YYYY-MM-DD".
    pub rust_nightly: String,
    /// Exact `rustc -vV` release of the kernel rustc without Nix (kernels/rust, built for
    /// nvptx64-nvidia-cuda with `-Zbuild-std=core`; Debian's rustc-web + rust-web-src).
    pub kernel_rustc: String,
    /// The tested fallback release of the kernel rustc (`kernel-rustc-fallback`), installed
    /// when apt no longer offers `kernel-rustc`; kiln-build accepts either.
    #[serde(default)]
    pub kernel_rustc_fallback: Option<String>,
    /// maturin release, for PyPI and nixpkgs alike.
    pub maturin: String,
}

impl Toolchain {
    /// "13.0" from "13.0.2": the CUDA release (nvcc's `release 13.0`).
    pub fn cuda_major_minor(&self) -> &str {
        let mut dots = self.cuda.match_indices('.');
        match dots.nth(1) {
            Some((i, _)) => &self.cuda[..i],
            None => &self.cuda,
        }
    }
}

/// A runtime library the wheel reaches, and the PyPI wheel that carries it.
///
/// Two kinds of pin: `version`, the exact release the build, the tests and the bootstrap use
/// (reproducibility; for cuDNN and NCCL the release the locked nixpkgs gives), and `requires`,
/// the range the wheel declares (installability beside torch & co.): the ABI kiln needs, the
/// soname's major from the oldest minor kiln supports, `>=MAJOR.MINOR,<MAJOR+1`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RuntimeLib {
    /// PyPI distribution name, e.g. "nvidia-cudnn-cu13".
    pub wheel: String,
    /// Exact release, e.g. "9.22.0.52".
    pub version: String,
    /// Declared range, e.g. ">=9.19,<10".
    pub requires: String,
    /// Where the wheel puts its libraries, relative to site-packages.
    pub lib_dir: String,
    /// The shared libraries the wheel provides, e.g. "libcudnn.so.9".
    pub sonames: Vec<String>,
}

/// What a runtime pin's `requires` says about the ABI: the soname major and the oldest minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbiRange {
    /// The soname major version, e.g. 9 for `>=9.19,<10`.
    pub major: u64,
    /// The oldest minor release of that major kiln supports, e.g. 19.
    pub min_minor: u64,
}

impl RuntimeLib {
    /// The Requires-Dist line for this library, the declared range:
    /// `nvidia-cudnn-cu13>=9.19,<10`.
    pub fn requirement(&self) -> String {
        format!("{}{}", self.wheel, self.requires)
    }

    /// The exact pin as a requirement, for installs that must be reproducible (bootstrap,
    /// tests): `nvidia-cudnn-cu13==9.22.0.52`.
    pub fn exact_requirement(&self) -> String {
        format!("{}=={}", self.wheel, self.version)
    }

    /// The ABI range `requires` states (validated by [`Pins::parse`]).
    pub fn abi(&self) -> AbiRange {
        parse_abi_range(&self.requires).expect("validated in Pins::parse")
    }

    /// The soname major every `sonames` entry carries (`libcudnn.so.9` -> 9).
    fn soname_majors(&self) -> Vec<Option<u64>> {
        self.sonames
            .iter()
            .map(|s| {
                s.rsplit_once(".so.")
                    .and_then(|(_, v)| v.split('.').next()?.parse().ok())
            })
            .collect()
    }
}

/// `>=MAJOR.MINOR,<MAJOR+1` (spaces allowed around the comma), nothing else: the one shape of
/// range that states an ABI (a soname major and the oldest minor) and that Nix can read too.
fn parse_abi_range(requires: &str) -> Option<AbiRange> {
    let (low, high) = requires.split_once(',')?;
    let low = low.trim().strip_prefix(">=")?;
    let high = high.trim().strip_prefix('<')?;
    if high.starts_with('=') {
        return None;
    }
    let (major, minor) = low.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) || !digits(high) {
        return None;
    }
    let major: u64 = major.parse().ok()?;
    let min_minor: u64 = minor.parse().ok()?;
    (high.parse::<u64>().ok()? == major + 1).then_some(AbiRange { major, min_minor })
}

/// The exact pin must lie inside the declared range (PEP 440 semantics, as pip decides it), and
/// the range's major must be the sonames' major.
fn validate_runtime(name: &str, lib: &RuntimeLib) -> Result<(), PinsError> {
    use std::str::FromStr;
    validate_version(&format!("runtime.{name}.version"), &lib.version)?;
    if lib.sonames.is_empty() {
        return Err(PinsError::Invalid(format!(
            "runtime.{name}.sonames is empty"
        )));
    }
    let abi = parse_abi_range(&lib.requires).ok_or_else(|| {
        PinsError::Invalid(format!(
            "runtime.{name}.requires = {:?} is not an ABI range \">=MAJOR.MINOR,<MAJOR+1\" (e.g. \">=9.19,<10\")",
            lib.requires
        ))
    })?;
    let specifiers = pep440_rs::VersionSpecifiers::from_str(&lib.requires).map_err(|e| {
        PinsError::Invalid(format!("runtime.{name}.requires = {:?}: {e}", lib.requires))
    })?;
    let exact = pep440_rs::Version::from_str(&lib.version).map_err(|e| {
        PinsError::Invalid(format!("runtime.{name}.version = {:?}: {e}", lib.version))
    })?;
    if !specifiers.contains(&exact) {
        return Err(PinsError::Invalid(format!(
            "runtime.{name}: the exact pin version = \"{}\" is outside the declared range requires = \"{}\"; \
             move one of them in Cargo.toml [workspace.metadata.kiln.runtime.{name}]",
            lib.version, lib.requires
        )));
    }
    for (soname, major) in lib.sonames.iter().zip(lib.soname_majors()) {
        if major != Some(abi.major) {
            return Err(PinsError::Invalid(format!(
                "runtime.{name}: requires = \"{}\" states ABI major {}, but soname {soname} is not major {}",
                lib.requires, abi.major, abi.major
            )));
        }
    }
    Ok(())
}

/// How the wheel is finalized after maturin (`[workspace.metadata.kiln.wheel]`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct WheelPins {
    /// The glibc baseline every platform tag carries, e.g. "manylinux_2_34".
    pub manylinux: String,
    /// The extension crate (relative to the workspace root). The Requires-Dist rule: one
    /// `RuntimeLib::requirement()` per `[runtime.*]` library named by its default features.
    pub extension: String,
}

impl WheelPins {
    /// glibc (major, minor) of the manylinux level: "manylinux_2_34" -> (2, 34).
    pub fn glibc(&self) -> Option<(u32, u32)> {
        let rest = self.manylinux.strip_prefix("manylinux_")?;
        let (a, b) = rest.split_once('_')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    }
}

/// `kiln audit`'s policy beyond the pins (`[workspace.metadata.kiln.audit]`), optional.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AuditPins {
    /// Waivers: findings `kiln audit --policy` lists as waived, with their reason, instead of
    /// failing the gate.
    #[serde(default)]
    pub allow: Vec<AuditAllow>,
}

/// One waiver: `{ rule = "reach/gap", path = "nvidia/*/lib/*.so*", reason = "..." }`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AuditAllow {
    /// The rule id, e.g. "reach/gap" (kiln-audit checks it names a rule).
    pub rule: String,
    /// A glob over the finding's file (path inside the input); absent: every file.
    #[serde(default)]
    pub path: Option<String>,
    /// Why the finding is acceptable; printed beside every finding it waives.
    pub reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawKiln {
    archs: Vec<String>,
    min_driver: String,
    toolchain: Toolchain,
    #[serde(default)]
    runtime: BTreeMap<String, RuntimeLib>,
    #[serde(default)]
    test_tools: BTreeMap<String, String>,
    #[serde(default)]
    wheel: Option<WheelPins>,
    #[serde(default)]
    audit: AuditPins,
    #[serde(default)]
    kernels: crate::kernels::RawKernels,
}

/// Everything in `[workspace.metadata.kiln]`, validated.
#[derive(Debug, Clone)]
pub struct Pins {
    /// The Cargo.toml it came from.
    pub manifest: PathBuf,
    /// The validated `archs` list with its `+PTX` flags.
    pub matrix: ArchMatrix,
    /// Oldest supported driver major version (e.g. 580).
    pub min_driver: u32,
    /// The pinned tool versions (`[workspace.metadata.kiln.toolchain]`).
    pub toolchain: Toolchain,
    /// Keyed by short name: "cudart", "cublas", "cudnn", "nccl".
    pub runtime: BTreeMap<String, RuntimeLib>,
    /// PyPI tools for checks and benchmarks: name -> exact version.
    pub test_tools: BTreeMap<String, String>,
    /// The wheel's manylinux level and Requires-Dist rule (None when the table is absent).
    pub wheel: Option<WheelPins>,
    /// `kiln audit`'s waivers (`[workspace.metadata.kiln.audit]`; empty when absent). A
    /// project's own: never inherited from kiln's table.
    pub audit: AuditPins,
    /// How kiln-build compiles this project's kernels (`[…metadata.kiln.kernels]`; kiln's
    /// layout when absent). A project's own: never inherited from kiln's table.
    pub kernels: crate::KernelsPins,
    /// The top-level keys taken from kiln's built-in pins because the project's table left them
    /// out (empty for a complete table such as kiln's own).
    pub inherited: Vec<String>,
    /// Which kiln table of the manifest these pins came from: `"package"`
    /// (`[package.metadata.kiln]`) or `"workspace"` — so messages name the table the user wrote.
    pub section: &'static str,
}

impl Pins {
    /// Reads the pins from a workspace Cargo.toml.
    pub fn load(manifest: &Path) -> Result<Pins, PinsError> {
        let text = std::fs::read_to_string(manifest).map_err(|source| PinsError::Read {
            path: manifest.to_path_buf(),
            source,
        })?;
        Pins::parse(&text, manifest)
    }

    /// Finds the nearest Cargo.toml at or above `start` with a kiln table (package or
    /// workspace) and reads it.
    pub fn discover(start: &Path) -> Result<Pins, PinsError> {
        Pins::load(&find_workspace_manifest(start)?)
    }

    /// Reads the kiln table of `text` (a Cargo.toml at `manifest`): `[package.metadata.kiln]`
    /// if present, else `[workspace.metadata.kiln]`. A table with its own `toolchain` is a
    /// complete pin set (kiln's workspace); any other — a consumer project's — is layered over
    /// [`BUILT_IN_MANIFEST`]: see [`crate::layered`].
    pub fn parse(text: &str, manifest: &Path) -> Result<Pins, PinsError> {
        let doc: toml::Table = toml::from_str(text).map_err(|e| PinsError::Toml {
            path: manifest.to_path_buf(),
            message: e.to_string(),
        })?;
        let (table_name, table) =
            crate::layered::kiln_table(&doc).ok_or_else(|| PinsError::MissingTable {
                path: manifest.to_path_buf(),
            })?;
        let (table, inherited) = if table.contains_key("toolchain") {
            (table.clone(), Vec::new())
        } else {
            crate::layered::over_built_in(table)
        };
        let mut pins = Pins::from_table(table).map_err(|e| match table_name {
            "workspace" if inherited.is_empty() => e,
            _ => PinsError::Project {
                path: manifest.to_path_buf(),
                table: format!("{table_name}.metadata.kiln"),
                message: e.to_string(),
            },
        })?;
        pins.manifest = manifest.to_path_buf();
        pins.inherited = inherited;
        pins.section = table_name;
        Ok(pins)
    }

    /// The pins this copy of kiln-pins was built with: kiln's own `[workspace.metadata.kiln]`.
    pub fn built_in() -> Pins {
        Pins::parse(
            BUILT_IN_MANIFEST,
            Path::new("<kiln's Cargo.toml, built in>"),
        )
        .expect("kiln's own pins are validated by its tests")
    }

    fn from_table(table: toml::Table) -> Result<Pins, PinsError> {
        let raw: RawKiln = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| PinsError::Invalid(e.message().to_string()))?;
        let matrix = ArchMatrix::parse(&raw.archs)?;
        let min_driver = raw.min_driver.parse::<u32>().map_err(|_| {
            PinsError::Invalid(format!(
                "min-driver {:?} is not a driver major version such as \"580\"",
                raw.min_driver
            ))
        })?;
        if crate::max_ptx_isa_for_driver(min_driver).is_none() {
            return Err(PinsError::Invalid(format!(
                "min-driver {min_driver} predates CUDA 12; kiln cannot target it"
            )));
        }
        validate_date(&raw.toolchain.rust_nightly)?;
        for (field, value) in [
            ("cuda", &raw.toolchain.cuda),
            ("nvcc", &raw.toolchain.nvcc),
            ("cuda-tools", &raw.toolchain.cuda_tools),
            ("libclang-ng", &raw.toolchain.libclang_ng),
            ("maturin", &raw.toolchain.maturin),
            ("kernel-rustc", &raw.toolchain.kernel_rustc),
        ] {
            validate_version(field, value)?;
        }
        if let Some(v) = &raw.toolchain.kernel_rustc_fallback {
            validate_version("kernel-rustc-fallback", v)?;
        }
        if !raw
            .toolchain
            .nvcc
            .starts_with(&format!("{}.", raw.toolchain.cuda_major_minor()))
        {
            return Err(PinsError::Invalid(format!(
                "toolchain.nvcc {} does not belong to CUDA {}",
                raw.toolchain.nvcc, raw.toolchain.cuda
            )));
        }
        if !raw
            .toolchain
            .libclang_ng
            .starts_with(&format!("{}.", raw.toolchain.clang_major))
        {
            return Err(PinsError::Invalid(format!(
                "toolchain.libclang-ng {} is not clang {}",
                raw.toolchain.libclang_ng, raw.toolchain.clang_major
            )));
        }
        for (name, version) in &raw.test_tools {
            validate_version(&format!("test-tools.{name}"), version)?;
        }
        for (name, lib) in &raw.runtime {
            validate_runtime(name, lib)?;
        }
        for (i, a) in raw.audit.allow.iter().enumerate() {
            if a.rule.trim().is_empty() || a.reason.trim().is_empty() {
                return Err(PinsError::Invalid(format!(
                    "audit.allow[{i}]: `rule` and `reason` must both be given (a waiver without a reason is not visible)"
                )));
            }
        }
        if let Some(w) = &raw.wheel {
            if w.glibc().is_none() {
                return Err(PinsError::Invalid(format!(
                    "wheel.manylinux = {:?} is not a PEP 600 level like \"manylinux_2_34\"",
                    w.manylinux
                )));
            }
        }
        Ok(Pins {
            manifest: PathBuf::new(),
            inherited: Vec::new(),
            section: "workspace",
            matrix,
            min_driver,
            toolchain: raw.toolchain,
            runtime: raw.runtime,
            test_tools: raw.test_tools,
            wheel: raw.wheel,
            audit: raw.audit,
            kernels: crate::KernelsPins::from_raw(raw.kernels)?,
        })
    }

    /// `[<section>.metadata.kiln.<key>]` (`key` empty: the kiln table itself), as the project's
    /// Cargo.toml spells it.
    pub fn table(&self, key: &str) -> String {
        match key {
            "" => format!("[{}.metadata.kiln]", self.section),
            k => format!("[{}.metadata.kiln.{k}]", self.section),
        }
    }

    /// The workspace root (the directory holding the manifest).
    pub fn root(&self) -> &Path {
        self.manifest.parent().unwrap_or(Path::new("."))
    }

    /// The PTX ISA ceiling implied by `min-driver`.
    pub fn max_ptx_isa(&self) -> (u32, u32) {
        crate::max_ptx_isa_for_driver(self.min_driver)
            .expect("validated in parse")
            .ptx_isa
    }

    /// The runtime library whose wheel ships `soname`, if any.
    pub fn runtime_for_soname(&self, soname: &str) -> Option<(&str, &RuntimeLib)> {
        self.runtime
            .iter()
            .find(|(_, lib)| lib.sonames.iter().any(|s| s == soname))
            .map(|(k, v)| (k.as_str(), v))
    }
}

fn validate_version(field: &str, value: &str) -> Result<(), PinsError> {
    let ok = !value.is_empty()
        && value
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(PinsError::Invalid(format!(
            "{field} = {value:?} is not a dotted version like \"13.0.2\""
        )))
    }
}

fn validate_date(value: &str) -> Result<(), PinsError> {
    let parts: Vec<&str> = value.split('-').collect();
    let ok = parts.len() == 3
        && [4, 2, 2]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(PinsError::Invalid(format!(
            "toolchain.rust-nightly = {value:?} is not a date YYYY-MM-DD"
        )))
    }
}

/// The nearest Cargo.toml at or above `start` that holds `[package.metadata.kiln]` or
/// `[workspace.metadata.kiln]` (a package's own table wins over its workspace's, being nearer).
pub fn find_workspace_manifest(start: &Path) -> Result<PathBuf, PinsError> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        let candidate = d.join("Cargo.toml");
        let doc = std::fs::read_to_string(&candidate)
            .ok()
            .and_then(|text| toml::from_str::<toml::Table>(&text).ok());
        if doc.is_some_and(|doc| crate::layered::kiln_table(&doc).is_some()) {
            return Ok(candidate);
        }
        dir = d.parent();
    }
    Err(PinsError::NoWorkspace(start.to_path_buf()))
}

/// kiln's own workspace Cargo.toml, as this crate was compiled: the pins a consumer's table
/// does not state (one source of truth: kiln-pins, by path or git, reads the file itself).
pub const BUILT_IN_MANIFEST: &str = include_str!("../kiln-workspace.toml");

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_toml() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml")).unwrap()
    }

    #[test]
    fn reads_the_real_workspace() {
        let pins = Pins::parse(&workspace_toml(), Path::new("Cargo.toml")).unwrap();
        assert_eq!(pins.toolchain.cuda_major_minor(), "13.0");
        assert!(pins.matrix.targets().len() >= 2);
        assert!(pins.runtime.contains_key("cudnn"));
        // The level is read, not restated: whatever manylinux_2_N Cargo.toml pins gives (2, N).
        let wheel = pins.wheel.as_ref().expect("[…wheel] table");
        let n: u32 = wheel.manylinux["manylinux_2_".len()..].parse().unwrap();
        assert_eq!(wheel.glibc(), Some((2, n)));
        assert_eq!(
            pins.max_ptx_isa(),
            crate::max_ptx_isa_for_driver(pins.min_driver)
                .unwrap()
                .ptx_isa
        );
    }

    #[test]
    fn malformed_matrix_entry_is_a_clear_error() {
        let text = workspace_toml().replacen("archs = [", "archs = [\"9.1\", ", 1);
        let e = Pins::parse(&text, Path::new("Cargo.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"9.1\"") && e.contains("not a compute capability"),
            "{e}"
        );
    }

    #[test]
    fn missing_table_and_unknown_keys() {
        let e = Pins::parse("[workspace]\n", Path::new("x/Cargo.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("[workspace.metadata.kiln] is missing"), "{e}");
        let text = workspace_toml().replacen("min-driver =", "min-drivr = \"1\"\nmin-driver =", 1);
        let e = Pins::parse(&text, Path::new("Cargo.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("min-drivr"), "{e}");
    }

    /// `[workspace.metadata.kiln.audit] allow`: optional, read as written, a reason required;
    /// a consumer table states its own and never inherits kiln's.
    #[test]
    fn audit_waivers_are_read_and_need_a_reason() {
        let pins = Pins::parse(&workspace_toml(), Path::new("Cargo.toml")).unwrap();
        assert!(pins.audit.allow.is_empty());
        let table = "\n[workspace.metadata.kiln.audit]\nallow = [\n  { rule = \"reach/gap\", path = \"nvidia/*/lib/*\", reason = \"Arm-only GPU\" },\n  { rule = \"tags/glibc-too-new\", reason = \"tested\" },\n]\n";
        let pins = Pins::parse(&(workspace_toml() + table), Path::new("C")).unwrap();
        assert_eq!(pins.audit.allow.len(), 2);
        assert_eq!(pins.audit.allow[0].path.as_deref(), Some("nvidia/*/lib/*"));
        assert_eq!(pins.audit.allow[1].path, None);
        let no_reason = table.replace("\"tested\"", "\" \"");
        let e = Pins::parse(&(workspace_toml() + &no_reason), Path::new("C"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("audit.allow[1]") && e.contains("reason"), "{e}");
        let typo = table.replace("reason = \"tested\"", "why = \"tested\"");
        assert!(Pins::parse(&(workspace_toml() + &typo), Path::new("C")).is_err());
    }

    #[test]
    fn a_bad_manylinux_level_is_rejected() {
        let toml = workspace_toml();
        let level = Pins::parse(&toml, Path::new("C"))
            .unwrap()
            .wheel
            .unwrap()
            .manylinux;
        let text = toml.replacen(
            &format!("manylinux = \"{level}\""),
            &format!("manylinux = \"{}\"", &level["manylinux_".len()..]),
            1,
        );
        assert_ne!(text, toml, "the pinned level was found and damaged");
        let e = Pins::parse(&text, Path::new("C")).unwrap_err().to_string();
        assert!(e.contains("PEP 600"), "{e}");
    }

    #[test]
    fn runtime_pins_have_an_exact_version_inside_an_abi_range() {
        let pins = Pins::parse(&workspace_toml(), Path::new("Cargo.toml")).unwrap();
        for (name, lib) in &pins.runtime {
            let abi = lib.abi();
            assert!(
                lib.version.starts_with(&format!("{}.", abi.major)),
                "{name}: {lib:?}"
            );
            assert_eq!(lib.requirement(), format!("{}{}", lib.wheel, lib.requires));
            assert_eq!(
                lib.exact_requirement(),
                format!("{}=={}", lib.wheel, lib.version)
            );
        }
        let cudnn = &pins.runtime["cudnn"];
        assert_eq!(
            cudnn.abi(),
            AbiRange {
                major: 9,
                min_minor: 19
            }
        );
    }

    /// The deliberate break: a range that excludes the exact pin is refused, naming both.
    #[test]
    fn exact_pin_outside_the_declared_range_is_refused() {
        let text =
            workspace_toml().replacen("requires = \">=9.19,<10\"", "requires = \">=9.23,<10\"", 1);
        let e = Pins::parse(&text, Path::new("Cargo.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("runtime.cudnn")
                && e.contains("9.22.0.52")
                && e.contains(">=9.23,<10")
                && e.contains("outside the declared range"),
            "{e}"
        );
    }

    #[test]
    fn only_abi_ranges_are_accepted() {
        for (bad, why) in [
            ("==9.22.0.52", "ABI range"),
            (">=9.19", "ABI range"),
            (">=9.19,<11", "ABI range"),
            (">=9.19,<=10", "ABI range"),
            (">=8.9,<9", "outside"),
            (">=10.0,<11", "outside"),
        ] {
            let text = workspace_toml().replacen(
                "requires = \">=9.19,<10\"",
                &format!("requires = \"{bad}\""),
                1,
            );
            let e = Pins::parse(&text, Path::new("Cargo.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // The range's major must be the soname's.
        let text = workspace_toml().replacen(
            "sonames = [\"libcudnn.so.9\"]",
            "sonames = [\"libcudnn.so.8\"]",
            1,
        );
        let e = Pins::parse(&text, Path::new("Cargo.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("libcudnn.so.8"), "{e}");
        assert_eq!(
            parse_abi_range(">=2.28 , <3"),
            Some(AbiRange {
                major: 2,
                min_minor: 28
            })
        );
    }

    #[test]
    fn bad_versions_are_rejected() {
        let text = workspace_toml().replacen("rust-nightly = \"", "rust-nightly = \"x", 1);
        assert!(Pins::parse(&text, Path::new("C")).is_err());
        let text = workspace_toml().replacen("nvcc = \"13.0.88\"", "nvcc = \"12.9.1\"", 1);
        let e = Pins::parse(&text, Path::new("C")).unwrap_err().to_string();
        assert!(e.contains("does not belong to CUDA"), "{e}");
    }
}
