//! Environment traps: the toolkit's stub libcuda where a loader finds it, an unversioned
//! `libcuda.so` that differs from the driver, CUDA_HOME disagreeing with PATH's nvcc, and
//! runtime libraries (cuDNN, NCCL, …) missing for the pinned majors.

use std::path::{Component, Path, PathBuf};

use kiln_pins::Pins;
use kiln_toolchain::Route;

use crate::driver::{Driver, NotLoaded, CUDA_ERROR_STUB_LIBRARY};
use crate::env::{Env, Found, LoaderPath, Via};
use crate::inventory::Python;
use crate::probe::{self, LibcudaProbe, ProbeCommand};
use crate::report::{Check, Scope};
use crate::toolchain_checks::nvcc_version;

/// Real driver libraries are tens of MB; the toolkit's stub is tens of KB.
const STUB_MAX_BYTES: u64 = 4 << 20;

/// Why a file is taken for the stub, or None for a real driver.
fn stub_reason(
    f: &Found,
    driver: &Result<Driver, NotLoaded>,
    probe: Option<&ProbeCommand>,
    env: &Env,
) -> Option<String> {
    if let Ok(d) = driver {
        if same_file(&f.path, &d.path) {
            return (d.init == CUDA_ERROR_STUB_LIBRARY)
                .then(|| "its cuInit returns CUDA_ERROR_STUB_LIBRARY".to_string());
        }
    }
    let in_stubs = f
        .path
        .components()
        .any(|c| matches!(c, Component::Normal(n) if n == "stubs"));
    let size = std::fs::metadata(&f.path).map(|m| m.len()).ok();
    let small = size.is_some_and(|s| s < STUB_MAX_BYTES);
    if !in_stubs && !small {
        return None;
    }
    // Confirm in a child: loading a suspect library into the doctor itself could poison it.
    let probed = probe
        .map(|p| probe::run::<LibcudaProbe>(p, env, &["libcuda".as_ref(), f.path.as_os_str()]));
    match probed {
        Some(Ok(LibcudaProbe {
            init: Some(CUDA_ERROR_STUB_LIBRARY),
            ..
        })) => Some("its cuInit returns CUDA_ERROR_STUB_LIBRARY".into()),
        _ if in_stubs => Some("it sits in a `stubs` directory".into()),
        Some(Ok(LibcudaProbe { init: Some(_), .. })) => None,
        _ => Some(format!(
            "it is only {} bytes (a driver is tens of MB)",
            size.unwrap_or(0)
        )),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn dir_fix(f: &Found) -> String {
    let dir = f
        .path
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    match f.via {
        Via::LdLibraryPath => {
            format!("remove {dir} from LD_LIBRARY_PATH (link against stubs with -L only)")
        }
        Via::LdconfigCache => format!("remove {dir} from /etc/ld.so.conf.d/*, then run `ldconfig`"),
        Via::DefaultDir => format!(
            "delete or move {} (it shadows the driver in a default library directory)",
            f.path.display()
        ),
    }
}

/// `trap.stub-libcuda` (one per stub found) and `trap.unversioned-libcuda`.
pub fn libcuda(
    env: &Env,
    loader: &LoaderPath,
    driver: &Result<Driver, NotLoaded>,
    probe: Option<&ProbeCommand>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut stubs = 0;
    for name in ["libcuda.so.1", "libcuda.so"] {
        for f in loader.find(name) {
            if let Some(why) = stub_reason(&f, driver, probe, env) {
                stubs += 1;
                let effect = if name == "libcuda.so.1" {
                    "every CUDA program that loads the driver gets it, and every CUDA call fails with CUDA_ERROR_STUB_LIBRARY"
                } else {
                    "loaders that try the unversioned name first (cudarc, some dlopen code) get it, and every CUDA call fails with CUDA_ERROR_STUB_LIBRARY"
                };
                checks.push(
                    Check::fail(
                        "trap.stub-libcuda",
                        Scope::Both,
                        format!("{} is the CUDA toolkit's stub ({why}), reachable as {name} through {}: {effect}", f.path.display(), f.via.describe()),
                    )
                    .with_fix(dir_fix(&f))
                    .with_subject(f.path.display().to_string()),
                );
            }
        }
    }
    if stubs == 0 {
        checks.push(Check::ok("trap.stub-libcuda", Scope::Both, "no stub libcuda where the dynamic loader looks (LD_LIBRARY_PATH, ldconfig cache, default dirs)"));
    }
    checks.push(unversioned(env, loader, driver, probe));
    checks
}

fn unversioned(
    env: &Env,
    loader: &LoaderPath,
    driver: &Result<Driver, NotLoaded>,
    probe: Option<&ProbeCommand>,
) -> Check {
    const ID: &str = "trap.unversioned-libcuda";
    let Some(first) = loader.find("libcuda.so").into_iter().next() else {
        return Check::ok(
            ID,
            Scope::Run,
            "no unversioned libcuda.so on the loader path; nothing can pick it before libcuda.so.1",
        );
    };
    let picked = format!("dlopen(\"libcuda.so\") — which cudarc and other loaders try before libcuda.so.1 — picks {} ({})", first.path.display(), first.via.describe());
    if let Some(why) = stub_reason(&first, driver, probe, env) {
        return Check::fail(
            ID,
            Scope::Run,
            format!("{picked}, the toolkit's stub ({why})"),
        )
        .with_fix(dir_fix(&first))
        .with_fix("load the driver as `libcuda.so.1` only (kiln does)");
    }
    match driver {
        Ok(d) if same_file(&first.path, &d.path) => {
            Check::ok(ID, Scope::Run, format!("{picked}: the same driver as libcuda.so.1"))
        }
        Ok(d) => Check::warn(ID, Scope::Run, format!("{picked}, but libcuda.so.1 is {}: two different driver libraries", d.path.display()))
            .with_fix(dir_fix(&first)),
        Err(_) => Check::warn(ID, Scope::Run, format!("{picked}, but there is no libcuda.so.1: programs that load the versioned name find no driver"))
            .with_fix("install the driver's libcuda.so.1 next to it"),
    }
}

/// `trap.cuda-home`: CUDA_HOME / CUDA_PATH must be the toolkit of the nvcc on PATH, or
/// CMake/nvcc builds mix headers and libraries of two releases.
pub fn cuda_home(env: &Env, route: Route) -> Check {
    const ID: &str = "trap.cuda-home";
    let on_path = env.which("nvcc");
    let path_version = on_path.as_ref().map(|p| (p, nvcc_version(env, p)));
    let mut homes = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(h) = env.get(var) {
            homes.push((var, PathBuf::from(h)));
        }
    }
    if homes.is_empty() {
        return Check::ok(
            ID,
            Scope::Build,
            "CUDA_HOME and CUDA_PATH are unset (builds find the toolkit through PATH)",
        );
    }
    for (var, home) in &homes {
        let nvcc = home.join("bin/nvcc");
        if !nvcc.is_file() {
            return Check::fail(
                ID,
                Scope::Build,
                format!("{var}={} holds no bin/nvcc", home.display()),
            )
            .with_fix(format!(
                "point {var} at the pinned toolkit ({}) or unset it",
                route.source_env()
            ));
        }
        let home_version = match nvcc_version(env, &nvcc) {
            Ok(v) => v,
            Err(e) => {
                return Check::fail(ID, Scope::Build, format!("{var}={}: {e}", home.display()))
            }
        };
        if let Some((p, Ok(pv))) = &path_version {
            if *pv != home_version {
                return Check::fail(
                    ID,
                    Scope::Build,
                    format!("{var}={} is nvcc {home_version}, but the nvcc on PATH ({}) is {pv}: a build would mix two CUDA releases", home.display(), p.display()),
                )
                .with_fix(format!("make them agree: `export {var}={}`, or put {}/bin first on PATH", p.parent().and_then(Path::parent).unwrap_or(Path::new("?")).display(), home.display()));
            }
        }
    }
    if let [(v1, h1), (v2, h2)] = homes.as_slice() {
        if !same_file(h1, h2) {
            return Check::warn(
                ID,
                Scope::Build,
                format!(
                    "{v1}={} and {v2}={} differ (same nvcc version)",
                    h1.display(),
                    h2.display()
                ),
            )
            .with_fix(format!("set both to the same toolkit, or unset {v2}"));
        }
    }
    let (var, home) = &homes[0];
    let tail = match &path_version {
        Some((p, Ok(v))) => format!("the nvcc on PATH ({}, {v})", p.display()),
        _ => "no nvcc on PATH to disagree with".into(),
    };
    Check::ok(
        ID,
        Scope::Build,
        format!("{var}={} agrees with {tail}", home.display()),
    )
}

/// Who declares the runtime libraries, i.e. what `pip install` of the wheel pulls in.
#[derive(Debug, Clone)]
pub enum Declared {
    /// The installed kiln wheel's own Requires-Dist: (distribution name and version, lines).
    Installed(String, Vec<String>),
    /// Not installed here; what the wheel built from this workspace declares (kiln-wheel's
    /// Requires-Dist rule over the pins): the distribution names.
    Workspace(Vec<String>),
    /// Neither is known (no installed wheel, no wheel table in these pins).
    Unknown,
}

impl Declared {
    /// Some(true/false) when known: does the wheel require `dist`?
    fn requires(&self, dist: &str) -> Option<bool> {
        use kiln_wheel::metadata::{normalize_name, parse_requires_dist};
        let want = normalize_name(dist);
        match self {
            Declared::Installed(_, lines) => {
                let headers: Vec<(String, String)> = lines
                    .iter()
                    .map(|l| ("Requires-Dist".to_string(), l.clone()))
                    .collect();
                Some(
                    parse_requires_dist(&headers)
                        .0
                        .iter()
                        .any(|r| r.name == want),
                )
            }
            Declared::Workspace(names) => Some(names.iter().any(|n| normalize_name(n) == want)),
            Declared::Unknown => None,
        }
    }

    fn whose(&self) -> String {
        match self {
            Declared::Installed(d, _) => format!("the installed {d}"),
            Declared::Workspace(_) => "kiln's wheel (built from these pins)".into(),
            Declared::Unknown => "the wheel".into(),
        }
    }
}

/// `trap.runtime-lib`, one per pinned runtime library: is each soname reachable at run time —
/// on the loader path, in CUDA_HOME, or where its PyPI wheel installs it — and is the release
/// found (as installed: the wheel's dist-info, else the file's own name) inside the range the
/// wheel declares? The pinned `version` is what kiln's build and tests use; a user's install
/// only has to be inside `requires`.
pub fn runtime_libs(
    env: &Env,
    loader: &LoaderPath,
    pins: &Pins,
    python: Option<&Python>,
    declared: &Declared,
) -> Vec<Check> {
    // A consumer that states no `runtime` has the list from kiln's own pins: the libraries
    // kiln's wheel loads, not ones this project asked for. Say so once instead of checking them.
    if pins.inherited.iter().any(|k| k == "runtime") && !pins.runtime.is_empty() {
        let names: Vec<&str> = pins.runtime.keys().map(String::as_str).collect();
        return vec![Check::skip(
            "trap.runtime-lib",
            Scope::Run,
            format!(
                "{}: not asked for by {} (its {} states no `runtime`; these are kiln's own pins) — state `runtime` there to have the libraries your binaries load checked",
                names.join(", "),
                pins.manifest.display(),
                pins.table("")
            ),
        )];
    }
    let site_dirs: &[PathBuf] = python.map(|p| p.sys_path.as_slice()).unwrap_or(&[]);
    let cuda_home: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| env.get(v).map(PathBuf::from))
        .flat_map(|h| [h.join("lib64"), h.join("lib")])
        .collect();
    let mut checks = Vec::new();
    for (name, lib) in &pins.runtime {
        let wheel_dirs: Vec<PathBuf> = site_dirs.iter().map(|s| s.join(&lib.lib_dir)).collect();
        let range = lib.requirement();
        let mut found = Vec::new();
        let mut missing = Vec::new();
        let mut outside = Vec::new();
        let mut releases: Vec<String> = Vec::new();
        for soname in &lib.sonames {
            let hit = loader
                .find(soname)
                .into_iter()
                .next()
                .map(|f| (f.path, f.via.describe().to_string()))
                .or_else(|| {
                    cuda_home
                        .iter()
                        .map(|d| (d.join(soname), "CUDA_HOME"))
                        .chain(
                            wheel_dirs
                                .iter()
                                .map(|d| (d.join(soname), "Python site-packages")),
                        )
                        .find(|(p, _)| p.exists())
                        .map(|(p, w)| (p, w.to_string()))
                });
            let Some((p, via)) = hit else {
                missing.push(soname.clone());
                continue;
            };
            // As installed: the wheel whose RECORD lists the file, else its real name's release.
            let release = match installed_owner(&p) {
                Some((dist, v)) => Some((format!("{dist} {v}"), v)),
                None => file_version(&p, soname).map(|v| (v.clone(), v)),
            };
            if let Some((_, v)) = &release {
                if !admits(&range, v) {
                    outside.push(format!("{soname} at {} is {v}", p.display()));
                }
            }
            let label = release
                .map(|(l, _)| l)
                .unwrap_or_else(|| "(release unknown)".into());
            if !releases.contains(&label) {
                releases.push(label);
            }
            found.push((soname.clone(), p, via));
        }
        let needed = declared.requires(&lib.wheel);
        let check = if !missing.is_empty() {
            let head = format!(
                "{name}: {} not found (looked on the loader path, in CUDA_HOME, and under {} in Python's site-packages)",
                missing.join(", "),
                lib.lib_dir
            );
            match needed {
                Some(false) => Check::skip(
                    "trap.runtime-lib",
                    Scope::Run,
                    format!("{head}; not needed: {} does not require {} (its Requires-Dist), and only programs that load {} themselves need it", declared.whose(), lib.wheel, missing.join(", ")),
                ),
                Some(true) => Check::warn(
                    "trap.runtime-lib",
                    Scope::Run,
                    format!("{head}; {} requires {range}", declared.whose()),
                )
                .with_fix(match declared {
                    Declared::Installed(..) => format!("`python3 -m pip install '{range}'` (the wheel's Requires-Dist names it, so pip should have installed it: was it installed with --no-deps?)"),
                    _ => format!("`python3 -m pip install '{range}'`, or install kiln's wheel, which requires it"),
                }),
                None => Check::warn("trap.runtime-lib", Scope::Run, head)
                    .with_fix(format!("`python3 -m pip install '{range}'`")),
            }
        } else if !outside.is_empty() {
            Check::warn(
                "trap.runtime-lib",
                Scope::Run,
                format!(
                    "{name}: {}, outside the range kiln's wheel declares ({range}): kiln's calls into it raise an error naming both versions",
                    outside.join(", ")
                ),
            )
            .with_fix(format!(
                "`python3 -m pip install '{range}'`, and put its lib dir first"
            ))
        } else {
            Check::ok(
                "trap.runtime-lib",
                Scope::Run,
                format!("{name}: {}, {}", releases.join(", "), where_found(&found)),
            )
        };
        checks.push(check.with_subject(name.clone()));
    }
    checks
}

/// "in DIR (via): a, b" when every soname sits in one place, else "a at P (via), b at Q (via)".
fn where_found(found: &[(String, PathBuf, String)]) -> String {
    let dir = |p: &PathBuf| p.parent().map(Path::to_path_buf);
    let names: Vec<&str> = found.iter().map(|(s, _, _)| s.as_str()).collect();
    match found {
        [(_, p0, v0), rest @ ..] if rest.iter().all(|(_, p, v)| dir(p) == dir(p0) && v == v0) => {
            format!(
                "{} in {} ({v0})",
                names.join(", "),
                dir(p0).unwrap_or_default().display()
            )
        }
        _ => found
            .iter()
            .map(|(s, p, v)| format!("{s} at {} ({v})", p.display()))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The `nvidia-*` wheel that installed `file`, as its dist-info says (name, version): the
/// RECORD of a `nvidia*.dist-info` in one of the file's parent directories lists it. This is
/// what pip installed — for site-packages and for `pip install --target` trees alike.
pub fn installed_owner(file: &Path) -> Option<(String, String)> {
    for root in file.ancestors().skip(1).take(5) {
        let Ok(rel) = file.strip_prefix(root) else {
            continue;
        };
        let rel = rel.to_string_lossy();
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if !(n.starts_with("nvidia") && n.ends_with(".dist-info")) {
                continue;
            }
            let Ok(record) = std::fs::read_to_string(e.path().join("RECORD")) else {
                continue;
            };
            if !record
                .lines()
                .any(|l| l.split(',').next() == Some(rel.as_ref()))
            {
                continue;
            }
            let meta = std::fs::read_to_string(e.path().join("METADATA")).unwrap_or_default();
            let headers = kiln_wheel::metadata::parse_headers(&meta);
            let get = |k: &str| {
                headers
                    .iter()
                    .find(|(h, _)| h.eq_ignore_ascii_case(k))
                    .map(|(_, v)| v.clone())
            };
            if let (Some(name), Some(version)) = (get("Name"), get("Version")) {
                return Some((name, version));
            }
        }
    }
    None
}

/// Does the range `requirement` (`nvidia-cublas>=13.0,<14`) admit release `version`?
fn admits(requirement: &str, version: &str) -> bool {
    let headers = [("Requires-Dist".to_string(), requirement.to_string())];
    kiln_wheel::metadata::parse_requires_dist(&headers)
        .0
        .first()
        .is_none_or(|r| r.admits(version))
}

/// The release a library file's real name carries beyond its soname: libcudnn.so.9 ->
/// libcudnn.so.9.27.0 gives "9.27.0"; None when the file is named by the soname only (wheels).
fn file_version(path: &Path, soname: &str) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let name = real.file_name()?.to_str()?;
    let stem = soname.split(".so.").next()?;
    let v = name.strip_prefix(stem)?.strip_prefix(".so.")?;
    (v.split('.').count() >= 2
        && v.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
    .then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_library_release_from_its_real_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libcudnn.so.9.10.2"), b"x").unwrap();
        std::os::unix::fs::symlink("libcudnn.so.9.10.2", dir.path().join("libcudnn.so.9")).unwrap();
        let v = file_version(&dir.path().join("libcudnn.so.9"), "libcudnn.so.9").unwrap();
        assert_eq!(v, "9.10.2");
        assert!(!admits("nvidia-cudnn-cu13>=9.19,<10", &v));
        assert!(admits("nvidia-cudnn-cu13>=9.19,<10", "9.27.0"));
        // As installed, not as pinned: a newer minor of the same major is inside the range.
        assert!(admits("nvidia-cublas>=13.0,<14", "13.10.0.20"));
        assert!(!admits("nvidia-cublas>=13.0,<14", "12.9.1.4"));
        std::fs::write(dir.path().join("libnccl.so.2"), b"x").unwrap();
        assert_eq!(
            file_version(&dir.path().join("libnccl.so.2"), "libnccl.so.2"),
            None
        );
    }
}
