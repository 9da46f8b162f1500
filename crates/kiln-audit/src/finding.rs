//! A finding: what a rule saw, where, how bad, and how to fix it.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn parse(text: &str) -> Option<Severity> {
        match text {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable rule id, e.g. "linkage/unresolved-needed" (see docs/audit-json-schema.md).
    pub rule: &'static str,
    pub severity: Severity,
    /// Path inside the input (wheel member, file under the directory, or the file itself).
    pub file: String,
    pub message: String,
    pub fix: String,
}

/// Every rule id the audit can emit, with its severity; the JSON schema documents these.
pub const RULES: &[(&str, Severity)] = &[
    ("input/unreadable-member", Severity::Error),
    ("elf/unreadable", Severity::Error),
    ("elf/dynamic-mismatch", Severity::Error),
    ("fatbin/malformed", Severity::Error),
    ("fatbin/bad-entry", Severity::Error),
    ("fatbin/target-mismatch", Severity::Error),
    ("fatbin/outside-nv-fatbin", Severity::Error),
    ("linkage/unresolved-needed", Severity::Error),
    ("linkage/unresolved-dlopen", Severity::Error),
    ("linkage/driver-stub-needed", Severity::Error),
    ("linkage/driver-bundled", Severity::Error),
    ("linkage/build-tree-runpath", Severity::Error),
    ("linkage/needed-path", Severity::Error),
    ("linkage/cuda-major-mix", Severity::Error),
    ("tags/cxx-abi-too-new", Severity::Error),
    ("linkage/runpath-undeclared-wheel", Severity::Warning),
    ("linkage/extra-only-dependency", Severity::Warning),
    ("linkage/bad-dlopen-note", Severity::Warning),
    ("linkage/undeclared-dlopen", Severity::Info),
    ("arch/missing-sass", Severity::Error),
    ("arch/kernel-missing-sass", Severity::Error),
    ("arch/missing-ptx", Severity::Error),
    ("arch/unexpected-ptx", Severity::Error),
    ("arch/ptx-isa-too-new", Severity::Error),
    ("arch/extra-sass", Severity::Info),
    ("arch/no-device-code", Severity::Error),
    ("arch/relocatable-only", Severity::Warning),
    ("reach/no-forward-path", Severity::Warning),
    ("reach/gap", Severity::Warning),
    ("reach/required-gpu", Severity::Error),
    ("manifest/unreadable", Severity::Error),
    ("manifest/target-missing", Severity::Error),
    ("manifest/kernel-missing", Severity::Error),
    ("manifest/unclaimed-target", Severity::Error),
    ("manifest/ptx-isa-mismatch", Severity::Error),
    ("manifest/matrix-differs", Severity::Error),
    ("wheel/unsafe-path", Severity::Error),
    ("wheel/member-too-large", Severity::Error),
    ("wheel/record-mismatch", Severity::Error),
    ("wheel/record-missing", Severity::Error),
    ("wheel/no-dist-info", Severity::Error),
    ("wheel/zip-differential", Severity::Error),
    ("wheel/symlink-member", Severity::Error),
    ("wheel/bad-dist-info", Severity::Error),
    ("input/too-large", Severity::Error),
    ("input/over-limit", Severity::Error),
    ("metadata/missing-requires-dist", Severity::Error),
    ("metadata/requires-dist-pin", Severity::Error),
    ("metadata/requires-dist-exact", Severity::Warning),
    ("metadata/bad-requires-dist", Severity::Warning),
    ("tags/glibc-too-new", Severity::Error),
    ("tags/abi3-links-libpython", Severity::Error),
    ("tags/machine-mismatch", Severity::Error),
    ("tags/filename-mismatch", Severity::Warning),
];

/// Rules whose severity depends on a fact: the lower severity, and when it applies.
pub const LOWER_SEVERITY: &[(&str, Severity, &str)] = &[
    (
        "linkage/unresolved-dlopen",
        Severity::Warning,
        "the .note.dlopen feature's priority is not `required`",
    ),
    (
        "fatbin/outside-nv-fatbin",
        Severity::Info,
        "the binary has no kiln build manifest: third-party device code its library loads itself (cuDNN's .cask_resource)",
    ),
];

/// The severity a rule id is registered with (panics only on a typo in this crate's own code,
/// caught by the unit test below).
pub fn severity_of(rule: &str) -> Severity {
    RULES
        .iter()
        .find(|(r, _)| *r == rule)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("unregistered rule id {rule}"))
}

pub(crate) fn finding(
    rule: &'static str,
    file: &str,
    message: String,
    fix: impl Into<String>,
) -> Finding {
    Finding {
        rule,
        severity: severity_of(rule),
        file: file.to_string(),
        message,
        fix: fix.into(),
    }
}

/// A finding at the rule's registered lower severity ([`LOWER_SEVERITY`]).
pub(crate) fn finding_lower(
    rule: &'static str,
    file: &str,
    message: String,
    fix: impl Into<String>,
) -> Finding {
    let severity = LOWER_SEVERITY
        .iter()
        .find(|(r, _, _)| *r == rule)
        .map(|(_, s, _)| *s)
        .unwrap_or_else(|| panic!("no lower severity registered for {rule}"));
    Finding {
        severity,
        ..finding(rule, file, message, fix)
    }
}

/// Keeps the first `cap` findings of each rule (input sorted by severity, then rule) and adds,
/// per rule over the cap, one finding that counts the rest: linear, and the report stays small
/// however many findings a hostile input produces.
pub fn aggregate(findings: Vec<Finding>, cap: usize) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::with_capacity(findings.len().min(4096));
    let mut current: Option<(&'static str, Severity)> = None;
    let mut kept = 0usize;
    let mut dropped = 0usize;
    let flush = |out: &mut Vec<Finding>, rule: Option<(&'static str, Severity)>, dropped: usize| {
        if let (Some((rule, severity)), true) = (rule, dropped > 0) {
            out.push(Finding {
                rule,
                severity,
                file: String::new(),
                message: format!("… and {dropped} more findings of this rule, not listed"),
                fix: "fix the ones listed and audit again".into(),
            });
        }
    };
    for f in findings {
        if current != Some((f.rule, f.severity)) {
            flush(&mut out, current, dropped);
            current = Some((f.rule, f.severity));
            kept = 0;
            dropped = 0;
        }
        if kept < cap {
            kept += 1;
            out.push(f);
        } else {
            dropped += 1;
        }
    }
    flush(&mut out, current, dropped);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn findings_past_the_cap_are_counted_not_listed() {
        let f = |rule, file: &str| super::finding(rule, file, "m".into(), "x");
        let mut all: Vec<super::Finding> = (0..250)
            .map(|i| f("wheel/record-missing", &format!("a{i}")))
            .collect();
        all.push(f("wheel/unsafe-path", "b"));
        let out = super::aggregate(all, 100);
        assert_eq!(out.len(), 102, "{out:?}");
        assert_eq!(
            out[100].message,
            "… and 150 more findings of this rule, not listed"
        );
        assert_eq!(out[100].rule, "wheel/record-missing");
        assert_eq!(out[101].file, "b");
    }

    #[test]
    fn every_rule_used_in_the_source_is_registered() {
        let src_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut used = Vec::new();
        for dir in [src_dir.to_string(), format!("{src_dir}/rules")] {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("finding.rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for piece in text
                        .split("finding(")
                        .skip(1)
                        .chain(text.split("finding_lower(").skip(1))
                    {
                        if let Some(rest) = piece.trim_start().strip_prefix('"') {
                            used.push(rest.split('"').next().unwrap().to_string());
                        }
                    }
                }
            }
        }
        assert!(used.len() > 10, "rule scan found only {used:?}");
        for (rule, lower, _) in super::LOWER_SEVERITY {
            assert!(super::severity_of(rule) > *lower, "{rule}: not lower");
        }
        for rule in used {
            assert!(
                super::RULES.iter().any(|(r, _)| *r == rule),
                "{rule} is not in RULES"
            );
        }
    }
}

/// The readers turn bytes into facts; only `rules/` decides findings. A reader that constructs a
/// [`Finding`] or reaches into the crate root (where the entry points and the policy live) fails
/// here. The readers are every module outside `rules/` except the registry, the entry points and
/// the report's derived views and its JSON writer.
#[cfg(test)]
mod reader_purity {
    const NOT_READERS: &[&str] = &[
        "finding.rs",
        "lib.rs",
        "kernel_matrix.rs",
        "policy.rs",
        "json.rs",
    ];

    fn readers() -> Vec<(String, String)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".rs") && !NOT_READERS.contains(&name.as_str()) {
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
        out
    }

    /// The code of a file with `//` comments and `#[cfg(test)]` modules left out.
    fn code(text: &str) -> String {
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        text.lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What in one reader's code breaks the rule.
    fn violations(name: &str, text: &str) -> Vec<String> {
        let code = code(text);
        let mut out = Vec::new();
        for banned in [
            "Finding",
            "finding(",
            "finding::",
            "Severity",
            "Policy",
            "rules::",
        ] {
            if code.contains(banned) {
                out.push(format!(
                    "{name} mentions `{banned}`: readers produce facts, rules/ decides findings"
                ));
            }
        }
        for line in code.lines() {
            let l = line.trim();
            let Some(path) = l.strip_prefix("use crate::") else {
                continue;
            };
            // `use crate::{…}` / `use crate::Item` reach the crate root; `use crate::module::…`
            // is a sibling module.
            if path.starts_with('{')
                || path.starts_with('*')
                || path.starts_with(char::is_uppercase)
            {
                out.push(format!("{name} imports from the crate root: {l}"));
            }
        }
        out
    }

    #[test]
    fn no_reader_constructs_a_finding_or_imports_the_crate_root() {
        let readers = readers();
        let names: Vec<&str> = readers.iter().map(|(n, _)| n.as_str()).collect();
        for expected in ["input.rs", "elf.rs", "device.rs", "facts.rs", "runpath.rs"] {
            assert!(
                names.contains(&expected),
                "{expected} not scanned: {names:?}"
            );
        }
        let found: Vec<String> = readers
            .iter()
            .flat_map(|(name, text)| violations(name, text))
            .collect();
        assert!(found.is_empty(), "{found:#?}");
    }

    /// The scan itself can fail: the old input.rs's shape is caught, a fact-only reader is not.
    #[test]
    fn the_scan_catches_what_it_forbids() {
        let old = "use crate::finding::{finding, Finding};\nuse crate::{AuditError, Options, Progress};\nfn f() { findings.push(finding(\"wheel/unsafe-path\", n, m, x)); }";
        assert_eq!(
            violations("old.rs", old).len(),
            4,
            "{:?}",
            violations("old.rs", old)
        );
        let fine = "use crate::facts::{Artifact, ReadProblem};\nuse crate::options::Options; // not a Finding\n#[cfg(test)]\nmod t { use crate::Finding; }";
        assert!(
            violations("fine.rs", fine).is_empty(),
            "{:?}",
            violations("fine.rs", fine)
        );
    }
}
