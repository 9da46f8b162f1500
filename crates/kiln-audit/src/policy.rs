//! What the artifact is expected to contain. Empty fields mean "no expectation": the rules
//! that need them are skipped and the report states facts only.

use std::collections::BTreeMap;

use kiln_pins::{Arch, Pins, RuntimeLib};

use crate::error::PolicyError;
use crate::finding::Rule;
use serde::Serialize;

/// What the audited artifact must hold; each rule that needs a field it lacks is skipped.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Policy {
    /// SASS targets every ELF with device code (and every kernel) must carry; exact variants.
    #[serde(serialize_with = "archs_as_text")]
    #[schemars(with = "Option<Vec<String>>")]
    pub expect_sass: Option<Vec<Arch>>,
    /// PTX targets: present exactly for these.
    #[serde(serialize_with = "archs_as_text")]
    #[schemars(with = "Option<Vec<String>>")]
    pub expect_ptx: Option<Vec<Arch>>,
    /// Oldest driver (major version) the artifact must run on.
    pub min_driver: Option<u32>,
    /// A platform tag whose glibc ceiling applies (besides the wheel's own tags).
    pub platform: Option<String>,
    /// GPU generations (major, minor) every kernel must reach (`--require-gpus`).
    #[serde(serialize_with = "gpus_as_text")]
    #[schemars(with = "Option<Vec<String>>")]
    pub require_gpus: Option<Vec<(u32, u32)>>,
    /// kiln's runtime pins: sonames -> wheel, lib dir and pinned version.
    #[serde(skip)]
    pub runtime: BTreeMap<String, RuntimeLib>,
    /// Waivers (`--allow`, the policy table's `audit.allow`): findings they match are listed
    /// as waived, with the reason, and fail nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<Allow>,
}

/// One waiver: findings of `rule` whose file matches `path` (a glob; absent: any file).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Allow {
    /// The rule it waives.
    pub rule: Rule,
    /// Glob over the finding's file (`*` crosses `/`); None: every file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Why; printed beside each waived finding.
    pub reason: String,
    /// Where it was stated: `"--allow"` or the policy file's path.
    pub from: String,
    #[serde(skip)]
    pattern: Option<glob::Pattern>,
}

impl Allow {
    /// A waiver from its parts; the error says what is wrong (an unknown rule, a bad glob, no
    /// reason).
    pub fn new(
        rule: &str,
        path: Option<&str>,
        reason: &str,
        from: &str,
    ) -> Result<Allow, PolicyError> {
        let rule_id = rule.trim();
        let rule =
            Rule::parse(rule_id).ok_or_else(|| PolicyError::UnknownRule(rule_id.to_string()))?;
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(PolicyError::NoReason(rule));
        }
        let pattern = match path {
            Some(p) => Some(glob::Pattern::new(p).map_err(|error| PolicyError::BadGlob {
                pattern: p.to_string(),
                error,
            })?),
            None => None,
        };
        Ok(Allow {
            rule,
            path: path.map(str::to_string),
            reason: reason.to_string(),
            from: from.to_string(),
            pattern,
        })
    }

    /// `RULE[:PATH_GLOB]=REASON`, as `--allow` takes it.
    pub fn parse(text: &str) -> Result<Allow, PolicyError> {
        let (spec, reason) = text
            .split_once('=')
            .ok_or_else(|| PolicyError::NotAWaiver(text.to_string()))?;
        let (rule, path) = match spec.split_once(':') {
            Some((r, p)) => (r, Some(p)),
            None => (spec, None),
        };
        Allow::new(rule, path, reason, "--allow")
    }

    /// Whether it waives `f`.
    pub fn matches(&self, f: &crate::Finding) -> bool {
        f.rule == self.rule
            && self.pattern.as_ref().is_none_or(|p| {
                p.matches_with(
                    &f.file,
                    glob::MatchOptions {
                        case_sensitive: true,
                        require_literal_separator: false,
                        require_literal_leading_dot: false,
                    },
                )
            })
    }

    /// `rule[:path]`, as the report names it.
    pub fn label(&self) -> String {
        match &self.path {
            Some(p) => format!("{}:{p}", self.rule),
            None => self.rule.to_string(),
        }
    }
}

impl Policy {
    /// kiln's own policy, from `[workspace.metadata.kiln]`.
    pub fn from_pins(pins: &Pins) -> Policy {
        Policy {
            expect_sass: Some(pins.matrix.sass().collect()),
            expect_ptx: Some(pins.matrix.ptx().collect()),
            min_driver: Some(pins.min_driver),
            platform: None,
            require_gpus: None,
            runtime: pins.runtime.clone(),
            allow: Vec::new(),
        }
    }

    /// The waivers of a policy file's `[workspace.metadata.kiln.audit] allow`, checked.
    pub fn allows_of(pins: &Pins) -> Result<Vec<Allow>, PolicyError> {
        let from = pins.manifest.display().to_string();
        pins.audit
            .allow
            .iter()
            .enumerate()
            .map(|(i, a)| {
                Allow::new(&a.rule, a.path.as_deref(), &a.reason, &from).map_err(|e| {
                    PolicyError::PolicyFile {
                        file: from.clone(),
                        index: i,
                        error: Box::new(e),
                    }
                })
            })
            .collect()
    }

    /// The policy a caller states: `pins` (kiln's own, from a workspace Cargo.toml) overridden by
    /// any of the explicit expectations. Every value is validated here; the error names the flag.
    pub fn from_flags(
        pins: Option<&Pins>,
        expect_sass: Option<&str>,
        expect_ptx: Option<&str>,
        min_driver: Option<u32>,
        platform: Option<&str>,
    ) -> Result<Policy, PolicyError> {
        let mut policy = pins.map(Policy::from_pins).unwrap_or_default();
        if let Some(p) = pins {
            policy.allow = Policy::allows_of(p)?;
        }
        let flag = |flag: &'static str| {
            move |e: PolicyError| PolicyError::Flag {
                flag,
                error: Box::new(e),
            }
        };
        if let Some(list) = expect_sass {
            policy.expect_sass = Some(parse_arch_list(list).map_err(flag("--expect-sass"))?);
        }
        if let Some(list) = expect_ptx {
            policy.expect_ptx = Some(parse_arch_list(list).map_err(flag("--expect-ptx"))?);
        }
        if let Some(d) = min_driver {
            if kiln_pins::max_ptx_isa_for_driver(d).is_none() {
                return Err(PolicyError::DriverTooOld(d));
            }
            policy.min_driver = Some(d);
        }
        if let Some(p) = platform {
            if crate::rules::platform::glibc_ceiling(p).is_none() {
                return Err(PolicyError::NotManylinux(p.to_string()));
            }
            policy.platform = Some(p.to_string());
        }
        Ok(policy)
    }

    /// PTX ISA ceiling of `min_driver` (None: no driver policy, or a driver older than the table).
    pub fn max_ptx_isa(&self) -> Option<(u32, u32)> {
        self.min_driver
            .and_then(kiln_pins::max_ptx_isa_for_driver)
            .map(|row| row.ptx_isa)
    }

    /// No expectation set: only the rules that need no policy run.
    pub fn is_empty(&self) -> bool {
        self.expect_sass.is_none()
            && self.expect_ptx.is_none()
            && self.min_driver.is_none()
            && self.platform.is_none()
            && self.require_gpus.is_none()
    }
}

/// Parses "80,86,90a,100f,120" (also "sm_90", "9.0") into archs.
pub fn parse_arch_list(text: &str) -> Result<Vec<Arch>, PolicyError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let arch = Arch::parse_any(item).ok_or_else(|| PolicyError::NotAnArch(item.to_string()))?;
        if !out.contains(&arch) {
            out.push(arch);
        }
    }
    Ok(out)
}

/// Parses "8.0,9.0,12.0" (also "80", "sm_90") into generations of kiln-pins' GPU table; a
/// variant suffix or a capability without a row is an error.
pub fn parse_gpu_list(text: &str) -> Result<Vec<(u32, u32)>, PolicyError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let arch = Arch::parse_any(item)
            .filter(|a| a.variant == kiln_pins::Variant::Plain)
            .ok_or_else(|| PolicyError::NotACapability(item.to_string()))?;
        if kiln_pins::gpu_generation(arch.major, arch.minor).is_none() {
            let known: Vec<String> = kiln_pins::GPU_GENERATIONS
                .iter()
                .map(|g| g.capability())
                .collect();
            return Err(PolicyError::UnknownGeneration(
                item.to_string(),
                known.join(", "),
            ));
        }
        if !out.contains(&(arch.major, arch.minor)) {
            out.push((arch.major, arch.minor));
        }
    }
    if out.is_empty() {
        return Err(PolicyError::NoGeneration);
    }
    Ok(out)
}

/// JSON form: ["8.0", "9.0"].
fn gpus_as_text<S: serde::Serializer>(
    gpus: &Option<Vec<(u32, u32)>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let text: Option<Vec<String>> = gpus
        .as_ref()
        .map(|v| v.iter().map(|(a, b)| format!("{a}.{b}")).collect());
    serde::Serialize::serialize(&text, s)
}

/// JSON form: ["80", "90a", "100f"] (fatbinary's spelling).
fn archs_as_text<S: serde::Serializer>(archs: &Option<Vec<Arch>>, s: S) -> Result<S::Ok, S::Error> {
    let text: Option<Vec<String>> = archs.as_ref().map(|v| v.iter().map(Arch::short).collect());
    serde::Serialize::serialize(&text, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_validated_with_the_flag_named() {
        let e = Policy::from_flags(None, Some("80,9x"), None, None, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--expect-sass: \"9x\" is not an arch (expected e.g. 80, 90a, 100f, sm_120)"
        );
        assert!(matches!(
            e,
            PolicyError::Flag {
                flag: "--expect-sass",
                ..
            }
        ));
        let e = Policy::from_flags(None, None, None, Some(100), None).unwrap_err();
        assert!(e.to_string().contains("--min-driver 100"), "{e}");
        let e = Policy::from_flags(None, None, None, None, Some("linux_x86_64")).unwrap_err();
        assert!(e.to_string().contains("--platform"), "{e}");
        let p = Policy::from_flags(None, Some("90a"), Some("120"), Some(580), None).unwrap();
        assert_eq!(p.expect_sass.unwrap()[0].short(), "90a");
        assert_eq!(p.min_driver, Some(580));
    }

    #[test]
    fn allow_is_parsed_checked_and_matched_by_glob() {
        let a = Allow::parse("reach/gap:nvidia/*/lib/*.so*=Thor is Arm-only").unwrap();
        assert_eq!(a.label(), "reach/gap:nvidia/*/lib/*.so*");
        assert_eq!(a.reason, "Thor is Arm-only");
        let f = |rule, file: &str| crate::finding::finding(rule, file, "m".into(), "x");
        assert!(a.matches(&f(Rule::ReachGap, "nvidia/nccl/lib/libnccl.so.2")));
        assert!(!a.matches(&f(Rule::ReachGap, "torch/lib/libtorch.so")));
        assert!(!a.matches(&f(Rule::ArchMissingSass, "nvidia/nccl/lib/libnccl.so.2")));
        let any = Allow::parse("tags/glibc-too-new=tested on 2.28").unwrap();
        assert!(any.matches(&f(Rule::TagsGlibcTooNew, "")));
        for bad in ["reach/gap", "reach/gapp=x", "reach/gap= ", "reach/gap:[=x"] {
            assert!(Allow::parse(bad).is_err(), "{bad}");
        }
    }
}
