//! metadata/* and tags/*: what the wheel says about itself versus what its binaries do.

use crate::facts::{Artifact, WheelMeta};
use crate::finding::{finding, Finding, Rule};
use crate::policy::Policy;
use crate::rules::platform;

/// Every metadata/* and tags/* rule of this module over the wheel's (a distribution's) own
/// metadata.
pub fn check(artifact: &Artifact, policy: &Policy, findings: &mut Vec<Finding>) {
    let Some(meta) = &artifact.wheel else { return };
    // In a directory, each distribution's own METADATA.
    let metadata_file = match meta.dist_info.first() {
        Some(d) if artifact.kind == crate::facts::InputKind::Directory => format!("{d}/METADATA"),
        _ => "METADATA".to_string(),
    };
    abi3_links_libpython(artifact, meta, findings);
    requires_dist_pin(meta, policy, &metadata_file, findings);
    requires_dist_exact(meta, policy, &metadata_file, findings);
}

/// tags/abi3-links-libpython: the wheel claims abi3 and a binary NEEDs libpython.
fn abi3_links_libpython(artifact: &Artifact, meta: &WheelMeta, findings: &mut Vec<Finding>) {
    let mut tags: Vec<&String> = meta.tags.iter().collect();
    if let Some(f) = &meta.filename {
        tags.extend(&f.tags);
    }
    if !tags.iter().any(|t| t.split('-').nth(1) == Some("abi3")) {
        return;
    }
    for b in &artifact.binaries {
        let Some(elf) = &b.elf else { continue };
        if let Some(py) = elf.needed.iter().find(|n| platform::is_libpython(n)) {
            findings.push(finding(
                Rule::TagsAbi3LinksLibpython,
                &b.path,
                format!("the wheel claims abi3, but this binary NEEDs {py} (one exact CPython)"),
                "do not link libpython into extension modules (pyo3: no `auto-initialize`; set abi3 features), or drop the abi3 tag",
            ));
        }
    }
}

/// metadata/requires-dist-pin: Requires-Dist against the runtime pins: the declared range must
/// admit the exact release the build and the tests use, or the wheel declares something it
/// was never tested with.
fn requires_dist_pin(
    meta: &WheelMeta,
    policy: &Policy,
    metadata_file: &str,
    findings: &mut Vec<Finding>,
) {
    for lib in policy.runtime.values() {
        let name = kiln_wheel::metadata::normalize_name(&lib.wheel);
        for r in meta.requires_dist.iter().filter(|r| r.name == name) {
            if !r.admits(&lib.version) {
                findings.push(finding(
                    Rule::MetadataRequiresDistPin,
                    metadata_file,
                    format!(
                        "Requires-Dist {:?} does not admit the exact pin {} {} the build and tests use",
                        r.raw, lib.wheel, lib.version
                    ),
                    format!(
                        "declare a range that admits {} (the pins' `requires`: {})",
                        lib.version,
                        lib.requirement()
                    ),
                ));
            }
        }
    }
}

/// metadata/requires-dist-exact: one exact version (`==X` / `===X`) for a dependency: pip
/// cannot install the wheel beside any other package that needs a different release of it
/// (torch pins its NVIDIA wheels).
fn requires_dist_exact(
    meta: &WheelMeta,
    policy: &Policy,
    metadata_file: &str,
    findings: &mut Vec<Finding>,
) {
    for r in &meta.requires_dist {
        if let Some(exact) = r.exact_pin() {
            findings.push(finding(
                Rule::MetadataRequiresDistExact,
                metadata_file,
                format!(
                    "Requires-Dist {:?} pins {} to one release ({exact}); the wheel cannot coexist with packages that need another",
                    r.raw, r.name
                ),
                format!(
                    "declare the ABI range instead (soname major, oldest supported minor): `{}`",
                    range_for(policy, &r.name, Some(&exact))
                ),
            ));
        }
    }
}

/// The Requires-Dist line to suggest for `wheel` (normalized name): the pins' `requires` range
/// when the policy pins it; else the ABI range of `version`'s major from its minor
/// (`2.28.9` → `>=2.28,<3`), or of a soname's major (`libfoo.so.9` → `>=9,<10`); else the name
/// alone. Never one exact release: metadata/requires-dist-exact warns against that.
pub fn range_for(policy: &Policy, wheel: &str, version: Option<&str>) -> String {
    if let Some(lib) = policy
        .runtime
        .values()
        .find(|l| kiln_wheel::metadata::normalize_name(&l.wheel) == wheel)
    {
        return lib.requirement();
    }
    let number = |s: Option<&str>| s.and_then(|s| s.trim().parse::<u64>().ok());
    if let Some(v) = version {
        let mut parts = v.split('.');
        if let (Some(major), Some(minor)) = (number(parts.next()), number(parts.next())) {
            return format!("{wheel}>={major}.{minor},<{}", major + 1);
        }
        if let Some(major) = number(v.split('.').next()) {
            return format!("{wheel}>={major},<{}", major + 1);
        }
    }
    wheel.to_string()
}

/// The Requires-Dist line to suggest for the wheel that ships `soname`.
pub fn requirement_for_soname(policy: &Policy, wheel: &str, soname: &str) -> String {
    let major = soname
        .rsplit_once(".so.")
        .and_then(|(_, v)| v.split('.').next())
        .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()));
    range_for(policy, wheel, major)
}

/// The Requires-Dist rules, driven by hand-made METADATA against the workspace's real pins.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{InputKind, WheelMeta};
    use crate::finding::{severity_of, Severity};
    use kiln_wheel::metadata::{parse_headers, parse_requires_dist};

    fn pins() -> kiln_pins::Pins {
        kiln_pins::Pins::discover(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn audit(requires: &[String]) -> Vec<Finding> {
        let text: String = requires
            .iter()
            .map(|r| format!("Requires-Dist: {r}\n"))
            .collect();
        let (requires_dist, bad) = parse_requires_dist(&parse_headers(&text));
        assert!(bad.is_empty(), "{bad:?}");
        let artifact = Artifact {
            wheel: Some(WheelMeta {
                requires_dist,
                ..WheelMeta::default()
            }),
            ..Artifact::empty(InputKind::Wheel)
        };
        let mut findings = Vec::new();
        check(&artifact, &Policy::from_pins(&pins()), &mut findings);
        findings
    }

    fn rules(findings: &[Finding]) -> Vec<Rule> {
        findings.iter().map(|f| f.rule).collect()
    }

    #[test]
    fn the_pins_own_requirements_are_clean() {
        let reqs: Vec<String> = pins().runtime.values().map(|l| l.requirement()).collect();
        assert!(!reqs.is_empty());
        assert_eq!(audit(&reqs), Vec::<Finding>::new());
    }

    #[test]
    fn a_range_that_excludes_the_exact_pin_is_an_error() {
        let p = pins();
        let cudnn = &p.runtime["cudnn"];
        // Every other requirement as the pins state it; cuDNN's range stops below the pin.
        let mut reqs: Vec<String> = p.runtime.values().map(|l| l.requirement()).collect();
        reqs.retain(|r| !r.starts_with(&cudnn.wheel));
        reqs.push(format!("{}>=9.0,<{}", cudnn.wheel, cudnn.version));
        let found = audit(&reqs);
        assert_eq!(rules(&found), [Rule::MetadataRequiresDistPin]);
        assert_eq!(severity_of(found[0].rule), Severity::Error);
        assert!(found[0].message.contains(&cudnn.version), "{found:?}");
    }

    #[test]
    fn an_exact_pin_warns_even_when_it_is_the_tested_release() {
        let p = pins();
        let nccl = &p.runtime["nccl"];
        let found = audit(&[
            nccl.exact_requirement(),
            "numpy==2.1.0; extra == 'np'".into(),
        ]);
        assert_eq!(
            rules(&found),
            [
                Rule::MetadataRequiresDistExact,
                Rule::MetadataRequiresDistExact
            ]
        );
        assert_eq!(severity_of(found[0].rule), Severity::Warning);
        assert!(found[0].message.contains(&nccl.version), "{found:?}");
        // A wildcard is a range, not one release.
        assert!(audit(&["numpy==2.*".into()]).is_empty());
        // Each fix names the range of its own package: NCCL's from the pins, numpy's from
        // its pinned release; never cuDNN's.
        assert!(
            found[0].fix.contains(&nccl.requirement()),
            "{}",
            found[0].fix
        );
        assert!(found[1].fix.contains("`numpy>=2.1,<3`"), "{}", found[1].fix);
        let cudnn = &p.runtime["cudnn"];
        assert!(!found[1].fix.contains(&cudnn.requires), "{}", found[1].fix);
    }
}
