//! The facts about the locked nixpkgs (checks/nix/doubles/nixpkgs/facts.toml) against
//! flake.lock and the pins in Cargo.toml — offline invariants that need no Nix evaluation:
//!
//! - the facts describe the nixpkgs revision flake.lock locks (and its date);
//! - every pin the locked nixpkgs also provides is that release: nvcc, the CUDA release, the
//!   exact cuDNN and NCCL runtime pins (PyPI and Nix give the same release), maturin, clang's
//!   major; the cuDNN/NCCL releases also lie inside the pins' declared ABI range;
//! - no pinned component is newer than the locked nixpkgs (release dates from the facts) or,
//!   for the nightly, than the locked rust-overlay.
//!
//! Each failure names the attribute, both versions and the file to change.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use kiln_pins::Pins;
use serde::Deserialize;
use serde_json::Value;

/// Where the facts live, relative to the flake (inside the double, which reads them).
pub const FACTS_FILE: &str = "checks/nix/doubles/nixpkgs/facts.toml";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Facts {
    pub nixpkgs: Revision,
    pub attr: BTreeMap<String, Row>,
    #[serde(default)]
    pub release_dates: BTreeMap<String, Dated>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Revision {
    pub rev: String,
    pub date: String,
}

/// One nixpkgs attribute (see the header of facts.toml for the columns).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Row {
    pub version: Option<String>,
    pub value: Option<String>,
    #[serde(default)]
    pub outputs: Vec<String>,
    pub unfree: Option<bool>,
    #[serde(default)]
    pub platforms: Vec<String>,
    #[serde(default)]
    pub propagated: Vec<String>,
    #[serde(default)]
    pub setup_hook: Vec<String>,
    pub used_in: Vec<String>,
    pub source: String,
    pub released: Option<String>,
    pub checked: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dated {
    pub date: String,
    pub source: String,
}

impl Facts {
    pub fn parse(text: &str) -> Result<Facts> {
        let facts: Facts =
            toml::from_str(text).with_context(|| format!("{FACTS_FILE} is not valid"))?;
        for (name, row) in &facts.attr {
            if row.used_in.is_empty() || row.source.is_empty() || row.checked.is_empty() {
                anyhow::bail!(
                    "{FACTS_FILE}: [attr.\"{name}\"] needs `used-in`, `source` and `checked` (a fact without a use or a source is not kept)"
                );
            }
            if row.version.is_none() == row.value.is_none() {
                anyhow::bail!(
                    "{FACTS_FILE}: [attr.\"{name}\"] needs exactly one of `version`, `value`"
                );
            }
        }
        Ok(facts)
    }

    fn version(&self, attr: &str) -> Result<&str> {
        self.attr
            .get(attr)
            .and_then(|r| r.version.as_deref().or(r.value.as_deref()))
            .with_context(|| format!("{FACTS_FILE} has no [attr.\"{attr}\"] (the flake uses it)"))
    }

    /// The release date of `component version`: the row whose version it is, else
    /// [release-dates].
    fn released(&self, component: &str, attr: Option<&str>, version: &str) -> Option<(&str, &str)> {
        if let Some(row) = attr.and_then(|a| self.attr.get(a)) {
            if row.version.as_deref().map(release) == Some(version) {
                if let Some(d) = &row.released {
                    return Some((d, &row.source));
                }
            }
        }
        self.release_dates
            .get(&format!("{component} {version}"))
            .map(|d| (d.date.as_str(), d.source.as_str()))
    }
}

/// "2.30.7-1" (nixpkgs' NCCL) -> "2.30.7" (the release, as PyPI names it).
fn release(v: &str) -> &str {
    v.split('-').next().unwrap_or(v)
}

/// `lastModified` (Unix seconds) as a UTC date, YYYY-MM-DD (Howard Hinnant's civil_from_days).
pub fn utc_date(secs: i64) -> String {
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The locked revision and date of one flake input.
pub struct Locked {
    pub rev: String,
    pub date: String,
}

pub fn locked(lock: &Value, input: &str) -> Result<Locked> {
    let root = lock["root"].as_str().unwrap_or("root");
    let node = lock["nodes"][root]["inputs"][input]
        .as_str()
        .with_context(|| format!("flake.lock has no input `{input}`"))?;
    let l = &lock["nodes"][node]["locked"];
    Ok(Locked {
        rev: l["rev"]
            .as_str()
            .with_context(|| format!("flake.lock: `{input}` has no locked rev"))?
            .to_string(),
        date: utc_date(
            l["lastModified"]
                .as_i64()
                .with_context(|| format!("flake.lock: `{input}` has no lastModified"))?,
        ),
    })
}

/// Every invariant; all problems at once, each naming what to change.
pub fn problems(facts: &Facts, pins: &Pins, lock: &Value) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let nixpkgs = locked(lock, "nixpkgs")?;
    if nixpkgs.rev != facts.nixpkgs.rev {
        out.push(format!(
            "flake.lock locks nixpkgs {}, but {FACTS_FILE} describes nixpkgs {}: the facts must be \
             regenerated for the new lock (checks/nix/facts-eval.nix with `nix eval` at that revision, see \
             checks/nix/README.md), or flake.lock reverted",
            nixpkgs.rev, facts.nixpkgs.rev
        ));
    } else if nixpkgs.date != facts.nixpkgs.date {
        out.push(format!(
            "{FACTS_FILE}: [nixpkgs] date = \"{}\", but flake.lock's lastModified for {} is {}",
            facts.nixpkgs.date, nixpkgs.rev, nixpkgs.date
        ));
    }

    let t = &pins.toolchain;
    let set = format!("cudaPackages_{}", t.cuda_major_minor().replace('.', "_"));
    let mut same = |attr: String, got: &str, pin_name: &str, pin: &str, how: &str| {
        if got != pin {
            out.push(format!(
                "{FACTS_FILE}: {attr} is {got} at the locked nixpkgs, but Cargo.toml pins {pin_name} = \"{pin}\"; \
                 {how}"
            ));
        }
    };

    let nvcc = facts.version(&format!("{set}.cuda_nvcc"))?;
    same(
        format!("{set}.cuda_nvcc"),
        nvcc,
        "[workspace.metadata.kiln.toolchain] nvcc",
        &t.nvcc,
        "change nvcc in Cargo.toml to the release the lock has (kiln-build accepts only the pinned one), or lock a nixpkgs that has it",
    );
    let mm = facts.version(&format!("{set}.cudaMajorMinorVersion"))?;
    same(
        format!("{set}.cudaMajorMinorVersion"),
        mm,
        "[workspace.metadata.kiln.toolchain] cuda (major.minor)",
        t.cuda_major_minor(),
        "change cuda in Cargo.toml",
    );
    let maturin = facts.version("maturin")?;
    same(
        "maturin".into(),
        maturin,
        "[workspace.metadata.kiln.toolchain] maturin",
        &t.maturin,
        "both routes build the wheel with one maturin release: change maturin in Cargo.toml to the lock's (PyPI has it too)",
    );
    let clang = facts
        .version("llvmPackages_21.libclang")
        .map(|v| v.split('.').next().unwrap_or(v));
    if let Ok(major) = clang {
        same(
            format!("llvmPackages_{}.libclang (major)", t.clang_major),
            major,
            "[workspace.metadata.kiln.toolchain] clang-major",
            &t.clang_major.to_string(),
            "change clang-major in Cargo.toml",
        );
    }
    for lib in ["cudnn", "nccl"] {
        let Some(pin) = pins.runtime.get(lib) else {
            out.push(format!(
                "Cargo.toml has no [workspace.metadata.kiln.runtime.{lib}], which the flake's dev shell provides"
            ));
            continue;
        };
        let attr = format!("{set}.{lib}");
        let got = facts.version(&attr)?;
        let got_release = release(got);
        if got_release != pin.version {
            out.push(format!(
                "{FACTS_FILE}: {attr} is {got} at the locked nixpkgs, but Cargo.toml pins \
                 [workspace.metadata.kiln.runtime.{lib}] version = \"{}\" ({}): PyPI and Nix must give the same \
                 release; change version in Cargo.toml [workspace.metadata.kiln.runtime.{lib}] to \"{got_release}\" \
                 (if {} has it), or lock a nixpkgs that has {}",
                pin.version, pin.wheel, pin.wheel, pin.version
            ));
        }
        let abi = pin.abi();
        let mut parts = got_release
            .split('.')
            .map(|p| p.parse::<u64>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if major != abi.major || minor < abi.min_minor {
            out.push(format!(
                "{FACTS_FILE}: {attr} is {got}, outside the ABI range Cargo.toml declares \
                 ([workspace.metadata.kiln.runtime.{lib}] requires = \"{}\"): the flake would refuse it",
                pin.requires
            ));
        }
    }

    // No pinned component newer than the lock.
    let lock_date = &facts.nixpkgs.date;
    let mut dated = vec![
        ("cuda", None, t.cuda.clone()),
        ("maturin", Some("maturin".to_string()), t.maturin.clone()),
    ];
    for lib in ["cudnn", "nccl"] {
        if let Some(pin) = pins.runtime.get(lib) {
            dated.push((lib, Some(format!("{set}.{lib}")), pin.version.clone()));
        }
    }
    for (component, attr, version) in &dated {
        match facts.released(component, attr.as_deref(), version) {
            Some((date, source)) if date > lock_date.as_str() => out.push(format!(
                "Cargo.toml pins {component} {version}, released {date} ({source}), after the locked nixpkgs \
                 {} ({lock_date}): the lock cannot provide it; pin a release the lock has",
                &facts.nixpkgs.rev[..8.min(facts.nixpkgs.rev.len())]
            )),
            Some(_) => {}
            None => out.push(format!(
                "no release date is known for the pinned {component} {version}: add it to {FACTS_FILE} \
                 [release-dates] with its source (a NVIDIA manifest's release_date or the nixpkgs PR)"
            )),
        }
    }
    let overlay = locked(lock, "rust-overlay")?;
    if t.rust_nightly > overlay.date {
        out.push(format!(
            "Cargo.toml pins rust-nightly = \"{}\", after the locked rust-overlay {} ({}): it has no such \
             nightly yet; pin a date up to {}",
            t.rust_nightly,
            &overlay.rev[..8.min(overlay.rev.len())],
            overlay.date,
            overlay.date
        ));
    }
    Ok(out)
}

/// Differences between the committed facts and the columns checks/nix/facts-eval.nix evaluated
/// (from the double on every run; from the real nixpkgs on a networked machine).
pub fn compare_evaluated(facts: &Facts, evaluated: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (name, row) in &facts.attr {
        let Some(e) = evaluated.get(name) else {
            out.push(format!("{name}: not evaluated"));
            continue;
        };
        let mut differs = |column: &str, committed: String, got: String| {
            if committed != got {
                out.push(format!(
                    "{name}.{column}: {FACTS_FILE} says {committed}, nixpkgs {} evaluates to {got}",
                    &facts.nixpkgs.rev[..8.min(facts.nixpkgs.rev.len())]
                ));
            }
        };
        if let Some(value) = &row.value {
            differs(
                "value",
                value.clone(),
                e["value"].as_str().unwrap_or("?").to_string(),
            );
            continue;
        }
        differs(
            "version",
            row.version.clone().unwrap_or_default(),
            e["version"].as_str().unwrap_or("?").to_string(),
        );
        differs(
            "outputs",
            format!("{:?}", row.outputs),
            format!("{:?}", strings(&e["outputs"])),
        );
        differs(
            "unfree",
            format!("{:?}", row.unfree),
            format!("{:?}", e["unfree"].as_bool()),
        );
        differs(
            "platforms",
            format!("{:?}", row.platforms),
            format!("{:?}", strings(&e["platforms"])),
        );
        differs(
            "propagated",
            format!("{:?}", row.propagated),
            format!("{:?}", strings(&e["propagated"])),
        );
    }
    out
}

pub fn load(root: &Path) -> Result<Facts> {
    Facts::parse(
        &std::fs::read_to_string(root.join(FACTS_FILE))
            .with_context(|| format!("reading {FACTS_FILE}"))?,
    )
}

/// The step `cargo xtask nix-check` runs.
pub fn check(root: &Path) -> Result<String> {
    let facts = load(root)?;
    let pins = Pins::load(&root.join("Cargo.toml")).context("reading the pins")?;
    let lock: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("flake.lock")).context("reading flake.lock")?,
    )
    .context("flake.lock is not JSON")?;
    let found = problems(&facts, &pins, &lock)?;
    if !found.is_empty() {
        anyhow::bail!("{}", found.join("\n"));
    }
    let checked = facts.attr.values().filter(|r| r.checked != "no").count();
    let hooks: Vec<String> = facts
        .attr
        .iter()
        .filter(|(_, r)| !r.setup_hook.is_empty())
        .map(|(n, r)| format!("{n} sets {}", r.setup_hook.join(", ")))
        .collect();
    Ok(format!(
        "nixpkgs {} ({}): {} attributes ({} checked against nixpkgs sources), pins agree, none newer than the lock; setup hooks: {}",
        &facts.nixpkgs.rev[..8],
        facts.nixpkgs.date,
        facts.attr.len(),
        checked,
        hooks.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> std::path::PathBuf {
        super::super::workspace_root()
    }

    fn load() -> (Facts, Pins, Value) {
        let root = ws();
        (
            Facts::parse(&std::fs::read_to_string(root.join(FACTS_FILE)).unwrap()).unwrap(),
            Pins::load(&root.join("Cargo.toml")).unwrap(),
            serde_json::from_str(&std::fs::read_to_string(root.join("flake.lock")).unwrap())
                .unwrap(),
        )
    }

    #[test]
    fn the_committed_facts_pins_and_lock_agree() {
        let (facts, pins, lock) = load();
        assert_eq!(
            problems(&facts, &pins, &lock).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn dates_from_last_modified() {
        assert_eq!(utc_date(1_785_747_939), "2026-08-03");
        assert_eq!(utc_date(1_787_367_552), "2026-08-22");
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
    }

    /// The deliberate break: the facts say another cuDNN than the pins.
    #[test]
    fn a_cudnn_fact_other_than_the_pin_names_attribute_versions_and_file() {
        let (mut facts, pins, lock) = load();
        facts
            .attr
            .get_mut("cudaPackages_13_0.cudnn")
            .unwrap()
            .version = Some("9.23.0.39".into());
        let p = problems(&facts, &pins, &lock).unwrap().join("\n");
        for needle in [
            "cudaPackages_13_0.cudnn is 9.23.0.39",
            "version = \"9.22.0.52\"",
            "[workspace.metadata.kiln.runtime.cudnn]",
            FACTS_FILE,
        ] {
            assert!(p.contains(needle), "{needle:?} missing from:\n{p}");
        }
        // Outside the declared ABI range: named as such too.
        facts
            .attr
            .get_mut("cudaPackages_13_0.cudnn")
            .unwrap()
            .version = Some("10.0.0.1".into());
        let p = problems(&facts, &pins, &lock).unwrap().join("\n");
        assert!(
            p.contains("outside the ABI range") && p.contains(">=9.19,<10"),
            "{p}"
        );
    }

    #[test]
    fn a_lock_the_facts_do_not_describe_is_refused() {
        let (facts, pins, mut lock) = load();
        lock["nodes"]["nixpkgs"]["locked"]["rev"] =
            "0123456789abcdef0123456789abcdef01234567".into();
        let p = problems(&facts, &pins, &lock).unwrap().join("\n");
        assert!(
            p.contains("flake.lock locks nixpkgs 0123456789abcdef0123456789abcdef01234567")
                && p.contains("104240a772428cc2e20d8fd86c9ddbb886bbaff2")
                && p.contains("regenerated"),
            "{p}"
        );
    }

    #[test]
    fn a_pin_released_after_the_lock_is_refused() {
        let (facts, mut pins, lock) = load();
        pins.runtime.get_mut("cudnn").unwrap().version = "9.27.0.42".into();
        let p = problems(&facts, &pins, &lock).unwrap().join("\n");
        assert!(
            p.contains("cudnn 9.27.0.42, released 2026-09-29")
                && p.contains("after the locked nixpkgs"),
            "{p}"
        );
        let (facts, mut pins, lock) = load();
        pins.toolchain.rust_nightly = "2026-09-01".into();
        let p = problems(&facts, &pins, &lock).unwrap().join("\n");
        assert!(
            p.contains("after the locked rust-overlay") && p.contains("2026-08-22"),
            "{p}"
        );
        let (facts, mut pins, lock) = load();
        pins.toolchain.maturin = "1.16.0".into();
        let p = problems(&facts, &pins, &lock).unwrap().join("\n");
        assert!(
            p.contains("maturin is 1.14.1 at the locked nixpkgs")
                && p.contains("no release date is known for the pinned maturin 1.16.0"),
            "{p}"
        );
    }

    #[test]
    fn every_row_is_cited() {
        let (facts, _, _) = load();
        for (name, row) in &facts.attr {
            assert!(
                !row.source.is_empty() && !row.used_in.is_empty() && !row.checked.is_empty(),
                "{name}"
            );
            if row.version.is_some() {
                assert!(
                    !row.outputs.is_empty() && row.unfree.is_some() && !row.platforms.is_empty(),
                    "{name}"
                );
            }
        }
    }
}
