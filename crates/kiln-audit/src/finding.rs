//! A finding: what a rule saw, where, how bad, and how to fix it.

use std::fmt;

use serde::Serialize;

/// How bad a finding is; `--fail-on` compares against it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; never fails the default gate.
    Info,
    /// Likely wrong or fragile.
    Warning,
    /// The artifact is broken for some user.
    Error,
}

impl Severity {
    /// The severity named `info`, `warning` or `error`.
    pub fn parse(text: &str) -> Option<Severity> {
        match text {
            "info" => Some(Severity::Info),
            "warning" => Some(Severity::Warning),
            "error" => Some(Severity::Error),
            _ => None,
        }
    }
    /// Its name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One thing a rule found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Finding {
    /// The rule; in JSON its stable id, e.g. "linkage/unresolved-needed" (see
    /// docs/audit-json-schema.md).
    pub rule: Rule,
    /// Usually the rule's ([`Rule::severity`]); lower where [`LOWER_SEVERITY`] says.
    pub severity: Severity,
    /// Path inside the input (wheel member, file under the directory, or the file itself).
    pub file: String,
    /// What is wrong, with the facts that show it.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

/// Every rule the audit can emit, with its id (the JSON `rule` string, docs/audit-json-schema.md)
/// and its registered severity, in the order the schema lists them.
macro_rules! rules {
    ($($variant:ident = $id:literal, $severity:ident;)*) => {
        /// A rule: what one kind of [`Finding`] checks. Serialized, displayed and ordered as its
        /// id string ([`Rule::as_str`]), so reports sort and read as they did with string ids.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Rule {
            $(
                #[doc = concat!("`", $id, "`")]
                $variant,
            )*
        }

        impl Rule {
            /// Every rule, in registration order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The stable id, e.g. `"linkage/unresolved-needed"`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Rule::$variant => $id,)*
                }
            }

            /// The severity the rule is registered with ([`LOWER_SEVERITY`] lists the
            /// exceptions).
            pub const fn severity(self) -> Severity {
                match self {
                    $(Rule::$variant => Severity::$severity,)*
                }
            }
        }
    };
}

rules! {
    InputUnreadableMember = "input/unreadable-member", Error;
    ElfUnreadable = "elf/unreadable", Error;
    ElfDynamicMismatch = "elf/dynamic-mismatch", Error;
    FatbinMalformed = "fatbin/malformed", Error;
    FatbinBadEntry = "fatbin/bad-entry", Error;
    FatbinTargetMismatch = "fatbin/target-mismatch", Error;
    FatbinOutsideNvFatbin = "fatbin/outside-nv-fatbin", Error;
    LinkageUnresolvedNeeded = "linkage/unresolved-needed", Error;
    LinkageUnresolvedDlopen = "linkage/unresolved-dlopen", Error;
    LinkageDriverStubNeeded = "linkage/driver-stub-needed", Error;
    LinkageDriverBundled = "linkage/driver-bundled", Error;
    LinkageBuildTreeRunpath = "linkage/build-tree-runpath", Error;
    LinkageNeededPath = "linkage/needed-path", Error;
    LinkageCudaMajorMix = "linkage/cuda-major-mix", Error;
    TagsCxxAbiTooNew = "tags/cxx-abi-too-new", Error;
    LinkageRunpathUndeclaredWheel = "linkage/runpath-undeclared-wheel", Warning;
    LinkageExtraOnlyDependency = "linkage/extra-only-dependency", Warning;
    LinkageBadDlopenNote = "linkage/bad-dlopen-note", Warning;
    LinkageUndeclaredDlopen = "linkage/undeclared-dlopen", Warning;
    ArchMissingSass = "arch/missing-sass", Error;
    ArchKernelMissingSass = "arch/kernel-missing-sass", Error;
    ArchMissingPtx = "arch/missing-ptx", Error;
    ArchUnexpectedPtx = "arch/unexpected-ptx", Error;
    ArchPtxIsaTooNew = "arch/ptx-isa-too-new", Error;
    ArchExtraSass = "arch/extra-sass", Info;
    ArchNoDeviceCode = "arch/no-device-code", Error;
    ArchRelocatableOnly = "arch/relocatable-only", Warning;
    ReachNoForwardPath = "reach/no-forward-path", Warning;
    ReachGap = "reach/gap", Warning;
    ReachRequiredGpu = "reach/required-gpu", Error;
    ReachMatrixHole = "reach/matrix-hole", Error;
    ManifestUnreadable = "manifest/unreadable", Error;
    ManifestTargetMissing = "manifest/target-missing", Error;
    ManifestKernelMissing = "manifest/kernel-missing", Error;
    ManifestUnclaimedTarget = "manifest/unclaimed-target", Error;
    ManifestPtxIsaMismatch = "manifest/ptx-isa-mismatch", Error;
    ManifestMatrixDiffers = "manifest/matrix-differs", Error;
    WheelUnsafePath = "wheel/unsafe-path", Error;
    WheelMemberTooLarge = "wheel/member-too-large", Error;
    WheelRecordMismatch = "wheel/record-mismatch", Error;
    WheelRecordMissing = "wheel/record-missing", Error;
    WheelNoDistInfo = "wheel/no-dist-info", Error;
    WheelZipDifferential = "wheel/zip-differential", Error;
    WheelSymlinkMember = "wheel/symlink-member", Error;
    WheelBadDistInfo = "wheel/bad-dist-info", Error;
    InputTooLarge = "input/too-large", Error;
    InputOverLimit = "input/over-limit", Error;
    MetadataMissingRequiresDist = "metadata/missing-requires-dist", Error;
    MetadataRequiresDistPin = "metadata/requires-dist-pin", Error;
    MetadataRequiresDistExact = "metadata/requires-dist-exact", Warning;
    MetadataBadRequiresDist = "metadata/bad-requires-dist", Warning;
    TagsGlibcTooNew = "tags/glibc-too-new", Error;
    TagsAbi3LinksLibpython = "tags/abi3-links-libpython", Error;
    TagsMachineMismatch = "tags/machine-mismatch", Error;
    TagsFilenameMismatch = "tags/filename-mismatch", Warning;
}

impl Rule {
    /// The rule with this id.
    pub fn parse(id: &str) -> Option<Rule> {
        Rule::ALL.iter().copied().find(|r| r.as_str() == id)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule is its id string; the schema lists every id.
impl schemars::JsonSchema for Rule {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Rule".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let ids: Vec<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": ids })
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// By id, as the string ids sorted: the report's order does not depend on the variants' order.
impl Ord for Rule {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Rule {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq<&str> for Rule {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Every rule with its registered severity; the JSON schema documents these.
pub const RULES: &[Rule] = Rule::ALL;

/// Rules whose severity depends on a fact: the lower severity, and when it applies.
pub const LOWER_SEVERITY: &[(Rule, Severity, &str)] = &[
    (
        Rule::LinkageUnresolvedDlopen,
        Severity::Warning,
        "the .note.dlopen feature's priority is not `required`",
    ),
    (
        Rule::LinkageUndeclaredDlopen,
        Severity::Info,
        "Requires-Dist names the wheel that ships the library, or the input has no metadata, or a directory has it installed",
    ),
    (
        Rule::FatbinOutsideNvFatbin,
        Severity::Info,
        "the binary has no kiln build manifest: third-party device code its library loads itself (cuDNN's .cask_resource)",
    ),
];

/// The severity a rule is registered with.
#[cfg(test)]
pub fn severity_of(rule: Rule) -> Severity {
    rule.severity()
}

pub(crate) fn finding(rule: Rule, file: &str, message: String, fix: impl Into<String>) -> Finding {
    Finding {
        rule,
        severity: rule.severity(),
        file: file.to_string(),
        message,
        fix: fix.into(),
    }
}

/// A finding at the rule's registered lower severity ([`LOWER_SEVERITY`]).
pub(crate) fn finding_lower(
    rule: Rule,
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
    let mut current: Option<(Rule, Severity)> = None;
    let mut kept = 0usize;
    let mut dropped = 0usize;
    let flush = |out: &mut Vec<Finding>, rule: Option<(Rule, Severity)>, dropped: usize| {
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
            .map(|i| f(super::Rule::WheelRecordMissing, &format!("a{i}")))
            .collect();
        all.push(f(super::Rule::WheelUnsafePath, "b"));
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
    fn rule_ids_are_unique_and_parse_back() {
        let mut ids: Vec<&str> = super::Rule::ALL.iter().map(|r| r.as_str()).collect();
        for rule in super::Rule::ALL {
            assert_eq!(super::Rule::parse(rule.as_str()), Some(*rule));
            assert_eq!(
                serde_json::to_string(rule).unwrap(),
                format!("{:?}", rule.as_str())
            );
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            super::Rule::ALL.len(),
            "a rule id is registered twice"
        );
        for (rule, lower, _) in super::LOWER_SEVERITY {
            assert!(rule.severity() > *lower, "{rule}: not lower");
        }
    }

    /// The schema documents every rule id (docs/audit-json-schema.md).
    #[test]
    fn every_rule_is_documented() {
        let doc = include_str!("../../../docs/audit-json-schema.md");
        for rule in super::Rule::ALL {
            assert!(
                doc.contains(rule.as_str()),
                "{rule} is not in the schema doc"
            );
        }
    }
}

/// The readers turn bytes into facts; only `rules/` decides findings. A reader that constructs a
/// [`Finding`] or reaches into the crate root (where the entry points and the policy live) fails
/// here. The readers are every file in `read/`, and `facts.rs`, the types they produce.
#[cfg(test)]
mod reader_purity {
    fn readers() -> Vec<(String, String)> {
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(format!("{src}/read")).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".rs") {
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
        let facts = format!("{src}/facts.rs");
        out.push(("facts.rs".into(), std::fs::read_to_string(facts).unwrap()));
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
            "Rule::",
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
