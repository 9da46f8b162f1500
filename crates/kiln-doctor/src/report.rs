//! What a check returns: a stable id, a status, one message, the fixes, and whether it is a
//! build-time or run-time concern (so `--runtime-only` / `--build-only` can soften it).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::inventory::Inventory;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Not fatal, but worth knowing (or a failure softened by the mode).
    Warn,
    Fail,
    /// Could not run because a check it depends on failed; the message says which.
    Skip,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// Which machines a check matters on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Needed to build (nvcc, libclang, rustc, maturin, link preflight).
    Build,
    /// Needed to run (driver, GPUs, runtime libraries).
    Run,
    /// Both (pins, loader traps).
    Both,
}

/// Which checks may fail the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Everything must pass.
    Full,
    /// A machine that only runs artifacts: build-scope failures become warnings.
    RuntimeOnly,
    /// A build machine (no GPU expected): run-scope failures become warnings.
    BuildOnly,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable id (see the crate documentation for the list).
    pub id: &'static str,
    pub status: Status,
    /// What this instance is about when an id repeats (a GPU, a library file); else None.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub message: String,
    /// What to do about it; empty when nothing needs doing.
    pub fix: Vec<String>,
    pub scope: Scope,
    /// Machine-readable facts behind the message (e.g. a GPU's `sm` and `coverage`); keys
    /// are documented with the ids in the crate docs.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<&'static str, String>,
    /// Set when the mode turned a failure into a warning.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub softened: bool,
}

impl Check {
    pub fn new(
        id: &'static str,
        scope: Scope,
        status: Status,
        message: impl Into<String>,
    ) -> Check {
        Check {
            id,
            status,
            subject: None,
            message: message.into(),
            fix: Vec::new(),
            facts: BTreeMap::new(),
            scope,
            softened: false,
        }
    }
    pub fn ok(id: &'static str, scope: Scope, message: impl Into<String>) -> Check {
        Check::new(id, scope, Status::Ok, message)
    }
    pub fn warn(id: &'static str, scope: Scope, message: impl Into<String>) -> Check {
        Check::new(id, scope, Status::Warn, message)
    }
    pub fn fail(id: &'static str, scope: Scope, message: impl Into<String>) -> Check {
        Check::new(id, scope, Status::Fail, message)
    }
    pub fn skip(id: &'static str, scope: Scope, message: impl Into<String>) -> Check {
        Check::new(id, scope, Status::Skip, message)
    }
    pub fn with_fix(mut self, fix: impl Into<String>) -> Check {
        self.fix.push(fix.into());
        self
    }
    pub fn with_fact(mut self, key: &'static str, value: impl Into<String>) -> Check {
        self.facts.insert(key, value.into());
        self
    }
    pub fn with_subject(mut self, subject: impl Into<String>) -> Check {
        self.subject = Some(subject.into());
        self
    }

    /// Applies the mode: a failure outside the machine's role becomes a warning.
    pub(crate) fn soften_for(mut self, mode: Mode) -> Check {
        let outside = matches!(
            (mode, self.scope),
            (Mode::RuntimeOnly, Scope::Build) | (Mode::BuildOnly, Scope::Run)
        );
        if outside && self.status == Status::Fail {
            self.status = Status::Warn;
            self.softened = true;
        }
        self
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    pub ok: usize,
    pub warn: usize,
    pub fail: usize,
    pub skip: usize,
}

/// What stops this machine from building or from running, if anything: the first check of
/// that scope that failed (before the mode softened it).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Blocker {
    pub id: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The check's message up to its first clause (the whole of it is in `checks`).
    pub reason: String,
}

/// The one-line answer: can this machine build kiln's artifacts, can it run them?
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Verdict {
    pub can_build: bool,
    pub can_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_blocker: Option<Blocker>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_blocker: Option<Blocker>,
}

impl Verdict {
    fn of(checks: &[Check]) -> Verdict {
        let blocker = |scope: Scope| {
            checks
                .iter()
                .find(|c| {
                    (c.scope == scope || c.scope == Scope::Both)
                        && (c.status == Status::Fail || c.softened)
                })
                .map(|c| Blocker {
                    id: c.id,
                    subject: c.subject.clone(),
                    reason: first_clause(&c.message),
                })
        };
        let (build_blocker, run_blocker) = (blocker(Scope::Build), blocker(Scope::Run));
        Verdict {
            can_build: build_blocker.is_none(),
            can_run: run_blocker.is_none(),
            build_blocker,
            run_blocker,
        }
    }
}

/// "no NVIDIA driver found: libcuda.so.1 cannot be …" -> "no NVIDIA driver found", "nvcc not
/// found (looked in: …)" -> "nvcc not found"; at most 100 characters.
pub fn first_clause(message: &str) -> String {
    let cut = [": ", "; ", " ("]
        .iter()
        .filter_map(|sep| message.find(sep))
        .min()
        .unwrap_or(message.len());
    let head = &message[..cut];
    if head.chars().count() > 100 {
        let short: String = head.chars().take(99).collect();
        format!("{short}…")
    } else {
        head.to_string()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// JSON schema version of this report.
    pub schema: u32,
    pub mode: Mode,
    /// The Cargo.toml the pins came from, or None when the built-in pins were used.
    pub pins: Option<String>,
    /// Can this machine build, can it run (and the first reason why not).
    pub verdict: Verdict,
    pub checks: Vec<Check>,
    pub summary: Summary,
    /// What is installed, as installed: OS, glibc, Python and its nvidia-*/torch/kiln wheels,
    /// the driver and GPUs, nvcc.
    pub inventory: Inventory,
    /// Wall time of the whole run, in milliseconds (the point is to take seconds, not hours).
    pub elapsed_ms: u64,
}

/// Version 1 plus `verdict` and `inventory` (added fields only: version-1 readers still work).
pub const SCHEMA: u32 = 1;

impl Report {
    pub(crate) fn new(
        mode: Mode,
        pins: Option<String>,
        checks: Vec<Check>,
        inventory: Inventory,
        elapsed_ms: u64,
    ) -> Report {
        let checks: Vec<Check> = checks.into_iter().map(|c| c.soften_for(mode)).collect();
        let mut summary = Summary::default();
        for c in &checks {
            match c.status {
                Status::Ok => summary.ok += 1,
                Status::Warn => summary.warn += 1,
                Status::Fail => summary.fail += 1,
                Status::Skip => summary.skip += 1,
            }
        }
        Report {
            schema: SCHEMA,
            mode,
            pins,
            verdict: Verdict::of(&checks),
            checks,
            summary,
            inventory,
            elapsed_ms,
        }
    }

    pub fn failed(&self) -> bool {
        self.summary.fail > 0
    }

    /// The checks with this id (several for per-GPU or per-file ids).
    pub fn by_id<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Check> + 'a {
        self.checks.iter().filter(move |c| c.id == id)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_clause_is_short() {
        assert_eq!(
            first_clause("no NVIDIA driver found: libcuda.so.1 cannot be loaded (x: y)"),
            "no NVIDIA driver found"
        );
        assert_eq!(first_clause("a; b: c"), "a");
        // A clause is never cut inside its parenthesis.
        assert_eq!(
            first_clause("nvcc not found (looked in: /a, /b)."),
            "nvcc not found"
        );
        assert_eq!(first_clause(&"x".repeat(150)).chars().count(), 100);
    }

    #[test]
    fn the_verdict_names_the_first_blocker_of_each_scope() {
        let checks = vec![
            Check::ok("toolchain.nvcc", Scope::Build, "fine"),
            Check::fail(
                "driver.libcuda",
                Scope::Run,
                "no NVIDIA driver found: details",
            ),
            Check::fail("gpu.devices", Scope::Run, "later"),
        ];
        let r = Report::new(
            Mode::BuildOnly,
            None,
            checks,
            Inventory::gather(
                Err(crate::run_error::RunError::NoPython),
                &Err(crate::driver::NotLoaded { reason: "x".into() }),
                None,
            ),
            0,
        );
        // Softened to warn by --build-only, the run blocker is still named.
        assert!(!r.failed());
        assert!(r.verdict.can_build && !r.verdict.can_run);
        let b = r.verdict.run_blocker.unwrap();
        assert_eq!(
            (b.id, b.reason.as_str()),
            ("driver.libcuda", "no NVIDIA driver found")
        );
    }
}
