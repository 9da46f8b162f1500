//! linkage/*: every NEEDED and dlopen soname resolves; no driver stub, no bundled driver, no
//! build-tree RUNPATH; tags/glibc-too-new.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;

use crate::facts::{Artifact, Binary, DlopenFeature, ElfFacts, InputKind};
use crate::finding::{finding, finding_lower, Finding, Rule};
use crate::policy::Policy;
use crate::read::runpath;
use crate::rules::nvidia_wheels;
use crate::rules::platform;

/// How one soname a binary needs is found at run time.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Resolution {
    /// The binary that needs it.
    pub file: String,
    /// The soname as written.
    pub soname: String,
    /// "needed" or "dlopen"
    pub how: &'static str,
    /// Where it resolves.
    #[schemars(with = "String")]
    pub via: Via,
}

/// Where a soname resolves. In JSON and text: "bundled:<path>", "system", "driver", "python",
/// "path", "wheel:<dist>", "installed:<dist>:<dir>", "external:<dist>" or "unresolved".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// Inside the input, through an `$ORIGIN` RUNPATH.
    Bundled(String),
    /// The platform's system libraries (manylinux policy).
    System,
    /// The NVIDIA driver's libraries.
    Driver,
    /// libpython, provided by the interpreter.
    Python,
    /// The soname is a path; the loader takes it as is.
    Path,
    /// A runtime wheel that Requires-Dist declares.
    Wheel(String),
    /// A runtime wheel present in the directory (site-packages) being audited.
    Installed {
        /// The wheel's distribution name.
        wheel: String,
        /// Its library directory, relative to the input.
        dir: String,
    },
    /// A runtime wheel, for an input that has no metadata to declare it.
    External(String),
    /// Nowhere: the loader fails (NEEDED) or the feature is missing (dlopen).
    Unresolved,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Via::Bundled(p) => write!(f, "bundled:{p}"),
            Via::System => f.write_str("system"),
            Via::Driver => f.write_str("driver"),
            Via::Python => f.write_str("python"),
            Via::Path => f.write_str("path"),
            Via::Wheel(w) => write!(f, "wheel:{w}"),
            Via::Installed { wheel, dir } => write!(f, "installed:{wheel}:{dir}"),
            Via::External(w) => write!(f, "external:{w}"),
            Via::Unresolved => f.write_str("unresolved"),
        }
    }
}

impl Serialize for Via {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

const BUILD_TREE_MARKERS: &[&str] = &[
    "/nix/store",
    "/home/",
    "/tmp/",
    "bazel-out",
    "/build/",
    "/target/",
    "/root/",
    "/usr/local/cuda",
];

/// What resolving a soname looks at: the input, the policy, and each file name's first path in
/// the input (for the "a copy is at …" hint).
struct Lookup<'a> {
    artifact: &'a Artifact,
    policy: &'a Policy,
    by_name: HashMap<&'a str, &'a str>,
}

impl<'a> Lookup<'a> {
    fn new(artifact: &'a Artifact, policy: &'a Policy) -> Lookup<'a> {
        // File name -> first path holding it: one pass, so the "a copy is at …" hint costs a
        // lookup per unresolved soname, not a scan of every file (30k files x 30k NEEDED was
        // quadratic).
        let mut by_name: HashMap<&str, &str> = HashMap::new();
        for f in &artifact.files {
            by_name
                .entry(f.rsplit('/').next().unwrap_or(f))
                .or_insert(f);
        }
        Lookup {
            artifact,
            policy,
            by_name,
        }
    }
}

/// Every linkage rule over every ELF, in the order their findings are listed; returns how each
/// NEEDED and dlopen soname resolved.
pub fn check(artifact: &Artifact, policy: &Policy, findings: &mut Vec<Finding>) -> Vec<Resolution> {
    let mut out = Vec::new();
    let cx = Lookup::new(artifact, policy);
    let ceiling = glibc_ceiling(artifact, policy);
    for b in &artifact.binaries {
        let Some(elf) = &b.elf else { continue };
        build_tree_runpath(b, elf, findings);
        machine_mismatch(artifact, policy, b, elf, findings);
        cuda_major_mix(b, &elf.needed, findings);
        runpath_into_other_wheels(artifact, policy, b, findings);
        needed_paths(b, elf, findings);
        for n in &elf.needed {
            out.push(resolve_needed(&cx, b, n, findings));
        }
        for feature in &elf.dlopen {
            out.extend(resolve_dlopen(&cx, b, feature, findings));
        }
        undeclared_dlopen(artifact, policy, b, findings);
        bad_dlopen_notes(b, elf, findings);
        cxx_too_new(artifact, policy, b, elf, findings);
        glibc_too_new(b, elf, ceiling.as_ref(), findings);
    }
    out
}

/// linkage/build-tree-runpath: a RUNPATH/RPATH entry that is not `$ORIGIN`-relative.
fn build_tree_runpath(b: &Binary, elf: &ElfFacts, findings: &mut Vec<Finding>) {
    for entry in elf.runpath.iter().chain(&elf.rpath) {
        if entry.starts_with("$ORIGIN") || entry.starts_with("${ORIGIN}") {
            continue;
        }
        let marker = BUILD_TREE_MARKERS.iter().find(|m| entry.contains(*m));
        let why = match marker {
            Some(m) => format!("points into a build tree ({m})"),
            None if entry.starts_with('/') => {
                "is absolute: it names a directory on the build machine".into()
            }
            None => "is relative to the working directory, not to the library".into(),
        };
        findings.push(finding(
            Rule::LinkageBuildTreeRunpath,
            &b.path,
            format!("RUNPATH/RPATH entry {entry:?} {why}"),
            "set RUNPATH to $ORIGIN-relative paths only: patchelf --set-rpath '$ORIGIN/../lib' FILE",
        ));
    }
}

/// tags/machine-mismatch: `e_machine` is not the architecture the platform tag runs.
fn machine_mismatch(
    artifact: &Artifact,
    policy: &Policy,
    b: &Binary,
    elf: &ElfFacts,
    findings: &mut Vec<Finding>,
) {
    let Some((plat, (machine, name))) = machine_expected(artifact, policy) else {
        return;
    };
    if elf.machine != machine {
        findings.push(finding(
            Rule::TagsMachineMismatch,
            &b.path,
            format!("e_machine is {}, but platform tag {plat} runs {name} ({machine}): the loader refuses the file", elf.machine),
            "build the library for the tagged architecture, or tag the wheel for the one it was built for",
        ));
    }
}

/// linkage/needed-path: a NEEDED entry holding `/`.
fn needed_paths(b: &Binary, elf: &ElfFacts, findings: &mut Vec<Finding>) {
    for n in elf.needed.iter().filter(|n| n.contains('/')) {
        findings.push(finding(
            Rule::LinkageNeededPath,
            &b.path,
            format!("NEEDED {n:?} contains `/`: the loader opens that path as written (a path on the build machine), never searching RUNPATH"),
            "link against the library by its soname (patchelf --replace-needed PATH SONAME FILE)",
        ));
    }
}

/// How one NEEDED soname resolves; linkage/driver-stub-needed for the driver's stub name,
/// else the findings of [`resolve`].
fn resolve_needed(cx: &Lookup, b: &Binary, n: &str, findings: &mut Vec<Finding>) -> Resolution {
    let via = if let Some(real) = platform::driver_stub_for(n) {
        findings.push(finding(
            Rule::LinkageDriverStubNeeded,
            &b.path,
            format!("NEEDED {n}: the toolkit's link-time stub name; at run time only the driver's {real} exists"),
            format!("link against the versioned soname (patchelf --replace-needed {n} {real} FILE), or load the driver with dlopen(\"{real}\")"),
        ));
        Via::Unresolved
    } else {
        resolve(cx, b, n, "needed", findings)
    };
    Resolution {
        file: b.path.clone(),
        soname: n.to_string(),
        how: "needed",
        via,
    }
}

/// How each alternative of one `.note.dlopen` feature resolves. A feature is satisfied by any
/// alternative: only when none resolves are the alternatives' findings kept, with
/// linkage/unresolved-dlopen for the feature (lower severity unless it is required).
fn resolve_dlopen(
    cx: &Lookup,
    b: &Binary,
    feature: &DlopenFeature,
    findings: &mut Vec<Finding>,
) -> Vec<Resolution> {
    let mut scratch = Vec::new();
    let vias: Vec<(String, Via)> = feature
        .soname
        .iter()
        .map(|s| (s.clone(), resolve(cx, b, s, "dlopen", &mut scratch)))
        .collect();
    if !vias.iter().any(|(_, v)| *v != Via::Unresolved) {
        findings.extend(
            scratch
                .into_iter()
                .filter(|f| f.rule != Rule::LinkageUnresolvedDlopen),
        );
        let message = format!(
            "dlopen feature {:?} ({}) lists {:?}; none resolves inside the wheel, its Requires-Dist or the platform",
            feature.feature.as_deref().unwrap_or("?"),
            feature.priority.as_deref().unwrap_or("recommended"),
            feature.soname
        );
        let fix = "bundle the library, add the wheel that ships it to Requires-Dist, or fix the soname in the .note.dlopen note";
        // An optional feature is registered with a lower severity (finding::LOWER_SEVERITY).
        findings.push(if feature.priority.as_deref() == Some("required") {
            finding(Rule::LinkageUnresolvedDlopen, &b.path, message, fix)
        } else {
            finding_lower(Rule::LinkageUnresolvedDlopen, &b.path, message, fix)
        });
    }
    vias.into_iter()
        .map(|(soname, via)| Resolution {
            file: b.path.clone(),
            soname,
            how: "dlopen",
            via,
        })
        .collect()
}

/// linkage/bad-dlopen-note: a `.note.dlopen` that could not be read.
fn bad_dlopen_notes(b: &Binary, elf: &ElfFacts, findings: &mut Vec<Finding>) {
    for e in &elf.dlopen_errors {
        findings.push(finding(
            Rule::LinkageBadDlopenNote,
            &b.path,
            e.clone(),
            "write the note as the FDO ELF dlopen metadata JSON array",
        ));
    }
}

/// tags/glibc-too-new: a GLIBC_ version newer than the platform tag guarantees.
fn glibc_too_new(
    b: &Binary,
    elf: &ElfFacts,
    ceiling: Option<&(String, (u32, u32))>,
    findings: &mut Vec<Finding>,
) {
    let (Some(have), Some((plat, max))) = (elf.max_glibc, ceiling) else {
        return;
    };
    if have > *max {
        findings.push(finding(
            Rule::TagsGlibcTooNew,
            &b.path,
            format!("needs GLIBC_{}.{}, but platform {plat} guarantees only glibc {}.{}", have.0, have.1, max.0, max.1),
            format!("build against an older glibc (manylinux container, or zig cc) or claim manylinux_{}_{}", have.0, have.1),
        ));
    }
}

/// NEEDED runtime libraries of two CUDA majors (libcudart.so.12 beside libcublas.so.13): two
/// runtimes in one process, each expecting its own driver entry points and device code.
fn cuda_major_mix(b: &Binary, needed: &[String], findings: &mut Vec<Finding>) {
    let mut by_major: std::collections::BTreeMap<u32, Vec<&str>> = Default::default();
    for n in needed {
        if let Some(m) = nvidia_wheels::cuda_major_of(n) {
            by_major.entry(m).or_default().push(n);
        }
    }
    if by_major.len() > 1 {
        let parts: Vec<String> = by_major
            .iter()
            .map(|(m, names)| format!("CUDA {m}: {}", names.join(", ")))
            .collect();
        findings.push(finding(
            Rule::LinkageCudaMajorMix,
            &b.path,
            format!(
                "NEEDs runtime libraries of {} CUDA majors ({})",
                by_major.len(),
                parts.join("; ")
            ),
            "link every CUDA library from one toolkit major (rebuild against one CUDA, or drop the stray NEEDED)",
        ));
    }
}

/// `$ORIGIN` RUNPATH entries that lead into another wheel's library directory (e.g.
/// `$ORIGIN/../../nvidia/cudnn/lib`) that Requires-Dist does not name. Judged per soname: a
/// library the binary needs or names from that directory is judged where it resolves (the wheel
/// that ships *that soname* is named there), so this finding is only for a RUNPATH whose
/// directory gives the binary nothing it names. `nvidia/cu13/lib` is shared by every CUDA 13
/// component wheel: no one wheel is named for it.
fn runpath_into_other_wheels(
    artifact: &Artifact,
    policy: &Policy,
    b: &Binary,
    findings: &mut Vec<Finding>,
) {
    let (Some(meta), Some(elf)) = (&artifact.wheel, &b.elf) else {
        return;
    };
    for (entry, dir) in runpath::origin_dirs(&b.path, elf) {
        if holds_own_files(artifact, &dir) {
            continue;
        }
        let loads_from_there =
            loaded_sonames(elf).any(|s| providers_of(policy, s).iter().any(|(_, d)| *d == dir));
        if loads_from_there {
            continue;
        }
        let wheels = wheels_at(policy, &dir);
        if wheels.is_empty() {
            continue;
        }
        let declared = meta.requires_dist.iter().any(|r| {
            wheels.contains(&r.name) || (r.name == "cuda-toolkit" && dir.starts_with("nvidia/cu13"))
        });
        if declared {
            continue;
        }
        let (whose, fix) = whose_directory(&dir, &wheels);
        findings.push(finding(
            Rule::LinkageRunpathUndeclaredWheel,
            &b.path,
            format!("RUNPATH {entry:?} leads to {dir}/, {whose}, which METADATA does not require"),
            fix,
        ));
    }
}

/// Whether the input's own files are in `dir`: a bundled directory, not another wheel's. (A
/// range lookup in the sorted set: a scan of every file per RUNPATH entry was quadratic —
/// 30,000 libraries took 5.7 s, most of it in memcmp.)
fn holds_own_files(artifact: &Artifact, dir: &str) -> bool {
    let prefix = format!("{dir}/");
    let first_at_or_after = artifact
        .files
        .range::<str, _>((
            std::ops::Bound::Included(prefix.as_str()),
            std::ops::Bound::Unbounded,
        ))
        .next();
    first_at_or_after.is_some_and(|f| f.starts_with(&prefix))
}

/// The wheels whose library directory `dir` is: kiln's runtime pins, then NVIDIA's layouts.
fn wheels_at(policy: &Policy, dir: &str) -> Vec<String> {
    let mut wheels: Vec<String> = policy
        .runtime
        .values()
        .filter(|lib| lib.lib_dir == dir)
        .map(|lib| kiln_wheel::metadata::normalize_name(&lib.wheel))
        .collect();
    for layout in nvidia_wheels::layouts_at(dir) {
        wheels.extend(layout.wheels.iter().map(|w| w.to_string()));
    }
    wheels
}

/// Whose directory `dir` is, and the fix, for linkage/runpath-undeclared-wheel.
fn whose_directory(dir: &str, wheels: &[String]) -> (String, String) {
    if nvidia_wheels::layouts_at(dir).count() > 1 {
        (
            format!(
                "a directory shared by {} wheels ({}, …); no library this binary needs or names is known to come from there",
                nvidia_wheels::layouts_at(dir).count(),
                nvidia_wheels::layouts_at(dir)
                    .take(3)
                    .map(|l| l.wheels[0])
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "drop the RUNPATH entry, or require the wheel of the library the binary loads from there".to_string(),
        )
    } else {
        (
            format!("the library directory of the {} wheel", wheels[0]),
            format!(
                "add `Requires-Dist: {}` to the package metadata, or drop the RUNPATH entry",
                wheels[0]
            ),
        )
    }
}

/// Every soname the binary loads or may load: NEEDED, `.note.dlopen`, and sonames named in its
/// read-only data.
fn loaded_sonames(elf: &crate::facts::ElfFacts) -> impl Iterator<Item = &str> {
    elf.needed
        .iter()
        .chain(elf.dlopen.iter().flat_map(|f| &f.soname))
        .chain(&elf.rodata_sonames)
        .map(String::as_str)
}

/// The distribution a binary belongs to (normalized): the audited wheel's own, or in a
/// directory, the one whose RECORD lists the file.
fn dist_of(artifact: &Artifact, path: &str) -> Option<String> {
    let meta = artifact.wheel.as_ref()?;
    if artifact.kind == InputKind::Directory {
        return meta
            .records
            .iter()
            .find(|r| r.rows.as_ref().is_some_and(|rows| rows.contains_key(path)))
            .map(|r| dist_name(&r.dist_info));
    }
    meta.filename
        .as_ref()
        .map(|f| kiln_wheel::metadata::normalize_name(&f.name))
        .or_else(|| meta.dist_info.first().map(|d| dist_name(d)))
}

/// `foo_bar-1.0.dist-info` -> `foo-bar`.
fn dist_name(dist_info: &str) -> String {
    let stem = dist_info.trim_end_matches(".dist-info");
    kiln_wheel::metadata::normalize_name(stem.split_once('-').map_or(stem, |(n, _)| n))
}

/// In a directory (site-packages), the installed distribution whose RECORD lists `path`: the
/// wheel that really ships the file, read from the installed RECORDs rather than the table.
fn installed_by_record(artifact: &Artifact, path: &str) -> Option<String> {
    if artifact.kind != InputKind::Directory || !artifact.files.contains(path) {
        return None;
    }
    artifact
        .wheel
        .as_ref()?
        .records
        .iter()
        .find(|r| r.rows.as_ref().is_some_and(|rows| rows.contains_key(path)))
        .map(|r| dist_name(&r.dist_info))
}

/// A provider wheel required only under an extra: `pip install pkg` does not install it, and the
/// binary cannot load.
fn extra_only(
    meta: &crate::facts::WheelMeta,
    wheel: &str,
    file: &str,
    how: &str,
    soname: &str,
    findings: &mut Vec<Finding>,
) {
    let reqs: Vec<_> = meta
        .requires_dist
        .iter()
        .filter(|r| r.name == wheel)
        .collect();
    let under_extra = |r: &&kiln_wheel::metadata::Requirement| {
        r.marker.as_deref().is_some_and(|m| m.contains("extra"))
    };
    if !reqs.is_empty() && reqs.iter().all(under_extra) {
        let marker = reqs[0].marker.as_deref().unwrap_or("");
        findings.push(finding(
            Rule::LinkageExtraOnlyDependency,
            file,
            format!("{how} {soname} comes from {wheel}, which METADATA requires only when `{marker}`: a plain `pip install` leaves this library unloadable"),
            format!("require {wheel} unconditionally, or load the library with dlopen and degrade without it"),
        ));
    }
}

/// GLIBCXX / CXXABI symbol versions newer than the libstdc++ the platform tags guarantee, as
/// auditwheel's manylinux policies list them (platform::cxx_ceiling).
fn cxx_too_new(
    artifact: &Artifact,
    policy: &Policy,
    b: &Binary,
    elf: &crate::facts::ElfFacts,
    findings: &mut Vec<Finding>,
) {
    let Some((plat, (max_cxx, max_abi))) = platforms(artifact, policy)
        .into_iter()
        .filter_map(|p| platform::cxx_ceiling(&p).map(|c| (p, c)))
        .min_by_key(|(_, (cxx, _))| crate::read::elf::version_key(cxx))
    else {
        return;
    };
    let newer = |have: &Option<String>, max: &str| {
        have.as_deref()
            .filter(|h| crate::read::elf::version_key(h) > crate::read::elf::version_key(max))
            .map(str::to_string)
    };
    for (what, have, max) in [
        ("GLIBCXX", newer(&elf.max_glibcxx, max_cxx), max_cxx),
        ("CXXABI", newer(&elf.max_cxxabi, max_abi), max_abi),
    ] {
        if let Some(have) = have {
            findings.push(finding(
                Rule::TagsCxxAbiTooNew,
                &b.path,
                format!("needs {what}_{have}, but platform {plat} guarantees libstdc++ only up to {what}_{max} (auditwheel's manylinux policy)"),
                "build with an older GCC's libstdc++ (the manylinux container of that tag), link libstdc++ statically, or claim a newer manylinux tag",
            ));
        }
    }
}

/// The platform tags that apply: the wheel's own (WHEEL and file name) and --platform.
fn platforms(artifact: &Artifact, policy: &Policy) -> Vec<String> {
    let mut platforms: Vec<String> = Vec::new();
    if let Some(w) = &artifact.wheel {
        platforms.extend(w.tags.iter().map(|t| platform::platform_of(t).to_string()));
        if let Some(f) = &w.filename {
            platforms.extend(f.tags.iter().map(|t| platform::platform_of(t).to_string()));
        }
    }
    platforms.extend(policy.platform.clone());
    platforms
}

/// The most restrictive glibc ceiling among the wheel's platform tags and --platform.
fn glibc_ceiling(artifact: &Artifact, policy: &Policy) -> Option<(String, (u32, u32))> {
    platforms(artifact, policy)
        .into_iter()
        .filter_map(|p| platform::glibc_ceiling(&p).map(|c| (p, c)))
        .min_by_key(|(_, c)| *c)
}

/// The architecture the wheel's platform tags (or --platform) name: the first that names one.
fn machine_expected(artifact: &Artifact, policy: &Policy) -> Option<(String, (u16, &'static str))> {
    let w = artifact.wheel.as_ref();
    w.into_iter()
        .flat_map(|w| w.tags.iter().chain(w.filename.iter().flat_map(|f| &f.tags)))
        .map(|t| platform::platform_of(t))
        .chain(policy.platform.as_deref())
        .find_map(|p| platform::machine_for(p).map(|m| (p.to_string(), m)))
}

/// Run once per input (rules/mod.rs), not per distribution: it looks at every file.
pub fn bundled_driver(artifact: &Artifact, findings: &mut Vec<Finding>) {
    for f in &artifact.files {
        let name = f.rsplit('/').next().unwrap_or(f);
        if let Some(lib) = platform::bundled_driver_lib(name) {
            findings.push(finding(
                Rule::LinkageDriverBundled,
                f,
                format!("{f} is a copy of the NVIDIA driver library {lib}; it must match the installed kernel module"),
                "remove it from the wheel (auditwheel repair --exclude libcuda.so.1); the driver provides it",
            ));
        }
    }
}

/// The runtime wheels that ship `soname`, with their library directory: kiln's pins first,
/// then the maintained table of NVIDIA layouts.
fn providers_of(policy: &Policy, soname: &str) -> Vec<(String, String)> {
    let mut providers: Vec<(String, String)> = Vec::new();
    for lib in policy.runtime.values() {
        if lib.sonames.iter().any(|s| s == soname) {
            providers.push((
                kiln_wheel::metadata::normalize_name(&lib.wheel),
                lib.lib_dir.clone(),
            ));
        }
    }
    for layout in nvidia_wheels::layouts_for(soname) {
        for w in layout.wheels {
            providers.push((w.to_string(), layout.lib_dir.to_string()));
        }
    }
    providers
}

/// Sonames named in read-only data that neither NEEDED nor `.note.dlopen` declares: what the
/// binary may `dlopen` by name (cuDNN dlopens cuBLAS). Reported when a known runtime wheel
/// ships them: a warning naming that wheel when Requires-Dist does not require it (the library
/// is missing after `pip install`), info when it does, or when the input has no metadata, or
/// when the wheel ships the library itself or a directory has it installed.
fn undeclared_dlopen(
    artifact: &Artifact,
    policy: &Policy,
    b: &Binary,
    findings: &mut Vec<Finding>,
) {
    let Some(elf) = &b.elf else { return };
    let own = dist_of(artifact, &b.path);
    for s in &elf.rodata_sonames {
        let declared = elf.needed.contains(s) || elf.dlopen.iter().any(|f| f.soname.contains(s));
        if declared || elf.soname.as_deref() == Some(s.as_str()) {
            continue;
        }
        let providers = providers_of(policy, s);
        let Some((wheel, dir)) = providers.first() else {
            continue;
        };
        // Its own wheel's library (libcudnn.so.9 names libcudnn_graph.so.9): bundled, not
        // another wheel's; whether it is there is the bundled library's question.
        if providers.iter().any(|(w, _)| Some(w) == own.as_ref()) {
            continue;
        }
        let installed = installed_by_record(artifact, &format!("{dir}/{s}"));
        let required = artifact.wheel.as_ref().map(|m| {
            m.requires_dist.iter().any(|r| {
                providers.iter().any(|(w, d)| {
                    *w == r.name || (r.name == "cuda-toolkit" && d.starts_with("nvidia/cu13"))
                })
            })
        });
        let (status, fix, missing) = match (required, &installed) {
            (Some(true), _) => ("which Requires-Dist names", "declare it in a .note.dlopen note (FDO ELF dlopen metadata) so tools can see the dependency".to_string(), false),
            (_, Some(dist)) if artifact.kind == InputKind::Directory => (
                if dist == wheel { "installed here" } else { "installed here by another distribution" },
                "declare it in a .note.dlopen note (FDO ELF dlopen metadata) and require the wheel that ships it".to_string(),
                false,
            ),
            (Some(false), _) => (
                "which Requires-Dist does not name: after `pip install` the library is missing and the feature that loads it fails at run time",
                format!("add `Requires-Dist: {wheel}` with a range (or `cuda-toolkit[…]` for a CUDA 13 component), and declare the dlopen in a .note.dlopen note"),
                true,
            ),
            (None, _) => ("a runtime wheel", "declare it in a .note.dlopen note (FDO ELF dlopen metadata) so tools can see the dependency, and require the wheel when it is not optional".to_string(), false),
        };
        let shipped_by = installed.as_deref().unwrap_or(wheel);
        let message = format!("names {s} in its read-only data but neither NEEDS it nor lists it in .note.dlopen: it may dlopen it; {shipped_by} ships it ({status})");
        findings.push(if missing {
            finding(Rule::LinkageUndeclaredDlopen, &b.path, message, fix)
        } else {
            finding_lower(Rule::LinkageUndeclaredDlopen, &b.path, message, fix)
        });
    }
}

/// Where `soname` comes from for binary `b`; pushes a finding when it does not resolve. In
/// order: a path; inside the input through an `$ORIGIN` RUNPATH; the platform; a runtime wheel
/// (kiln's pins first, then the table of NVIDIA wheels); nowhere.
fn resolve(
    cx: &Lookup,
    b: &Binary,
    soname: &str,
    how: &'static str,
    findings: &mut Vec<Finding>,
) -> Via {
    let elf = b.elf.as_ref().expect("resolve is called for parsed ELFs");
    if soname.contains('/') {
        return Via::Path;
    }
    let searched = match bundled(cx.artifact, b, elf, soname) {
        Ok(via) => return via,
        Err(searched) => searched,
    };
    if let Some(via) = from_platform(soname) {
        return via;
    }
    let mut providers = providers_of(cx.policy, soname);
    if own_library_missing(cx, b, soname, how, &searched, &mut providers, findings) {
        return Via::Unresolved;
    }
    if !providers.is_empty() {
        return from_runtime_wheel(cx, b, soname, how, &providers, findings);
    }
    unresolved(cx, b, soname, how, &searched, findings)
}

/// Inside the artifact, through RUNPATH/RPATH with `$ORIGIN` (a lone ELF: next to it on disk,
/// as the reader found); else the directories searched.
fn bundled(
    artifact: &Artifact,
    b: &Binary,
    elf: &ElfFacts,
    soname: &str,
) -> Result<Via, Vec<String>> {
    let mut searched = Vec::new();
    for (dir, candidate) in runpath::origin_candidates(&b.path, elf, soname) {
        let exists = match artifact.kind {
            InputKind::Elf => artifact.beside.contains(&candidate),
            _ => artifact.files.contains(&candidate),
        };
        if exists {
            return Ok(Via::Bundled(candidate));
        }
        searched.push(dir);
    }
    Err(searched)
}

/// The platform: a system library, the driver's, libpython.
fn from_platform(soname: &str) -> Option<Via> {
    if platform::is_system_lib(soname) {
        Some(Via::System)
    } else if platform::is_driver_lib(soname) {
        Some(Via::Driver)
    } else if platform::is_libpython(soname) {
        Some(Via::Python)
    } else {
        None
    }
}

/// The binary's own distribution ships this soname (cuDNN's libcudnn_graph.so.9 in
/// nvidia-cudnn-cu13): a bundled library that is not there, not a dependency to declare. Takes
/// the own distribution out of `providers`; true (with the finding) when no other provides it.
fn own_library_missing(
    cx: &Lookup,
    b: &Binary,
    soname: &str,
    how: &'static str,
    searched: &[String],
    providers: &mut Vec<(String, String)>,
    findings: &mut Vec<Finding>,
) -> bool {
    let own = dist_of(cx.artifact, &b.path);
    if !providers.iter().any(|(w, _)| Some(w) == own.as_ref()) {
        return false;
    }
    let own = own.unwrap_or_default();
    let dir = providers
        .iter()
        .find(|(w, _)| *w == own)
        .map(|(_, d)| d.clone())
        .unwrap_or_default();
    providers.retain(|(w, _)| *w != own);
    if !providers.is_empty() {
        return false;
    }
    let hint = match cx.by_name.get(soname) {
        Some(p) => format!("; a copy is at {p} but RUNPATH does not reach it"),
        None => format!("; searched {searched:?}"),
    };
    let rule = if how == "needed" {
        Rule::LinkageUnresolvedNeeded
    } else {
        Rule::LinkageUnresolvedDlopen
    };
    findings.push(finding(
        rule,
        &b.path,
        format!("{how} {soname} is a library of {own} itself (it belongs in {dir}/), but this input does not contain it{hint}"),
        format!("put {dir}/{soname} back in the {own} wheel, or point RUNPATH at where it is"),
    ));
    true
}

/// A runtime wheel provides `soname`: declared in Requires-Dist, installed in the directory
/// being audited, or (an input without metadata) external; metadata/missing-requires-dist
/// when the wheel's METADATA names none of them.
fn from_runtime_wheel(
    cx: &Lookup,
    b: &Binary,
    soname: &str,
    how: &'static str,
    providers: &[(String, String)],
    findings: &mut Vec<Finding>,
) -> Via {
    let artifact = cx.artifact;
    // A directory (site-packages) may hold the provider wheel itself: the distribution named is
    // the one whose RECORD lists the file, else the table's.
    let installed = || {
        let (w, dir) = providers
            .iter()
            .filter(|_| artifact.kind == InputKind::Directory)
            .find(|(_, dir)| artifact.files.contains(&format!("{dir}/{soname}")))?;
        let path = format!("{dir}/{soname}");
        Some(Via::Installed {
            wheel: installed_by_record(artifact, &path).unwrap_or_else(|| w.clone()),
            dir: dir.clone(),
        })
    };
    let Some(meta) = &artifact.wheel else {
        return installed().unwrap_or_else(|| Via::External(providers[0].0.clone()));
    };
    let declared = providers.iter().find(|(w, dir)| {
        meta.requires_dist
            .iter()
            .any(|r| &r.name == w || (r.name == "cuda-toolkit" && dir.starts_with("nvidia/cu13")))
    });
    if let Some((w, _)) = declared {
        extra_only(meta, w, &b.path, how, soname, findings);
        return Via::Wheel(w.clone());
    }
    if let Some(via) = installed() {
        return via;
    }
    let names: Vec<&str> = providers.iter().map(|(w, _)| w.as_str()).collect();
    findings.push(finding(
        Rule::MetadataMissingRequiresDist,
        &b.path,
        format!(
            "{how} {soname} comes from the {} wheel, which METADATA does not require",
            names[0]
        ),
        format!(
            "add `Requires-Dist: {}` to the package metadata (a range, not one release: metadata/requires-dist-exact)",
            crate::rules::metadata::requirement_for_soname(cx.policy, names[0], soname)
        ),
    ));
    Via::Unresolved
}

/// Nothing provides `soname`: linkage/unresolved-needed or -dlopen, with where a copy is or
/// what was searched.
fn unresolved(
    cx: &Lookup,
    b: &Binary,
    soname: &str,
    how: &'static str,
    searched: &[String],
    findings: &mut Vec<Finding>,
) -> Via {
    let hint = if let Some(p) = cx.by_name.get(soname) {
        format!("; a copy is at {p} but RUNPATH does not reach it")
    } else if searched.is_empty() {
        String::from("; the binary has no $ORIGIN RUNPATH")
    } else {
        format!("; searched {searched:?}")
    };
    let (rule, fix) = if how == "needed" {
        (Rule::LinkageUnresolvedNeeded, "bundle the library (auditwheel repair) and point RUNPATH at it with $ORIGIN, or require the wheel that ships it")
    } else {
        (
            Rule::LinkageUnresolvedDlopen,
            "bundle the library, require the wheel that ships it, or fix the .note.dlopen soname",
        )
    };
    findings.push(finding(
        rule,
        &b.path,
        format!("{how} {soname} does not resolve{hint}"),
        fix,
    ));
    Via::Unresolved
}
