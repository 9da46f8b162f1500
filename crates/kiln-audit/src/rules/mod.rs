//! The rules: each reads the [`Artifact`] and the [`Policy`] and appends findings.
//! Rules that need a policy field skip silently when it is absent.

pub mod arch;
pub mod linkage;
pub mod manifest;
pub mod metadata;

use crate::input::Artifact;
use crate::policy::Policy;
use crate::Finding;

pub use linkage::Resolution;

/// Runs every rule; returns the findings and how each NEEDED / dlopen soname resolved.
pub fn evaluate(artifact: &Artifact, policy: &Policy) -> (Vec<Finding>, Vec<Resolution>) {
    let mut findings = Vec::new();
    for b in &artifact.binaries {
        if let Some(e) = &b.elf_error {
            findings.push(crate::finding::finding(
                "elf/unreadable",
                &b.path,
                format!("ELF could not be read: {e}"),
                "rebuild the file; a truncated or corrupted ELF cannot be loaded",
            ));
        }
    }
    let resolutions = linkage::check(artifact, policy, &mut findings);
    arch::check(artifact, policy, &mut findings);
    metadata::check(artifact, policy, &mut findings);
    manifest::check(artifact, policy, &mut findings);
    (findings, resolutions)
}
