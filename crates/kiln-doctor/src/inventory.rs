//! The environment inventory, in the spirit of `python -m torch.utils.collect_env`: what is
//! installed, as installed (never as pinned) — OS, glibc, the Python on PATH with its `nvidia-*`
//! wheels, torch and its CUDA, kiln's own wheel, the driver and GPUs, nvcc. Facts only; the
//! checks judge.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::driver::{cuda_version_text, Driver, NotLoaded};
use crate::env::Env;
use crate::run_error::RunError;

/// One installed distribution, from its `*.dist-info` (importlib.metadata).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PyDist {
    pub name: String,
    pub version: String,
    /// Its `Requires-Dist` lines (only kept for kiln's own wheel in JSON).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
}

/// torch as installed: its version and the CUDA it was built with (`torch.version.cuda`,
/// read from `torch/version.py` without importing torch; None = a CPU build).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Torch {
    pub version: String,
    pub cuda: Option<String>,
}

/// The Python the doctor found (the `python3` on PATH, or `--python`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Python {
    pub executable: String,
    pub version: String,
    /// Installed `nvidia-*` distributions (and `cuda-toolkit`), sorted by name.
    pub nvidia: Vec<PyDist>,
    #[serde(default)]
    pub torch: Option<Torch>,
    /// The distribution that ships kiln's extension (`kiln/_kiln*.so`), whatever its name.
    #[serde(default)]
    pub kiln: Option<PyDist>,
    /// Distributions that provide the top-level `kiln` import name but are not kiln's wheel
    /// (PyPI's unrelated `kiln`, for one): `import kiln` would get them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_kiln_imports: Vec<String>,
    /// sys.path entries that are directories (where the runtime libraries' wheels install).
    #[serde(default, skip_serializing)]
    pub sys_path: Vec<PathBuf>,
}

impl Python {
    /// The installed distribution `name` (PEP 503-normalized comparison).
    pub fn dist(&self, name: &str) -> Option<&PyDist> {
        let want = kiln_wheel::metadata::normalize_name(name);
        self.nvidia
            .iter()
            .chain(self.kiln.as_ref())
            .find(|d| kiln_wheel::metadata::normalize_name(&d.name) == want)
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DriverInfo {
    /// "580.95.05"; None when neither the library name nor /proc says.
    pub release: Option<String>,
    /// The CUDA version of the driver API, "13.0".
    pub cuda: Option<String>,
    pub path: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Inventory {
    /// PRETTY_NAME of /etc/os-release.
    pub os: Option<String>,
    /// `uname -r`.
    pub kernel: Option<String>,
    pub arch: &'static str,
    /// gnu_get_libc_version(); None on a non-glibc build.
    pub glibc: Option<String>,
    /// None when no Python could be asked; `python_error` says why.
    pub python: Option<Python>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_error: Option<String>,
    /// None: no driver loaded (`driver_error` says why).
    pub driver: Option<DriverInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_error: Option<String>,
    /// "NVIDIA H200 (sm_90)", one per GPU the driver lists.
    pub gpus: Vec<String>,
    /// `nvcc --version` of the nvcc a build would use ("13.0.88"), with its path.
    pub nvcc: Option<String>,
}

impl Inventory {
    pub(crate) fn gather(
        python: Result<Python, RunError>,
        driver: &Result<Driver, NotLoaded>,
        nvcc: Option<String>,
    ) -> Inventory {
        let (python, python_error) = match python {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let (driver_info, driver_error, gpus) = match driver {
            Ok(d) => (
                Some(DriverInfo {
                    release: d.release(),
                    cuda: d.cuda_version.map(cuda_version_text),
                    path: d.path.display().to_string(),
                }),
                None,
                d.gpus
                    .iter()
                    .map(|g| format!("{} (sm_{}{})", g.name, g.major, g.minor))
                    .collect(),
            ),
            Err(e) => (None, Some(e.reason.clone()), Vec::new()),
        };
        Inventory {
            os: os_release(),
            kernel: kernel_release(),
            arch: std::env::consts::ARCH,
            glibc: glibc_version(),
            python,
            python_error,
            driver: driver_info,
            driver_error,
            gpus,
            nvcc,
        }
    }
}

fn os_release() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .ok()?;
    parse_os_release(&text)
}

/// PRETTY_NAME="Debian GNU/Linux 12 (bookworm)" -> Debian GNU/Linux 12 (bookworm).
pub fn parse_os_release(text: &str) -> Option<String> {
    let v = text.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="))?;
    let v = v.trim().trim_matches('"').trim_matches('\'');
    (!v.is_empty()).then(|| v.to_string())
}

fn kernel_release() -> Option<String> {
    // SAFETY: uname fills the struct it is given; the fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return None;
        }
        Some(
            std::ffi::CStr::from_ptr(u.release.as_ptr())
                .to_string_lossy()
                .into_owned(),
        )
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_version() -> Option<String> {
    // SAFETY: returns a static NUL-terminated string.
    let p = unsafe { libc::gnu_get_libc_version() };
    (!p.is_null()).then(|| {
        // SAFETY: non-null, static, NUL-terminated (glibc's own version string).
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    })
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_version() -> Option<String> {
    None
}

/// Asks the Python at `program` (one short run, no import of torch or kiln) for its version,
/// sys.path and the distributions that matter here, by their installed metadata.
const PY_INVENTORY: &str = r#"
import json, os, platform, re, sys
from importlib import metadata as md
def norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()
out = {"executable": sys.executable, "version": platform.python_version(),
       "sys_path": [p for p in sys.path if p and os.path.isdir(p)],
       "nvidia": [], "torch": None, "kiln": None, "other_kiln_imports": []}
seen = set()
for d in md.distributions():
    try:
        name = d.metadata["Name"]
    except Exception:
        name = None
    if not name or norm(name) in seen:
        continue  # the first one on sys.path is the one imports get
    seen.add(norm(name))
    n = norm(name)
    if not (n.startswith(("nvidia-", "kiln")) or n in ("torch", "cuda-toolkit")):
        continue  # RECORDs are read only for what is reported
    files = d.files or []
    paths = [str(f).replace("\\", "/") for f in files]
    is_kiln = any(re.match(r"kiln/_kiln[.].*so$", p) for p in paths)
    entry = {"name": name, "version": d.version, "requires": []}
    if is_kiln:
        entry["requires"] = d.requires or []
        out["kiln"] = entry
    elif n.startswith("nvidia-") or n == "cuda-toolkit":
        out["nvidia"].append(entry)
    elif n == "torch":
        cuda = None
        if "torch/version.py" in paths:
            f = files[paths.index("torch/version.py")]
            try:
                m = re.search(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([^'\"]*)['\"]",
                              d.locate_file(f).read_text(), re.M)
                cuda = m.group(1) if m else None
            except OSError:
                pass
        out["torch"] = {"version": d.version, "cuda": cuda}
    elif any(p.startswith("kiln/") or p == "kiln.py" for p in paths):
        out["other_kiln_imports"].append(name + " " + d.version)
out["nvidia"].sort(key=lambda e: norm(e["name"]))
print(json.dumps(out))
"#;

/// The Python to inventory: `--python`, else `python3` on PATH.
pub(crate) fn python(env: &Env, program: Option<&Path>) -> Result<Python, RunError> {
    let program = match program {
        Some(p) => p.to_path_buf(),
        None => env.which("python3").ok_or(RunError::NoPython)?,
    };
    let out = env
        .command(&program)
        .args(["-c", PY_INVENTORY])
        .output()
        .map_err(RunError::spawn_path(&program))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(RunError::Failed {
            command: program.display().to_string(),
            detail: err.lines().last().unwrap_or("").trim().to_string(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).map_err(|source| RunError::NoInventory {
        program: program.display().to_string(),
        source,
        line: line.chars().take(200).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_os_release() {
        let text = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n";
        assert_eq!(
            parse_os_release(text).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(parse_os_release("ID=x\n"), None);
    }

    #[test]
    fn glibc_is_known_on_a_glibc_build() {
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            let v = glibc_version().unwrap();
            assert!(v.starts_with("2."), "{v}");
        }
    }
}
