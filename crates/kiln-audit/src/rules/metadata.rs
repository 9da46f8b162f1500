//! metadata/* and tags/*: what the wheel says about itself versus what its binaries do.

use crate::facts::Artifact;
use crate::finding::{finding, Finding};
use crate::platform;
use crate::policy::Policy;

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
                    "tags/abi3-links-libpython",
                    &b.path,
                    format!("the wheel claims abi3, but this binary NEEDs {py} (one exact CPython)"),
                    "do not link libpython into extension modules (pyo3: no `auto-initialize`; set abi3 features), or drop the abi3 tag",
                ));
            }
        }
    }
    // Requires-Dist pins: kiln's policy pins exact runtime versions.
    for lib in policy.runtime.values() {
        let name = kiln_wheel::metadata::normalize_name(&lib.wheel);
        for r in meta.requires_dist.iter().filter(|r| r.name == name) {
            if !r.admits(&lib.version) {
                findings.push(finding(
                    "metadata/requires-dist-pin",
                    "METADATA",
                    format!(
                        "Requires-Dist {:?} does not admit the pinned {} {}",
                        r.raw, lib.wheel, lib.version
                    ),
                    format!("require {}=={}", lib.wheel, lib.version),
                ));
            }
        }
    }
}
