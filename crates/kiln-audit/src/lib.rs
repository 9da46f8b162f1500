//! kiln-audit: proves what a wheel, shared library or directory really contains — ELF linkage,
//! device code in `.nv_fatbin`, wheel metadata — and evaluates a [`Policy`] into [`Finding`]s.
//! A library: it never prints and never exits; the `kiln` binary renders the [`Report`].
//!
//! - [`input`]: reads the input (wheel / ELF / directory) into an artifact
//! - [`elf`], [`device`], [`wheel`]: the readers
//! - [`platform`], [`nvidia_wheels`]: what the target system and NVIDIA's wheels provide
//! - [`rules`]: linkage, arch matrix, metadata
//! - [`coverage`]: the kernel x target matrix

pub mod coverage;
pub mod device;
pub mod elf;
pub mod finding;
pub mod input;
pub mod nvidia_wheels;
pub mod platform;
pub mod policy;
pub mod rules;
pub mod wheel;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use finding::{Finding, Severity, RULES};
pub use input::{Artifact, Binary, InputKind};
pub use policy::Policy;
pub use rules::Resolution;

/// Version of the JSON report layout (docs/audit-json-schema.md).
pub const SCHEMA_VERSION: u32 = 1;

/// The input could not be read at all (exit code 2 territory).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0}: not a wheel (zip), an ELF file, a fatbin or a directory")]
    Unrecognized(PathBuf),
    #[error("{0}: not a readable zip archive: {1}")]
    Zip(PathBuf, String),
    #[error("{0}: members declare {1} bytes in total, over the limit of {2} (--max-total-size)")]
    TooLarge(PathBuf, u64, u64),
}

impl AuditError {
    pub(crate) fn io(path: &Path, e: std::io::Error) -> AuditError {
        AuditError::Io(path.to_path_buf(), e)
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    /// Decompress every cubin to list its kernels (the coverage matrix and per-kernel rule).
    pub list_kernels: bool,
    pub max_member_size: u64,
    pub max_total_size: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            list_kernels: true,
            max_member_size: 4 << 30,
            max_total_size: 32 << 30,
        }
    }
}

/// Progress of long reads, in bytes; called from worker threads.
pub trait Progress: Sync {
    fn begin(&self, total: u64, what: &str);
    fn advance(&self, bytes: u64);
    fn end(&self);
}

pub struct NoProgress;
impl Progress for NoProgress {
    fn begin(&self, _: u64, _: &str) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: u32,
    pub input: String,
    pub kind: InputKind,
    pub policy: Policy,
    pub counts: Counts,
    pub findings: Vec<Finding>,
    pub binaries: Vec<Binary>,
    pub linkage: Vec<Resolution>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<input::WheelMeta>,
    pub coverage: Vec<coverage::Coverage>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
    pub binaries: usize,
    pub binaries_with_device_code: usize,
    pub fatbin_containers: usize,
    pub cubins: usize,
    pub ptx: usize,
    pub kernels: usize,
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
    let artifact = input::read(path, opts, progress)?;
    Ok(evaluate(path, artifact, policy))
}

/// Evaluates the rules over an artifact already read.
pub fn evaluate(path: &Path, artifact: Artifact, policy: &Policy) -> Report {
    let (rule_findings, linkage) = rules::evaluate(&artifact, policy);
    let mut findings = artifact.findings.clone();
    findings.extend(rule_findings);
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.rule.cmp(b.rule))
            .then(a.file.cmp(&b.file))
    });
    findings.dedup();
    let mut counts = Counts {
        binaries: artifact.binaries.len(),
        ..Default::default()
    };
    for f in &findings {
        match f.severity {
            Severity::Error => counts.errors += 1,
            Severity::Warning => counts.warnings += 1,
            Severity::Info => counts.infos += 1,
        }
    }
    let mut coverage = Vec::new();
    for b in &artifact.binaries {
        if let Some(d) = &b.device {
            counts.binaries_with_device_code += 1;
            counts.fatbin_containers += d.containers;
            counts.cubins += d.entries.iter().filter(|e| e.kind == "cubin").count();
            counts.ptx += d.entries.iter().filter(|e| e.kind == "ptx").count();
            let kernels: std::collections::BTreeSet<&String> =
                d.entries.iter().flat_map(|e| &e.kernels).collect();
            counts.kernels += kernels.len();
        }
        coverage.extend(coverage::of(b));
    }
    Report {
        schema: SCHEMA_VERSION,
        input: path.display().to_string(),
        kind: artifact.kind,
        policy: policy.clone(),
        counts,
        findings,
        binaries: artifact.binaries,
        linkage,
        wheel: artifact.wheel,
        coverage,
    }
}
