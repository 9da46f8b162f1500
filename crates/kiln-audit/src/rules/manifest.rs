//! manifest/*: kiln's embedded build manifest (`.kiln_manifest`) against what the same file's
//! `.nv_fatbin` really holds, and against the policy. A manifest is a claim; the bytes decide.

use std::collections::{BTreeMap, BTreeSet};

use kiln_manifest::Manifest;
use kiln_pins::{Arch, ArchMatrix};

use crate::facts::{Artifact, Binary, EntryKind, Target};
use crate::finding::{finding, Finding, Rule};
use crate::policy::Policy;

const FIX_REBUILD: &str = "rebuild with `cargo xtask wheel` (or `nix build .#wheel`); a manifest is written by kiln-build from the compiled outputs and must never be edited";

/// Every manifest/* rule over every ELF that carries a build manifest (or one that cannot be
/// read).
pub fn check(artifact: &Artifact, policy: &Policy, findings: &mut Vec<Finding>) {
    for b in &artifact.binaries {
        let Some(elf) = &b.elf else { continue };
        if let Some(e) = &elf.build_manifest_error {
            findings.push(finding(
                Rule::ManifestUnreadable,
                &b.path,
                format!("`.kiln_manifest`: {e}"),
                FIX_REBUILD,
            ));
            continue;
        }
        let Some(manifest) = &elf.build_manifest else {
            continue;
        };
        let actual = actual_targets(b);
        let claimed = claims(b, manifest, &actual, findings);
        unclaimed_targets(b, &actual, &claimed, findings);
        if let (Some(sass), Some(ptx)) = (&policy.expect_sass, &policy.expect_ptx) {
            matrix_differs(b, manifest, sass, ptx, findings);
        }
    }
}

/// What the bytes hold: target -> (kernels, PTX ISA).
type Actual<'a> = BTreeMap<Target, (BTreeSet<&'a str>, Option<&'a str>)>;

fn actual_targets(b: &Binary) -> Actual<'_> {
    let mut actual: Actual = BTreeMap::new();
    let Some(dev) = &b.device else {
        return actual;
    };
    for e in dev
        .entries
        .iter()
        .filter(|e| e.kind == EntryKind::Cubin || e.kind == EntryKind::Ptx)
    {
        let Some(target) = e.target.device() else {
            continue;
        };
        let slot = actual.entry(target).or_default();
        slot.0.extend(e.kernels.iter().map(String::as_str));
        if e.kind == EntryKind::Ptx {
            slot.1 = e.ptx_isa.as_deref();
        }
    }
    actual
}

/// Each target the manifest claims against the bytes: manifest/target-missing,
/// manifest/kernel-missing, manifest/ptx-isa-mismatch. Returns the claimed targets.
fn claims(
    b: &Binary,
    manifest: &Manifest,
    actual: &Actual,
    findings: &mut Vec<Finding>,
) -> BTreeSet<Target> {
    let mut claimed: BTreeSet<Target> = BTreeSet::new();
    for t in &manifest.targets {
        claimed.insert(t.target);
        let Some((kernels, isa)) = actual.get(&t.target) else {
            findings.push(finding(
                Rule::ManifestTargetMissing,
                &b.path,
                format!(
                    "the build manifest claims {} ({} kernels) but the file has no {} entry for it",
                    t.target,
                    t.kernels.len(),
                    t.kind
                ),
                FIX_REBUILD,
            ));
            continue;
        };
        let missing: Vec<&str> = t
            .kernels
            .iter()
            .map(String::as_str)
            .filter(|k| !kernels.contains(k))
            .collect();
        if !missing.is_empty() {
            findings.push(finding(
                Rule::ManifestKernelMissing,
                &b.path,
                format!(
                    "the build manifest claims {} for {}, but the device code lacks them",
                    missing.join(", "),
                    t.target
                ),
                FIX_REBUILD,
            ));
        }
        if let (Some(claimed_isa), Some(found)) = (t.ptx_isa.as_deref(), isa) {
            if claimed_isa != *found {
                findings.push(finding(
                    Rule::ManifestPtxIsaMismatch,
                    &b.path,
                    format!("the build manifest says PTX ISA {claimed_isa} for {}, the PTX says {found}", t.target),
                    FIX_REBUILD,
                ));
            }
        }
    }
    claimed
}

/// manifest/unclaimed-target: a target the bytes hold and the manifest does not list.
fn unclaimed_targets(
    b: &Binary,
    actual: &Actual,
    claimed: &BTreeSet<Target>,
    findings: &mut Vec<Finding>,
) {
    // In name order, as the report has always listed them.
    let mut unclaimed: Vec<String> = actual
        .keys()
        .filter(|t| !claimed.contains(t))
        .map(Target::name)
        .collect();
    unclaimed.sort();
    for target in unclaimed {
        findings.push(finding(
            Rule::ManifestUnclaimedTarget,
            &b.path,
            format!("the file carries {target}, which its build manifest does not list"),
            FIX_REBUILD,
        ));
    }
}

/// manifest/matrix-differs: the matrix the manifest was built for against the policy's
/// expectations.
fn matrix_differs(
    b: &Binary,
    manifest: &Manifest,
    sass: &[Arch],
    ptx: &[Arch],
    findings: &mut Vec<Finding>,
) {
    // Already typed (kiln-manifest read each entry with the one grammar); what is left
    // to check is the matrix as a whole: not empty, each capability once.
    match ArchMatrix::new(manifest.matrix.clone()) {
        Ok(m) => {
            let (ms, mp): (BTreeSet<_>, BTreeSet<_>) = (m.sass().collect(), m.ptx().collect());
            let (ps, pp): (BTreeSet<_>, BTreeSet<_>) = (
                sass.iter().copied().collect(),
                ptx.iter().copied().collect(),
            );
            if ms != ps || mp != pp {
                findings.push(finding(
                    Rule::ManifestMatrixDiffers,
                    &b.path,
                    format!("built for the matrix [{}], the policy expects another", manifest.matrix.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
                    "rebuild from the checkout whose Cargo.toml is the policy, or audit against the pins it was built with",
                ));
            }
        }
        Err(e) => findings.push(finding(
            Rule::ManifestUnreadable,
            &b.path,
            format!("manifest matrix: {e}"),
            FIX_REBUILD,
        )),
    }
}
