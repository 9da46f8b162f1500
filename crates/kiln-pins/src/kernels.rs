//! A project's kernel-build table, `[package.metadata.kiln.kernels]` (or the workspace's): how
//! kiln-build compiles *this* library's sources — where they are, the flags they need, which
//! kernels exist only for some GPUs, how the output is split into modules and which CUDA
//! releases the project accepts. Every key is optional; an absent table is kiln's own layout
//! (`kernels/*.cu`, one module, kiln's exact nvcc). Never inherited from kiln's table.

use std::collections::BTreeMap;
use std::str::FromStr;

use kiln_arch::{Arch, ArchMatrix, MatrixEntry};
use serde::Deserialize;

use crate::PinsError;

/// The environment variable that narrows the matrix at build time (a consumer's
/// `CUDA_COMPUTE_CAP`): matrix entries separated by spaces, commas or `;`, each one the
/// declared matrix has ("8.9 9.0+PTX"). It can drop entries and drop `+PTX`, never add.
pub const MATRIX_OVERRIDE_VAR: &str = "KILN_ARCHS";

/// Nvcc flags kiln-build sets itself per job; a project that states them would build other
/// targets or outputs than the plan and the manifest say.
const RESERVED_FLAGS: &[&str] = &[
    "-o",
    "-c",
    "-cubin",
    "-ptx",
    "-fatbin",
    "-dc",
    "-dlink",
    "-lib",
    "-gencode",
    "-arch",
    "-code",
    "--gpu-architecture",
    "--gpu-code",
    "--generate-code",
    "-rdc",
    "-ewp",
    "-lineinfo",
    "-G",
    "--output-file",
    "--relocatable-device-code",
    "--extensible-whole-program",
];

/// How the compiled sources become loadable modules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModuleLayout {
    /// One module per target holding every kernel (a device link joins the sources).
    #[default]
    One,
    /// One module per source file, each its own fatbin: no device link, per-file helpers never
    /// meet, and a library can load modules lazily.
    PerSource,
}

/// Which targets a gated kernel (or every kernel of a gated source) exists for: `">=8.9"`
/// (the capability the source's `#if __CUDA_ARCH__ >= 890` names, and every newer one) or a
/// list of matrix capabilities (`["8.9", "9.0"]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum GateSpec {
    /// `">=MAJOR.MINOR"`.
    AtLeast(String),
    /// The capabilities, as the matrix writes them.
    Archs(Vec<String>),
}

/// A parsed gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Every capability at or above this number (89 for 8.9).
    AtLeast(u32),
    /// Exactly these capability numbers.
    Archs(Vec<u32>),
}

impl Gate {
    /// Whether code for `arch` exists under this gate.
    pub fn admits(&self, arch: Arch) -> bool {
        match self {
            Gate::AtLeast(n) => arch.number() >= *n,
            Gate::Archs(v) => v.contains(&arch.number()),
        }
    }

    fn parse(name: &str, spec: &GateSpec) -> Result<Gate, PinsError> {
        let bad = |why: String| PinsError::Invalid(format!("kernels.gates.{name:?}: {why}"));
        let cap = |s: &str| -> Result<u32, PinsError> {
            Arch::from_str(s.trim())
                .map(|a| a.number())
                .map_err(|e| bad(format!("{e}")))
        };
        match spec {
            GateSpec::AtLeast(s) => match s.trim().strip_prefix(">=") {
                Some(c) => Ok(Gate::AtLeast(cap(c)?)),
                None => Err(bad(format!(
                    "{s:?} is not \">=MAJOR.MINOR\" (or a list of capabilities)"
                ))),
            },
            GateSpec::Archs(v) if v.is_empty() => Err(bad(
                "an empty list gates the kernel out of every target; remove the kernel instead"
                    .into(),
            )),
            GateSpec::Archs(v) => Ok(Gate::Archs(
                v.iter().map(|s| cap(s)).collect::<Result<_, _>>()?,
            )),
        }
    }
}

impl std::fmt::Display for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gate::AtLeast(n) => write!(f, ">={}.{}", n / 10, n % 10),
            Gate::Archs(v) => {
                let s: Vec<String> = v.iter().map(|n| format!("{}.{}", n / 10, n % 10)).collect();
                write!(f, "[{}]", s.join(", "))
            }
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) struct RawKernels {
    #[serde(default)]
    dir: Option<String>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    defines: Vec<String>,
    #[serde(default)]
    include_dirs: Vec<String>,
    #[serde(default)]
    nvcc_flags: Vec<String>,
    #[serde(default)]
    modules: ModuleLayout,
    #[serde(default)]
    rdc: bool,
    #[serde(default)]
    gates: BTreeMap<String, GateSpec>,
    #[serde(default)]
    cuda: Option<String>,
    #[serde(default)]
    cache_max_mb: Option<u64>,
    #[serde(default)]
    host_sources: Vec<String>,
    #[serde(default)]
    static_lib: Option<String>,
}

/// `[…metadata.kiln.kernels]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelsPins {
    /// The sources' directory, relative to the project root ("kernels").
    pub dir: String,
    /// Source file names (relative to `dir`) to leave out; `*` and `?` match within a name.
    pub exclude: Vec<String>,
    /// Preprocessor definitions, `NAME` or `NAME=VALUE` (each becomes `-DNAME…`).
    pub defines: Vec<String>,
    /// Extra include directories, relative to the project root.
    pub include_dirs: Vec<String>,
    /// Further nvcc flags (not the ones kiln-build sets per job).
    pub nvcc_flags: Vec<String>,
    /// One module per target, or one per source file.
    pub modules: ModuleLayout,
    /// The library calls device functions across source files: compile relocatable device
    /// code (`-rdc=true`) and device-link it. Off: `-ewp` (whole program per file, linkable).
    pub rdc: bool,
    /// Kernel names and source file names (`fp8.cu`) mapped to the targets they exist for.
    pub gates: BTreeMap<String, Gate>,
    /// The nvcc releases the project accepts (PEP 440 specifiers, ">=12.8,<14"); None: kiln's
    /// exact pin.
    pub cuda: Option<String>,
    /// Size cap of the compile cache in MiB; least recently used entries go first.
    pub cache_max_mb: u64,
    /// Sources (names relative to `dir`; `*` and `?` match within a name) whose host code
    /// launches their kernels: compiled with it (`nvcc -c`, every target) into a static
    /// library the crate links, not into a module.
    pub host_sources: Vec<String>,
    /// That library's name (`lib<name>.a`); default "kiln_host_kernels".
    pub static_lib: String,
}

impl Default for KernelsPins {
    fn default() -> Self {
        KernelsPins {
            dir: "kernels".into(),
            exclude: Vec::new(),
            defines: Vec::new(),
            include_dirs: Vec::new(),
            nvcc_flags: Vec::new(),
            modules: ModuleLayout::One,
            rdc: false,
            gates: BTreeMap::new(),
            cuda: None,
            cache_max_mb: DEFAULT_CACHE_MAX_MB,
            host_sources: Vec::new(),
            static_lib: DEFAULT_STATIC_LIB.into(),
        }
    }
}

/// The static library's default name.
pub const DEFAULT_STATIC_LIB: &str = "kiln_host_kernels";

/// The default compile-cache cap: 4 GiB.
pub const DEFAULT_CACHE_MAX_MB: u64 = 4096;

impl KernelsPins {
    pub(crate) fn from_raw(raw: RawKernels) -> Result<KernelsPins, PinsError> {
        let bad = |m: String| PinsError::Invalid(format!("kernels.{m}"));
        let dir = raw.dir.unwrap_or_else(|| "kernels".into());
        if dir.is_empty() || dir.starts_with('/') {
            return Err(bad(format!(
                "dir = {dir:?}: a directory relative to the project root"
            )));
        }
        for d in &raw.defines {
            let name = d.split_once('=').map_or(d.as_str(), |(n, _)| n);
            let ok = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(bad(format!("defines: {d:?} is not NAME or NAME=VALUE")));
            }
        }
        for f in &raw.nvcc_flags {
            let stem = f.split_once('=').map_or(f.as_str(), |(s, _)| s);
            if RESERVED_FLAGS.contains(&stem) || f.starts_with("-gencode") || f.starts_with("-arch")
            {
                return Err(bad(format!(
                    "nvcc-flags: {f:?} is set by kiln-build per job (targets come from `archs`, \
                     outputs from `modules`/`rdc`; -lineinfo/-G embed paths and break byte-identical builds)"
                )));
            }
        }
        let mut gates = BTreeMap::new();
        for (name, spec) in &raw.gates {
            gates.insert(name.clone(), Gate::parse(name, spec)?);
        }
        if let Some(c) = &raw.cuda {
            pep440_rs::VersionSpecifiers::from_str(c).map_err(|e| {
                bad(format!(
                    "cuda = {c:?}: {e} (a range such as \">=12.8,<14\")"
                ))
            })?;
        }
        let static_lib = raw.static_lib.unwrap_or_else(|| DEFAULT_STATIC_LIB.into());
        let lib_ok = !static_lib.is_empty()
            && static_lib
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !lib_ok {
            return Err(bad(format!(
                "static-lib = {static_lib:?}: a library name (letters, digits, _ and -)"
            )));
        }
        if raw.cache_max_mb == Some(0) {
            return Err(bad(
                "cache-max-mb = 0 would evict every compiled kernel at once".into(),
            ));
        }
        Ok(KernelsPins {
            dir,
            exclude: raw.exclude,
            defines: raw.defines,
            include_dirs: raw.include_dirs,
            nvcc_flags: raw.nvcc_flags,
            modules: raw.modules,
            rdc: raw.rdc,
            gates,
            cuda: raw.cuda,
            cache_max_mb: raw.cache_max_mb.unwrap_or(DEFAULT_CACHE_MAX_MB),
            host_sources: raw.host_sources,
            static_lib,
        })
    }

    /// Whether `version` (nvcc's "13.0.88") is accepted: inside `cuda` when the project states
    /// it, else equal to `pinned`.
    pub fn accepts_nvcc(&self, version: &str, pinned: &str) -> bool {
        let Some(range) = &self.cuda else {
            return version == pinned;
        };
        let (Ok(spec), Ok(v)) = (
            pep440_rs::VersionSpecifiers::from_str(range),
            pep440_rs::Version::from_str(version),
        ) else {
            return false;
        };
        spec.contains(&v)
    }

    /// Whether a source (name relative to `dir`) is compiled with its host code into the static
    /// library.
    pub fn is_host_source(&self, name: &str) -> bool {
        self.host_sources
            .iter()
            .any(|p| wildcard(p.as_bytes(), name.as_bytes()))
    }

    /// Whether a source file name (relative to `dir`) is excluded.
    pub fn excludes(&self, name: &str) -> bool {
        self.exclude
            .iter()
            .any(|p| wildcard(p.as_bytes(), name.as_bytes()))
    }
}

/// `*` (any run) and `?` (one character) within a name; everything else literal.
fn wildcard(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// The matrix narrowed by [`MATRIX_OVERRIDE_VAR`]: every entry named must be in `declared`
/// (`+PTX` only where declared). Keeps the declared order.
pub fn narrow_matrix(declared: &ArchMatrix, text: &str) -> Result<ArchMatrix, PinsError> {
    let bad = |m: String| PinsError::Invalid(format!("{MATRIX_OVERRIDE_VAR}={text:?}: {m}"));
    let asked: Vec<MatrixEntry> = text
        .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| MatrixEntry::from_str(s).map_err(|e| bad(e.to_string())))
        .collect::<Result<_, _>>()?;
    if asked.is_empty() {
        return Err(bad(
            "names no target; unset it to build the whole matrix".into()
        ));
    }
    let mut kept = Vec::new();
    for d in declared.entries() {
        if let Some(a) = asked.iter().find(|a| a.arch == d.arch) {
            if a.ptx && !d.ptx {
                return Err(bad(format!(
                    "{a} adds PTX the declared matrix [{declared}] does not have; the override can only narrow"
                )));
            }
            kept.push(*a);
        }
    }
    if let Some(a) = asked
        .iter()
        .find(|a| !declared.entries().iter().any(|d| d.arch == a.arch))
    {
        return Err(bad(format!(
            "{a} is not in the declared matrix [{declared}]; the override can only narrow it"
        )));
    }
    ArchMatrix::new(kept).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernels(toml_text: &str) -> Result<KernelsPins, PinsError> {
        let raw: RawKernels = toml::from_str(toml_text).unwrap();
        KernelsPins::from_raw(raw)
    }

    #[test]
    fn gates_read_both_spellings_and_admit_by_capability() {
        let k = kernels("gates = { \"fp8.cu\" = \">=8.9\", hopper_only = [\"9.0\"] }").unwrap();
        let a = |s: &str| Arch::from_str(s).unwrap();
        let fp8 = &k.gates["fp8.cu"];
        assert!(!fp8.admits(a("8.0")) && fp8.admits(a("8.9")) && fp8.admits(a("12.0")));
        let h = &k.gates["hopper_only"];
        assert!(h.admits(a("9.0")) && h.admits(a("9.0a")) && !h.admits(a("10.0")));
        assert_eq!(fp8.to_string(), ">=8.9");
        assert!(kernels("gates = { x = \"8.9\" }").is_err());
        assert!(kernels("gates = { x = [] }").is_err());
        assert!(kernels("gates = { x = \">=7.7\" }").is_err());
    }

    #[test]
    fn flags_kiln_build_owns_are_refused() {
        for f in [
            "-gencode=arch=compute_90,code=sm_90",
            "-lineinfo",
            "-rdc=true",
            "-o",
        ] {
            let e = kernels(&format!("nvcc-flags = [{f:?}]"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("set by kiln-build"), "{f}: {e}");
        }
        assert!(kernels("nvcc-flags = [\"--use_fast_math\", \"-Xptxas=-v\"]").is_ok());
        assert!(kernels("defines = [\"1X\"]").is_err());
        assert!(kernels("defines = [\"USE_FP8\", \"N=4\"]").is_ok());
    }

    #[test]
    fn the_cuda_range_accepts_inside_and_the_pin_otherwise() {
        let k = kernels("cuda = \">=12.8,<14\"").unwrap();
        assert!(k.accepts_nvcc("13.0.88", "13.0.88") && k.accepts_nvcc("12.9.41", "13.0.88"));
        assert!(!k.accepts_nvcc("12.4.131", "13.0.88") && !k.accepts_nvcc("14.0.1", "13.0.88"));
        let exact = KernelsPins::default();
        assert!(
            exact.accepts_nvcc("13.0.88", "13.0.88") && !exact.accepts_nvcc("13.0.48", "13.0.88")
        );
        assert!(kernels("cuda = \"thirteen\"").is_err());
    }

    #[test]
    fn excludes_match_names_with_wildcards() {
        let k = kernels("exclude = [\"wip_*.cu\", \"t?st.cu\"]").unwrap();
        assert!(k.excludes("wip_fp4.cu") && k.excludes("test.cu"));
        assert!(!k.excludes("fp8.cu") && !k.excludes("tests.cu"));
    }

    #[test]
    fn the_override_only_narrows() {
        let m = ArchMatrix::parse(&["8.0", "8.9", "9.0+PTX"]).unwrap();
        assert_eq!(narrow_matrix(&m, "9.0+PTX").unwrap().to_string(), "9.0+PTX");
        assert_eq!(
            narrow_matrix(&m, "9.0, 8.0").unwrap().to_string(),
            "8.0 9.0"
        );
        let e = narrow_matrix(&m, "8.9+PTX").unwrap_err().to_string();
        assert!(e.contains("can only narrow"), "{e}");
        let e = narrow_matrix(&m, "10.0").unwrap_err().to_string();
        assert!(e.contains("not in the declared matrix"), "{e}");
        assert!(narrow_matrix(&m, " ").is_err());
    }
}
