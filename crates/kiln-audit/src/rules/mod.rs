//! The rules: each reads the facts ([`Artifact`]) and the [`Policy`] and appends findings.
//! Every rule id is decided here (registered in `finding::RULES`); rules that need a policy
//! field skip silently when it is absent.

pub mod arch;
pub mod linkage;
pub mod manifest;
pub mod metadata;
pub mod nvidia_wheels;
pub mod platform;
pub mod reach;
pub mod wheel;

use crate::facts::Artifact;
use crate::finding::{finding, Finding, Rule};
use crate::policy::Policy;

pub use linkage::{Resolution, Via};

/// Runs every rule; returns the findings and how each NEEDED / dlopen soname resolved.
pub fn evaluate(artifact: &Artifact, policy: &Policy) -> (Vec<Finding>, Vec<Resolution>) {
    let mut findings = Vec::new();
    wheel::check(artifact, &mut findings);
    for b in &artifact.binaries {
        if let Some(e) = &b.elf_error {
            findings.push(finding(
                Rule::ElfUnreadable,
                &b.path,
                format!("ELF could not be read: {e}"),
                "rebuild the file; a truncated or corrupted ELF cannot be loaded",
            ));
        }
        if let Some(diff) = b.elf.as_ref().and_then(|e| e.dynamic_mismatch.as_ref()) {
            findings.push(finding(
                Rule::ElfDynamicMismatch,
                &b.path,
                format!("the loader's dynamic section differs from the section headers' ({diff}); the audit follows the loader, but a tool reading sections is being misled"),
                "rebuild or re-link the file; never edit .dynamic or the section table by hand",
            ));
        }
    }
    let resolutions = linkage::check(artifact, policy, &mut findings);
    arch::check(artifact, policy, &mut findings);
    metadata::check(artifact, policy, &mut findings);
    manifest::check(artifact, policy, &mut findings);
    reach::check(artifact, policy, &mut findings);
    (findings, resolutions)
}
