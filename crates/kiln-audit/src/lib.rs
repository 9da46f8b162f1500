//! kiln-audit: proves what a wheel, shared library or directory really contains — ELF linkage,
//! device code in `.nv_fatbin`, wheel metadata — and evaluates a [`Policy`] into [`Finding`]s.
//! A library: it never prints and never exits; the `kiln` binary renders the [`Report`].
//!
//! Readers turn bytes into typed facts, and only the rules decide findings:
//! - [`read`] (`read/`): `input` (wheel / ELF / fatbin / directory → [`facts::Artifact`], through
//!   `archive`, `binary` and `dir`), `elf`, `device`, with the wheel formats from kiln-wheel; a
//!   problem met while reading is a [`facts::ReadProblem`], never a finding; a structure a
//!   reader cannot read is a [`read::ReadError`]
//! - `rules/`: every [`Rule`] (registered in [`RULES`]), from facts + [`Policy`], with `platform`
//!   and `nvidia_wheels`: what the target system and NVIDIA's wheels provide
//! - `kernel_matrix`: the kernel × target matrix, a view of the facts for the report
//! - `reach`: GPU generation × binary, per library and per kernel (the reach/* rules judge it)
//! - `gates`: a kiln-built binary's declared arch gates, the one allowance its strict rule has
//!
//! Public: [`audit`], [`evaluate`], [`Report`], [`Policy`], [`Options`], [`Progress`], the facts
//! (for fuzzing and for callers that build them by hand) and the [`read`] entry points. Errors
//! are types: [`AuditError`] (the input cannot be audited), [`PolicyError`] (the stated policy
//! is refused), [`read::ReadError`].

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod facts;
mod finding;
mod gates;
pub mod json;
mod kernel_fold;
mod kernel_matrix;
mod manylinux;
mod options;
mod policy;
mod reach;
pub mod read;
mod rules;

use std::path::Path;

use serde::Serialize;

pub use error::{AuditError, PolicyError};
pub use facts::{Artifact, Binary, InputKind};
pub use finding::{Finding, Rule, Severity, LOWER_SEVERITY, RULES};
pub use kernel_matrix::{Coverage, CoverageRow};
pub use manylinux::ManylinuxTag;
pub use options::{NoProgress, Options, Progress};
pub use policy::{parse_arch_list, parse_gpu_list, Allow, Policy};
pub use reach::{BinaryReach, OmittedGeneration, Path as ReachPath, Reach, ReachCell};
pub use read::demangle;
pub use rules::{Resolution, Via};

/// Findings of one rule listed in a report; past this, one more finding of the same rule says
/// how many were left out (the counts stay exact).
pub const FINDINGS_PER_RULE: usize = 100;

/// Version of the JSON report layout (docs/audit-json-schema.md).
pub const SCHEMA_VERSION: u32 = 1;

/// What one audit found: the findings, and the facts they were decided from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The input path as given.
    pub input: String,
    /// What the input is.
    pub kind: InputKind,
    /// The expectations the rules judged against.
    pub policy: Policy,
    /// Findings by severity and what the input holds, in full.
    pub counts: Counts,
    /// Most severe first, then by rule and file; capped per rule ([`FINDINGS_PER_RULE`]).
    #[serde(serialize_with = "crate::json::findings")]
    pub findings: Vec<Finding>,
    /// Findings a waiver ([`Allow`]) matched: listed with its reason, counted in
    /// `counts.waived`, failing nothing. Same order and cap as `findings`.
    #[serde(serialize_with = "crate::json::waived")]
    pub waived: Vec<Waived>,
    /// Waivers that matched no finding (`rule[:path]`): a stale or mistyped waiver.
    pub unused_allows: Vec<String>,
    /// Per wheel, per distribution of a directory, or for a directory's loose files: the
    /// platform tags declared and the best manylinux tag the binaries allow (auditwheel's way).
    pub manylinux: Vec<ManylinuxTag>,
    /// Before the long lists: under a JSON budget (json.rs) it is listed whatever they hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<facts::WheelMeta>,
    /// Every ELF or bare fatbin in the input.
    #[serde(serialize_with = "crate::json::binaries")]
    pub binaries: Vec<Binary>,
    /// How each NEEDED and dlopen soname resolves.
    #[serde(serialize_with = "crate::json::linkage")]
    pub linkage: Vec<Resolution>,
    /// Kernel x target matrix per binary with device code.
    #[serde(serialize_with = "crate::json::coverage")]
    pub coverage: Vec<Coverage>,
    /// GPU generations x binaries: how the kernels get onto each (docs/reach.md).
    pub reach: Reach,
}

/// Totals over the whole input (exact, whatever the lists leave out).
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Counts {
    /// Findings at [`Severity::Error`].
    pub errors: usize,
    /// Findings at [`Severity::Warning`].
    pub warnings: usize,
    /// Findings at [`Severity::Info`].
    pub infos: usize,
    /// Findings waived (any severity; not in the three counts above).
    pub waived: usize,
    /// ELF files and bare fatbins.
    pub binaries: usize,
    /// Binaries holding loadable device code.
    pub binaries_with_device_code: usize,
    /// Fatbin containers over all binaries.
    pub fatbin_containers: usize,
    /// SASS (cubin) entries.
    pub cubins: usize,
    /// PTX entries.
    pub ptx: usize,
    /// Distinct kernel names per binary, summed.
    pub kernels: usize,
}

/// A finding a waiver matched.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Waived {
    /// The finding as the rule stated it.
    #[serde(flatten)]
    pub finding: Finding,
    /// The waiver's reason.
    pub reason: String,
    /// The waiver, `rule[:path]`.
    pub allow: String,
}

impl Report {
    /// The most severe finding, if any.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}

/// Reads `path` and evaluates `policy`.
pub fn audit(
    path: &Path,
    policy: &Policy,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Report, AuditError> {
    let artifact = read::path(path, opts, progress)?;
    let files = artifact.files.len();
    let report = evaluate(path, artifact, policy);
    // A directory with nothing looked at and nothing wrong is no verdict: a pass would vouch for
    // nothing (an empty or mistyped site-packages path). A wheel always has something audited,
    // its RECORD and metadata, so a pure-Python wheel with nothing wrong still passes.
    let flagged =
        report.worst().is_some_and(|w| w >= Severity::Warning) || report.counts.waived > 0;
    if report.kind == InputKind::Directory && report.binaries.is_empty() && !flagged {
        return Err(AuditError::NothingToAudit(path.to_path_buf(), files));
    }
    Ok(report)
}

/// Evaluates the rules over an artifact already read.
pub fn evaluate(path: &Path, mut artifact: Artifact, policy: &Policy) -> Report {
    let (mut findings, linkage) = rules::evaluate(&mut artifact, policy);
    let reach = reach::of(&artifact.binaries, policy.min_driver);
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.rule.cmp(&b.rule))
            .then(a.file.cmp(&b.file))
    });
    findings.dedup();
    let (findings, waived, unused_allows) = waive(findings, &policy.allow);
    let mut counts = Counts {
        waived: waived.len(),
        binaries: artifact.binaries.len(),
        ..Default::default()
    };
    counts.add_severities(&findings);
    // Counted in full above; listed up to a cap per rule (a hostile input can produce millions).
    let findings = finding::aggregate(findings, FINDINGS_PER_RULE);
    let waived = cap_waived(waived);
    let mut manylinux = Vec::new();
    rules::by_distribution(&mut artifact, |view| {
        let binaries: Vec<&Binary> = view.binaries.iter().collect();
        if view.kind != InputKind::Fatbin {
            manylinux.push(manylinux::of(view.wheel.as_ref(), &binaries));
        }
    });
    let mut coverage = Vec::new();
    for b in &artifact.binaries {
        if let Some(d) = &b.device {
            counts.add_device_code(d);
        }
        coverage.extend(kernel_matrix::of(b));
    }
    Report {
        schema: SCHEMA_VERSION,
        input: path.display().to_string(),
        kind: artifact.kind,
        policy: policy.clone(),
        counts,
        findings,
        waived,
        unused_allows,
        manylinux,
        binaries: artifact.binaries,
        linkage,
        wheel: artifact.wheel,
        coverage,
        reach,
    }
}

impl Counts {
    fn add_severities(&mut self, findings: &[Finding]) {
        for f in findings {
            match f.severity {
                Severity::Error => self.errors += 1,
                Severity::Warning => self.warnings += 1,
                Severity::Info => self.infos += 1,
            }
        }
    }

    /// One binary's device code: its containers, cubins, PTX and distinct kernels.
    fn add_device_code(&mut self, d: &facts::DeviceCode) {
        self.binaries_with_device_code += 1;
        self.fatbin_containers += d.containers;
        self.cubins += d
            .entries
            .iter()
            .filter(|e| e.kind == facts::EntryKind::Cubin)
            .count();
        self.ptx += d
            .entries
            .iter()
            .filter(|e| e.kind == facts::EntryKind::Ptx)
            .count();
        let kernels: std::collections::BTreeSet<&String> =
            d.entries.iter().flat_map(|e| &e.kernels).collect();
        self.kernels += kernels.len();
    }
}

/// Splits `findings` into those that stand and those a waiver matches (the first matching
/// waiver gives the reason); also returns the waivers that matched nothing.
fn waive(findings: Vec<Finding>, allows: &[Allow]) -> (Vec<Finding>, Vec<Waived>, Vec<String>) {
    if allows.is_empty() {
        return (findings, Vec::new(), Vec::new());
    }
    let mut used = vec![false; allows.len()];
    let mut kept = Vec::new();
    let mut waived = Vec::new();
    for f in findings {
        match allows.iter().position(|a| a.matches(&f)) {
            Some(i) => {
                used[i] = true;
                waived.push(Waived {
                    reason: allows[i].reason.clone(),
                    allow: allows[i].label(),
                    finding: f,
                });
            }
            None => kept.push(f),
        }
    }
    let unused = allows
        .iter()
        .zip(used)
        .filter(|(_, u)| !u)
        .map(|(a, _)| a.label())
        .collect();
    (kept, waived, unused)
}

/// Waived findings listed up to [`FINDINGS_PER_RULE`] per rule, like findings.
fn cap_waived(waived: Vec<Waived>) -> Vec<Waived> {
    let mut per_rule: std::collections::HashMap<Rule, usize> = Default::default();
    waived
        .into_iter()
        .filter(|w| {
            let n = per_rule.entry(w.finding.rule).or_default();
            *n += 1;
            *n <= FINDINGS_PER_RULE
        })
        .collect()
}
