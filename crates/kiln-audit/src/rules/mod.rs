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

use std::collections::BTreeMap;

use crate::facts::{Artifact, Binary, InputKind};
use crate::finding::{finding, Finding, Rule};
use crate::policy::Policy;

pub use linkage::{Resolution, Via};

/// Runs every rule; returns the findings and how each NEEDED / dlopen soname resolved. The
/// rules that read a wheel's tags and Requires-Dist (linkage, metadata) judge each binary of a
/// directory by its own distribution's ([`by_distribution`]); the rest see the whole input.
pub fn evaluate(artifact: &mut Artifact, policy: &Policy) -> (Vec<Finding>, Vec<Resolution>) {
    let mut findings = Vec::new();
    wheel::check(artifact, &mut findings);
    linkage::bundled_driver(artifact, &mut findings);
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
    let mut resolutions = Vec::new();
    by_distribution(artifact, |view| {
        resolutions.extend(linkage::check(view, policy, &mut findings));
        metadata::check(view, policy, &mut findings);
    });
    let artifact = &*artifact;
    arch::check(artifact, policy, &mut findings);
    manifest::check(artifact, policy, &mut findings);
    reach::check(artifact, policy, &mut findings);
    (findings, resolutions)
}

/// Calls `judge` once per distribution of a directory input, with the artifact narrowed to that
/// distribution's binaries and its own metadata as `wheel`; then once for the loose binaries
/// (in no RECORD) with no metadata at all: no wheel tags (only `--platform` applies), no
/// Requires-Dist (a runtime library resolves as installed in the tree, or as external). Any
/// other input is judged whole, once. The artifact is restored before returning.
pub fn by_distribution(artifact: &mut Artifact, mut judge: impl FnMut(&Artifact)) {
    if artifact.kind != InputKind::Directory || artifact.distributions.is_empty() {
        judge(artifact);
        return;
    }
    let paths: Vec<&str> = artifact.binaries.iter().map(|b| b.path.as_str()).collect();
    let owners = crate::read::dists::owners(&artifact.distributions, &paths);
    // Distributions in name order, then the loose binaries (usize::MAX).
    let mut groups: BTreeMap<usize, Vec<Binary>> = BTreeMap::new();
    for (b, owner) in std::mem::take(&mut artifact.binaries)
        .into_iter()
        .zip(owners)
    {
        groups
            .entry(owner.unwrap_or(usize::MAX))
            .or_default()
            .push(b);
    }
    let whole = artifact.wheel.take();
    let mut all = Vec::new();
    for (owner, group) in groups {
        let owner = (owner != usize::MAX).then_some(owner);
        artifact.binaries = group;
        artifact.wheel = owner.map(|i| std::mem::take(&mut artifact.distributions[i]));
        judge(artifact);
        if let (Some(i), Some(meta)) = (owner, artifact.wheel.take()) {
            artifact.distributions[i] = meta;
        }
        all.append(&mut artifact.binaries);
    }
    all.sort_by(|a, b| a.path.cmp(&b.path));
    artifact.binaries = all;
    artifact.wheel = whole;
}
