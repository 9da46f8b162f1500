//! metadata/* and tags/*: what the wheel says about itself versus what its binaries do.

use crate::facts::Artifact;
use crate::finding::{finding, Finding, Rule};
use crate::policy::Policy;
use crate::rules::platform;

pub fn check(artifact: &Artifact, policy: &Policy, findings: &mut Vec<Finding>) {
    let Some(meta) = &artifact.wheel else { return };
    let mut tags: Vec<&String> = meta.tags.iter().collect();
    if let Some(f) = &meta.filename {
        tags.extend(&f.tags);
    }
    let abi3 = tags.iter().any(|t| t.split('-').nth(1) == Some("abi3"));
    if abi3 {
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
    // Requires-Dist against the runtime pins: the declared range must admit the exact release
    // the build and the tests use, or the wheel declares something it was never tested with.
    for lib in policy.runtime.values() {
        let name = kiln_wheel::metadata::normalize_name(&lib.wheel);
        for r in meta.requires_dist.iter().filter(|r| r.name == name) {
            if !r.admits(&lib.version) {
                findings.push(finding(
                    Rule::MetadataRequiresDistPin,
                    "METADATA",
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
    // One exact version (`==X` / `===X`) for a dependency: pip cannot install the wheel beside
    // any other package that needs a different release of it (torch pins its NVIDIA wheels).
    for r in &meta.requires_dist {
        if let Some(exact) = r.exact_pin() {
            findings.push(finding(
                Rule::MetadataRequiresDistExact,
                "METADATA",
                format!(
                    "Requires-Dist {:?} pins {} to one release ({exact}); the wheel cannot coexist with packages that need another",
                    r.raw, r.name
                ),
                "declare the ABI range instead (soname major, oldest supported minor), e.g. \"name>=9.19,<10\"",
            ));
        }
    }
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
    }
}
