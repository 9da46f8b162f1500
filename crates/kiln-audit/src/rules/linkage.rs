//! linkage/*: every NEEDED and dlopen soname resolves; no driver stub, no bundled driver, no
//! build-tree RUNPATH; tags/glibc-too-new.

use serde::Serialize;

use crate::finding::{finding, Finding};
use crate::input::{Artifact, Binary, InputKind};
use crate::nvidia_wheels;
use crate::platform;
use crate::policy::Policy;

/// How one soname a binary needs is found at run time.
#[derive(Debug, Clone, Serialize)]
pub struct Resolution {
    pub file: String,
    pub soname: String,
    /// "needed" or "dlopen"
    pub how: &'static str,
    /// "bundled:<path>", "system", "driver", "wheel:<dist>", "external:<dist>" or "unresolved"
    pub via: String,
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

pub fn check(artifact: &Artifact, policy: &Policy, findings: &mut Vec<Finding>) -> Vec<Resolution> {
    let mut out = Vec::new();
    bundled_driver(artifact, findings);
    let ceiling = glibc_ceiling(artifact, policy);
    for b in &artifact.binaries {
        let Some(elf) = &b.elf else { continue };
        for entry in elf.runpath.iter().chain(&elf.rpath) {
            if !(entry.starts_with("$ORIGIN") || entry.starts_with("${ORIGIN}")) {
                let marker = BUILD_TREE_MARKERS.iter().find(|m| entry.contains(*m));
                let why = match marker {
                    Some(m) => format!("points into a build tree ({m})"),
                    None if entry.starts_with('/') => {
                        "is absolute: it names a directory on the build machine".into()
                    }
                    None => "is relative to the working directory, not to the library".into(),
                };
                findings.push(finding(
                    "linkage/build-tree-runpath",
                    &b.path,
                    format!("RUNPATH/RPATH entry {entry:?} {why}"),
                    "set RUNPATH to $ORIGIN-relative paths only: patchelf --set-rpath '$ORIGIN/../lib' FILE",
                ));
            }
        }
        for n in &elf.needed {
            if let Some(real) = platform::driver_stub_for(n) {
                findings.push(finding(
                    "linkage/driver-stub-needed",
                    &b.path,
                    format!("NEEDED {n}: the toolkit's link-time stub name; at run time only the driver's {real} exists"),
                    format!("link against the versioned soname (patchelf --replace-needed {n} {real} FILE), or load the driver with dlopen(\"{real}\")"),
                ));
                out.push(Resolution {
                    file: b.path.clone(),
                    soname: n.clone(),
                    how: "needed",
                    via: "unresolved".into(),
                });
                continue;
            }
            let via = resolve(artifact, policy, b, n, "needed", findings);
            out.push(Resolution {
                file: b.path.clone(),
                soname: n.clone(),
                how: "needed",
                via,
            });
        }
        for feature in &elf.dlopen {
            let required = feature.priority.as_deref() == Some("required");
            let mut vias = Vec::new();
            let mut scratch = Vec::new();
            for s in &feature.soname {
                vias.push((
                    s.clone(),
                    resolve(artifact, policy, b, s, "dlopen", &mut scratch),
                ));
            }
            let ok = vias.iter().any(|(_, v)| v != "unresolved");
            if ok {
                // A feature is satisfied by any alternative; only keep the findings when none resolves.
            } else {
                findings.extend(
                    scratch
                        .into_iter()
                        .filter(|f| f.rule != "linkage/unresolved-dlopen"),
                );
                let mut f = finding(
                    "linkage/unresolved-dlopen",
                    &b.path,
                    format!(
                        "dlopen feature {:?} ({}) lists {:?}; none resolves inside the wheel, its Requires-Dist or the platform",
                        feature.feature.as_deref().unwrap_or("?"),
                        feature.priority.as_deref().unwrap_or("recommended"),
                        feature.soname
                    ),
                    "bundle the library, add the wheel that ships it to Requires-Dist, or fix the soname in the .note.dlopen note",
                );
                if !required {
                    f.severity = crate::Severity::Warning;
                }
                findings.push(f);
            }
            for (s, via) in vias {
                out.push(Resolution {
                    file: b.path.clone(),
                    soname: s,
                    how: "dlopen",
                    via,
                });
            }
        }
        for e in &elf.dlopen_errors {
            findings.push(finding(
                "linkage/bad-dlopen-note",
                &b.path,
                e.clone(),
                "write the note as the FDO ELF dlopen metadata JSON array",
            ));
        }
        if let (Some(have), Some((plat, max))) = (elf.max_glibc, &ceiling) {
            if have > *max {
                findings.push(finding(
                    "tags/glibc-too-new",
                    &b.path,
                    format!("needs GLIBC_{}.{}, but platform {plat} guarantees only glibc {}.{}", have.0, have.1, max.0, max.1),
                    format!("build against an older glibc (manylinux container, or zig cc) or claim manylinux_{}_{}", have.0, have.1),
                ));
            }
        }
    }
    out
}

/// The most restrictive glibc ceiling among the wheel's platform tags and --platform.
fn glibc_ceiling(artifact: &Artifact, policy: &Policy) -> Option<(String, (u32, u32))> {
    let mut platforms: Vec<String> = Vec::new();
    if let Some(w) = &artifact.wheel {
        platforms.extend(w.tags.iter().map(|t| platform::platform_of(t).to_string()));
        if let Some(f) = &w.filename {
            platforms.extend(f.tags.iter().map(|t| platform::platform_of(t).to_string()));
        }
    }
    platforms.extend(policy.platform.clone());
    platforms
        .into_iter()
        .filter_map(|p| platform::glibc_ceiling(&p).map(|c| (p, c)))
        .min_by_key(|(_, c)| *c)
}

fn bundled_driver(artifact: &Artifact, findings: &mut Vec<Finding>) {
    for f in &artifact.files {
        let name = f.rsplit('/').next().unwrap_or(f);
        if let Some(lib) = platform::bundled_driver_lib(name) {
            findings.push(finding(
                "linkage/driver-bundled",
                f,
                format!("{f} is a copy of the NVIDIA driver library {lib}; it must match the installed kernel module"),
                "remove it from the wheel (auditwheel repair --exclude libcuda.so.1); the driver provides it",
            ));
        }
    }
}

/// Normalizes "a/b/../c" (no leading "/"); None when it climbs above the root.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

/// Where `soname` comes from for binary `b`; pushes a finding when it does not resolve.
fn resolve(
    artifact: &Artifact,
    policy: &Policy,
    b: &Binary,
    soname: &str,
    how: &'static str,
    findings: &mut Vec<Finding>,
) -> String {
    let elf = b.elf.as_ref().expect("resolve is called for parsed ELFs");
    if soname.contains('/') {
        return "path".into();
    }
    // 1. inside the artifact, through RUNPATH/RPATH with $ORIGIN
    let origin = parent(&b.path);
    let mut searched = Vec::new();
    for entry in elf.runpath.iter().chain(&elf.rpath) {
        let Some(rel) = entry
            .strip_prefix("$ORIGIN")
            .or_else(|| entry.strip_prefix("${ORIGIN}"))
        else {
            continue;
        };
        let dir = normalize(&format!("{origin}/{rel}"));
        if let Some(dir) = &dir {
            let candidate = if dir.is_empty() {
                soname.to_string()
            } else {
                format!("{dir}/{soname}")
            };
            let exists = match artifact.kind {
                InputKind::Elf => artifact.root.join(&candidate).exists(),
                _ => artifact.files.contains(&candidate),
            };
            if exists {
                return format!("bundled:{candidate}");
            }
            searched.push(dir.clone());
        }
    }
    // 2. the platform
    if platform::is_system_lib(soname) {
        return "system".into();
    }
    if platform::is_driver_lib(soname) {
        return "driver".into();
    }
    if platform::is_libpython(soname) {
        return "python".into();
    }
    // 3. a runtime wheel: kiln's pins first, then the maintained table of NVIDIA layouts
    let mut providers: Vec<(String, String)> = Vec::new();
    for lib in policy.runtime.values() {
        if lib.sonames.iter().any(|s| s == soname) {
            providers.push((
                crate::wheel::normalize_name(&lib.wheel),
                lib.lib_dir.clone(),
            ));
        }
    }
    for layout in nvidia_wheels::layouts_for(soname) {
        for w in layout.wheels {
            providers.push((w.to_string(), layout.lib_dir.to_string()));
        }
    }
    if !providers.is_empty() {
        if let Some(meta) = &artifact.wheel {
            let declared = providers.iter().find(|(w, dir)| {
                meta.requires_dist.iter().any(|r| {
                    &r.name == w || (r.name == "cuda-toolkit" && dir.starts_with("nvidia/cu13"))
                })
            });
            if let Some((w, _)) = declared {
                return format!("wheel:{w}");
            }
            if artifact.kind == InputKind::Directory {
                if let Some((w, dir)) = providers
                    .iter()
                    .find(|(_, dir)| artifact.files.contains(&format!("{dir}/{soname}")))
                {
                    return format!("installed:{w}:{dir}");
                }
            }
            let names: Vec<&str> = providers.iter().map(|(w, _)| w.as_str()).collect();
            findings.push(finding(
                "metadata/missing-requires-dist",
                &b.path,
                format!(
                    "{how} {soname} comes from the {} wheel, which METADATA does not require",
                    names[0]
                ),
                format!(
                    "add `Requires-Dist: {}` (pinned) to the package metadata",
                    names[0]
                ),
            ));
            return "unresolved".into();
        }
        if artifact.kind == InputKind::Directory {
            if let Some((w, dir)) = providers
                .iter()
                .find(|(_, dir)| artifact.files.contains(&format!("{dir}/{soname}")))
            {
                return format!("installed:{w}:{dir}");
            }
        }
        return format!("external:{}", providers[0].0);
    }
    // 4. nothing found
    let bundled_elsewhere: Vec<&String> = artifact
        .files
        .iter()
        .filter(|f| f.rsplit('/').next() == Some(soname))
        .collect();
    let hint = if let Some(p) = bundled_elsewhere.first() {
        format!("; a copy is at {p} but RUNPATH does not reach it")
    } else if searched.is_empty() {
        String::from("; the binary has no $ORIGIN RUNPATH")
    } else {
        format!("; searched {searched:?}")
    };
    let (rule, fix) = if how == "needed" {
        ("linkage/unresolved-needed", "bundle the library (auditwheel repair) and point RUNPATH at it with $ORIGIN, or require the wheel that ships it")
    } else {
        (
            "linkage/unresolved-dlopen",
            "bundle the library, require the wheel that ships it, or fix the .note.dlopen soname",
        )
    };
    findings.push(finding(
        rule,
        &b.path,
        format!("{how} {soname} does not resolve{hint}"),
        fix,
    ));
    "unresolved".into()
}
