//! arch/* and fatbin/*: SASS for every expected target (per ELF and per kernel; a kiln-built
//! binary's gated kernels only on the targets their gates declare), PTX exactly where expected,
//! PTX ISA within the oldest driver's reach.

use std::collections::{BTreeMap, BTreeSet};

use crate::facts::{Artifact, Binary, DeviceCode, EntryFacts, EntryKind, Target};
use crate::finding::{finding, finding_lower, Finding, Rule};
use crate::policy::Policy;

/// The targets of `kind` entries, keyed by name (the order messages list them in).
fn targets(entries: &[EntryFacts], kind: EntryKind) -> BTreeMap<String, Target> {
    entries
        .iter()
        .filter(|e| e.kind == kind)
        // An entry whose payload names another target than its header proves neither.
        .filter(|e| e.label_mismatch.is_none())
        .filter_map(|e| e.target.device())
        .map(|t| (t.name(), t))
        .collect()
}

/// Device code outside `.nv_fatbin` (reported where it was found: the library loads it
/// itself, the CUDA runtime never registers it) and relocatable device code only.
fn hidden_and_relocatable(b: &Binary, findings: &mut Vec<Finding>) {
    let mut by_section: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in b.device.iter().flat_map(|d| &d.entries) {
        if let Some(s) = &e.section {
            *by_section.entry(s).or_default() += 1;
        }
    }
    // A kiln-built binary (its build manifest present) promises its device code in .nv_fatbin,
    // where the CUDA runtime and tools (cuobjdump, compute-sanitizer) look: elsewhere is an
    // error. A third party's own loader is a fact to report.
    let kiln_built = b.elf.as_ref().is_some_and(|e| e.build_manifest.is_some());
    for (section, n) in by_section {
        let message = format!("{n} device-code entries in section {section}, not .nv_fatbin: loaded by the library itself (cuModuleLoadData), never registered by the CUDA runtime; counted in coverage and reach");
        let fix = "link device code through nvcc / kiln-kernels so it lands in .nv_fatbin (nothing to do for a library that loads its own sections)";
        findings.push(if kiln_built {
            finding(Rule::FatbinOutsideNvFatbin, &b.path, message, fix)
        } else {
            finding_lower(Rule::FatbinOutsideNvFatbin, &b.path, message, fix)
        });
    }
    let relocatable = b.relocatable.as_ref().map_or(0, |d| d.entries.len());
    let loadable = b.device.as_ref().map_or(0, |d| d.entries.len());
    if relocatable > 0 && loadable == 0 {
        findings.push(finding(
            Rule::ArchRelocatableOnly,
            &b.path,
            format!("device code only in __nv_relfatbin ({relocatable} relocatable image(s)): input for a device link, never loaded by the driver; no GPU runs these kernels"),
            "device-link the code (nvcc -dlink, or link with nvcc) so a loadable .nv_fatbin is produced",
        ));
    }
}

/// Every arch/* and fatbin/* rule over every binary, then arch/no-device-code over the input.
pub fn check(artifact: &Artifact, policy: &Policy, findings: &mut Vec<Finding>) {
    let mut any_device_code = false;
    for b in &artifact.binaries {
        any_device_code |= check_binary(b, policy, findings);
    }
    no_device_code(any_device_code, policy, findings);
}

/// The rules of one binary, in the order their findings are listed; true when it has device
/// code (or a `.nv_fatbin` that cannot be read).
fn check_binary(b: &Binary, policy: &Policy, findings: &mut Vec<Finding>) -> bool {
    malformed(b, findings);
    hidden_and_relocatable(b, findings);
    let Some(dev) = &b.device else {
        return b.device_error.is_some();
    };
    bad_entries(b, dev, findings);
    target_mismatches(b, dev, findings);
    if let Some(expected) = &policy.expect_sass {
        let want: Vec<Target> = expected.iter().copied().map(Target::sass).collect();
        let sass = targets(&dev.entries, EntryKind::Cubin);
        missing_sass(b, &sass, &want, findings);
        kernel_missing_sass(b, dev, &want, findings);
        extra_sass(b, &sass, &want, findings);
    }
    if let Some(expected) = &policy.expect_ptx {
        let want: Vec<Target> = expected.iter().copied().map(Target::ptx).collect();
        let ptx = targets(&dev.entries, EntryKind::Ptx);
        missing_ptx(b, &ptx, &want, findings);
        unexpected_ptx(b, &ptx, &want, findings);
    }
    ptx_isa_too_new(b, dev, policy, findings);
    true
}

/// fatbin/malformed: `.nv_fatbin` whose container structure cannot be read.
fn malformed(b: &Binary, findings: &mut Vec<Finding>) {
    if let Some(e) = &b.device_error {
        findings.push(finding(
            Rule::FatbinMalformed,
            &b.path,
            format!("`.nv_fatbin` cannot be read: {e}"),
            "rebuild the library; the driver would reject this device code (cudaErrorInvalidKernelImage)",
        ));
    }
}

/// fatbin/bad-entry: an entry that cannot be loaded.
fn bad_entries(b: &Binary, dev: &DeviceCode, findings: &mut Vec<Finding>) {
    for e in dev.entries.iter().filter(|e| e.error.is_some()) {
        findings.push(finding(
            Rule::FatbinBadEntry,
            &b.path,
            format!(
                "{} entry at offset {}: {}",
                e.target,
                e.offset,
                e.error.as_deref().unwrap_or("")
            ),
            "rebuild the library; this entry cannot be loaded",
        ));
    }
}

/// fatbin/target-mismatch: an entry whose payload names another target than its header.
fn target_mismatches(b: &Binary, dev: &DeviceCode, findings: &mut Vec<Finding>) {
    for e in dev.entries.iter().filter(|e| e.label_mismatch.is_some()) {
        findings.push(finding(
            Rule::FatbinTargetMismatch,
            &b.path,
            format!(
                "{} entry at offset {}: {}; it is not counted for any target",
                e.target,
                e.offset,
                e.label_mismatch.as_deref().unwrap_or("")
            ),
            "rebuild the fatbin with nvcc/fatbinary; never relabel entries",
        ));
    }
}

/// arch/missing-sass: an expected SASS target the binary lacks.
fn missing_sass(
    b: &Binary,
    sass: &BTreeMap<String, Target>,
    want: &[Target],
    findings: &mut Vec<Finding>,
) {
    for w in want {
        if sass.values().any(|s| s == w) {
            continue;
        }
        // Same number, other variant: sm_90a does not stand in for sm_90.
        let near: Vec<&String> = sass
            .iter()
            .filter(|(_, s)| s.arch.number() == w.arch.number())
            .map(|(n, _)| n)
            .collect();
        let note = if near.is_empty() {
            String::new()
        } else {
            format!(" (has {near:?}: variants are not interchangeable)")
        };
        findings.push(finding(
            Rule::ArchMissingSass,
            &b.path,
            format!(
                "no SASS for {w}{note}; present: {:?}",
                sass.keys().collect::<BTreeSet<_>>()
            ),
            format!(
                "add -gencode arch={},code={w} (or the matrix entry) and rebuild",
                w.arch.compute()
            ),
        ));
    }
}

/// arch/kernel-missing-sass: per kernel, a target that exists in this ELF must carry every
/// kernel — in a kiln-built binary, every kernel its declared gate does not keep off that
/// target.
fn kernel_missing_sass(b: &Binary, dev: &DeviceCode, want: &[Target], findings: &mut Vec<Finding>) {
    let manifest = crate::gates::manifest(b);
    let mut kernels_by_target: BTreeMap<Target, BTreeSet<&str>> = BTreeMap::new();
    for e in dev.entries.iter().filter(|e| e.kind == EntryKind::Cubin) {
        if let Some(t) = e.target.device() {
            kernels_by_target
                .entry(t)
                .or_default()
                .extend(e.kernels.iter().map(String::as_str));
        }
    }
    let all: BTreeSet<&str> = kernels_by_target.values().flatten().copied().collect();
    for w in want.iter().filter(|w| kernels_by_target.contains_key(w)) {
        let have = &kernels_by_target[w];
        let missing: Vec<&str> = all
            .iter()
            .filter(|k| !have.contains(*k))
            .filter(|k| manifest.is_none_or(|m| m.expects(k, w)))
            .copied()
            .collect();
        if missing.is_empty() {
            continue;
        }
        let shown: Vec<String> = missing
            .iter()
            .take(5)
            .map(|k| crate::gates::named(manifest, k))
            .collect();
        findings.push(finding(
            Rule::ArchKernelMissingSass,
            &b.path,
            format!("{} kernel(s) have no {w} SASS though other kernels do: {shown:?}{}", missing.len(), if missing.len() > 5 { " …" } else { "" }),
            "compile every kernel source for every target (one translation unit was built with fewer -gencode flags)",
        ));
    }
}

/// arch/extra-sass: SASS for a target the policy does not list.
fn extra_sass(
    b: &Binary,
    sass: &BTreeMap<String, Target>,
    want: &[Target],
    findings: &mut Vec<Finding>,
) {
    for (name, s) in sass {
        if !want.contains(s) {
            findings.push(finding(
                Rule::ArchExtraSass,
                &b.path,
                format!("SASS for {name}, which the policy does not list"),
                "nothing to fix unless the size matters",
            ));
        }
    }
}

/// arch/missing-ptx: an expected PTX target the binary lacks.
fn missing_ptx(
    b: &Binary,
    ptx: &BTreeMap<String, Target>,
    want: &[Target],
    findings: &mut Vec<Finding>,
) {
    for w in want {
        if !ptx.values().any(|p| p == w) {
            findings.push(finding(
                Rule::ArchMissingPtx,
                &b.path,
                format!(
                    "no PTX for {w}: GPUs newer than the matrix get no JIT fallback; present: {:?}",
                    ptx.keys().collect::<BTreeSet<_>>()
                ),
                format!("add -gencode arch={w},code={w} (matrix entry `+PTX`) and rebuild"),
            ));
        }
    }
}

/// arch/unexpected-ptx: PTX for a target the policy does not list.
fn unexpected_ptx(
    b: &Binary,
    ptx: &BTreeMap<String, Target>,
    want: &[Target],
    findings: &mut Vec<Finding>,
) {
    for (name, p) in ptx {
        if !want.contains(p) {
            findings.push(finding(
                Rule::ArchUnexpectedPtx,
                &b.path,
                format!("PTX for {name}, which the policy does not list"),
                "drop the compute_XX code= target, or add `+PTX` to that matrix entry",
            ));
        }
    }
}

/// arch/ptx-isa-too-new: PTX whose ISA the oldest supported driver cannot JIT.
fn ptx_isa_too_new(b: &Binary, dev: &DeviceCode, policy: &Policy, findings: &mut Vec<Finding>) {
    let (Some(max), Some(driver)) = (policy.max_ptx_isa(), policy.min_driver) else {
        return;
    };
    for e in dev.entries.iter().filter(|e| e.kind == EntryKind::Ptx) {
        let Some(isa) = e.ptx_isa_num else { continue };
        if isa > max {
            findings.push(finding(
                Rule::ArchPtxIsaTooNew,
                &b.path,
                format!("{} PTX has ISA {}.{}; driver {driver} JITs at most {}.{} (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)", e.target, isa.0, isa.1, max.0, max.1),
                "build the PTX with the nvcc matching the oldest driver (the pinned toolkit)",
            ));
        }
    }
}

/// arch/no-device-code: the policy expects device code and no binary has any.
fn no_device_code(any_device_code: bool, policy: &Policy, findings: &mut Vec<Finding>) {
    if !any_device_code
        && (policy.expect_sass.as_ref().is_some_and(|v| !v.is_empty())
            || policy.expect_ptx.as_ref().is_some_and(|v| !v.is_empty()))
    {
        findings.push(finding(
            Rule::ArchNoDeviceCode,
            "",
            "the policy expects device code, but no binary has a `.nv_fatbin` section".into(),
            "check that the kernels are linked into the extension (kiln-kernels embeds them in .nv_fatbin)",
        ));
    }
}
