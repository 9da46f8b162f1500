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
    ("fatbin/malformed", Severity::Error),
    ("fatbin/bad-entry", Severity::Error),
    ("linkage/unresolved-needed", Severity::Error),
    ("linkage/unresolved-dlopen", Severity::Error),
    ("linkage/driver-stub-needed", Severity::Error),
    ("linkage/driver-bundled", Severity::Error),
    ("linkage/build-tree-runpath", Severity::Error),
    ("linkage/bad-dlopen-note", Severity::Warning),
    ("arch/missing-sass", Severity::Error),
    ("arch/kernel-missing-sass", Severity::Error),
    ("arch/missing-ptx", Severity::Error),
    ("arch/unexpected-ptx", Severity::Error),
    ("arch/ptx-isa-too-new", Severity::Error),
    ("arch/extra-sass", Severity::Info),
    ("arch/no-device-code", Severity::Error),
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
    ("metadata/missing-requires-dist", Severity::Error),
    ("metadata/requires-dist-pin", Severity::Warning),
    ("metadata/bad-requires-dist", Severity::Warning),
    ("tags/glibc-too-new", Severity::Error),
    ("tags/abi3-links-libpython", Severity::Error),
    ("tags/filename-mismatch", Severity::Warning),
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

#[cfg(test)]
mod tests {
    #[test]
    fn every_rule_used_in_the_source_is_registered() {
        let src_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut used = Vec::new();
        for dir in [src_dir.to_string(), format!("{src_dir}/rules")] {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("finding.rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for piece in text.split("finding(").skip(1) {
                        if let Some(rest) = piece.trim_start().strip_prefix('"') {
                            used.push(rest.split('"').next().unwrap().to_string());
                        }
                    }
                }
            }
        }
        assert!(used.len() > 10, "rule scan found only {used:?}");
        for rule in used {
            assert!(
                super::RULES.iter().any(|(r, _)| *r == rule),
                "{rule} is not in RULES"
            );
        }
    }
}
