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

/// One nixpkgs attribute (see the header of facts.toml for the columns). Every column that is
/// present is asserted (the double gives it, the networked run compares it with the real
/// nixpkgs), so every present column must be named by a [`Read`] that says where it was read;
/// a column nobody looked up is absent, never guessed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Row {
    pub version: Option<String>,
    pub value: Option<String>,
    /// "makeSetupHook": a setup-hook package, which has a `name` and no `version`.
    pub made_by: Option<String>,
    pub name: Option<String>,
    pub outputs: Option<Vec<String>>,
    pub unfree: Option<bool>,
    pub platforms: Option<Vec<String>>,
    pub propagated: Option<Vec<String>>,
    pub setup_hook: Option<Vec<String>>,
    pub released: Option<String>,
    pub used_in: Vec<String>,
    #[serde(default)]
    pub read: Vec<Read>,
    /// Why nothing (or not everything) about this attribute is asserted.
    pub unchecked: Option<String>,
}

/// Where a column was read: a nixpkgs file (path, the commit the reading tool named, the git
/// blob id of the exact text read) or a nixpkgs pull request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Read {
    pub path: Option<String>,
    pub commit: Option<String>,
    pub blob: Option<String>,
    /// When the text could not be hashed: why, and how the version read is named instead.
    pub blob_not_computed: Option<String>,
    pub pr: Option<u64>,
    pub gives: Vec<String>,
    pub says: String,
}

/// The columns a [`Read`] can give.
pub const COLUMNS: &[&str] = &[
    "version",
    "value",
    "made-by",
    "name",
    "outputs",
    "unfree",
    "platforms",
    "propagated",
    "setup-hook",
    "released",
];

fn hex40(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

impl Row {
    /// The columns this row asserts.
    pub fn present(&self) -> Vec<&'static str> {
        let has = [
            self.version.is_some(),
            self.value.is_some(),
            self.made_by.is_some(),
            self.name.is_some(),
            self.outputs.is_some(),
            self.unfree.is_some(),
            self.platforms.is_some(),
            self.propagated.is_some(),
            self.setup_hook.is_some(),
            self.released.is_some(),
        ];
        COLUMNS
            .iter()
            .zip(has)
            .filter(|(_, h)| *h)
            .map(|(c, _)| *c)
            .collect()
    }

    /// Where `column` was read.
    pub fn cited(&self, column: &str) -> Option<&Read> {
        self.read
            .iter()
            .find(|r| r.gives.iter().any(|g| g == column))
    }

    /// Every reason this row is not a cited fact; empty when it is.
    pub fn faults(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.used_in.is_empty() {
            out.push("needs `used-in` (a fact kiln does not use is not kept)".into());
        }
        if self.version.is_some() && self.value.is_some() {
            out.push("has both `version` and `value`".into());
        }
        match self.made_by.as_deref() {
            Some("makeSetupHook") if self.version.is_some() => {
                out.push("is made by makeSetupHook, which gives no `version`".into());
            }
            None | Some("makeSetupHook") => {}
            Some(other) => out.push(format!(
                "made-by = {other:?}: only \"makeSetupHook\" is known"
            )),
        }
        let present = self.present();
        for c in &present {
            if self.cited(c).is_none() {
                out.push(format!(
                    "asserts `{c}` without a [[read]] that gives it (remove the column, or cite the nixpkgs file it was read from)"
                ));
            }
        }
        if present.is_empty() && self.unchecked.is_none() {
            out.push("asserts nothing: say why in `unchecked`".into());
        }
        for (i, r) in self.read.iter().enumerate() {
            for g in &r.gives {
                if !COLUMNS.contains(&g.as_str()) {
                    out.push(format!("read {i} gives unknown column `{g}`"));
                } else if !present.contains(&g.as_str()) {
                    out.push(format!("read {i} gives `{g}`, which the row does not have"));
                }
            }
            if r.says.is_empty() {
                out.push(format!("read {i} needs `says` (what the source says)"));
            }
            match (&r.path, r.pr) {
                (Some(path), None) => {
                    if !path.starts_with("pkgs/") {
                        out.push(format!(
                            "read {i}: {path} is not a nixpkgs file path (pkgs/...)"
                        ));
                    }
                    // The blob id names the content; the commit where the tool named one.
                    if r.blob.is_none() && !r.commit.as_deref().is_some_and(hex40) {
                        out.push(format!("read {i} ({path}) without a blob id needs the 40-hex `commit` the reading tool named"));
                    }
                    if r.commit.as_deref().is_some_and(|c| !hex40(c)) {
                        out.push(format!("read {i} ({path}): `commit` is not 40 hex digits"));
                    }
                    match (&r.blob, &r.blob_not_computed) {
                        (Some(b), None) if hex40(b) => {}
                        (None, Some(why)) if !why.is_empty() => {}
                        _ => out.push(format!(
                            "read {i} ({path}) needs the 40-hex git `blob` id of the text read (git hash-object), or `blob-not-computed` saying why"
                        )),
                    }
                }
                (None, Some(_)) => {
                    if r.commit.is_some() || r.blob.is_some() {
                        out.push(format!("read {i}: a PR citation has no commit or blob"));
                    }
                }
                _ => out.push(format!("read {i} needs exactly one of `path`, `pr`")),
            }
        }
        out
    }
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
        let faults: Vec<String> = facts
            .attr
            .iter()
            .flat_map(|(name, row)| {
                row.faults()
                    .into_iter()
                    .map(move |f| format!("[attr.\"{name}\"] {f}"))
            })
            .collect();
        if !faults.is_empty() {
            anyhow::bail!("{FACTS_FILE}:\n{}", faults.join("\n"));
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
                if let (Some(d), Some(r)) = (&row.released, row.cited("released")) {
                    return Some((d, r.says.as_str()));
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
        // Only the columns the row asserts: a column nobody looked up is absent and compared
        // with nothing (the evaluated JSON still shows it, for whoever looks it up next).
        if let Some(value) = &row.value {
            differs(
                "value",
                value.clone(),
                e["value"].as_str().unwrap_or("?").to_string(),
            );
            continue;
        }
        let got_version = match &e["version"] {
            Value::Null => "no version".to_string(),
            v => v.as_str().unwrap_or("?").to_string(),
        };
        if let Some(v) = &row.version {
            differs("version", v.clone(), got_version);
        } else if row.made_by.as_deref() == Some("makeSetupHook") {
            // A setup hook has no version; one that gains one is another thing than we read.
            differs("version", "no version".into(), got_version);
        }
        if let Some(n) = &row.name {
            differs(
                "name",
                n.clone(),
                e["name"].as_str().unwrap_or("?").to_string(),
            );
        }
        if let Some(o) = &row.outputs {
            differs(
                "outputs",
                format!("{o:?}"),
                format!("{:?}", strings(&e["outputs"])),
            );
        }
        if let Some(u) = row.unfree {
            differs(
                "unfree",
                format!("{u:?}"),
                format!("{:?}", e["unfree"].as_bool())
                    .replace("Some(", "")
                    .replace(')', ""),
            );
        }
        if let Some(p) = &row.platforms {
            differs(
                "platforms",
                format!("{p:?}"),
                format!("{:?}", strings(&e["platforms"])),
            );
        }
        if let Some(p) = &row.propagated {
            differs(
                "propagated",
                format!("{p:?}"),
                format!("{:?}", strings(&e["propagated"])),
            );
        }
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
    let asserted: usize = facts.attr.values().map(|r| r.present().len()).sum();
    let unchecked: Vec<&str> = facts
        .attr
        .iter()
        .filter(|(_, r)| r.present().is_empty())
        .map(|(n, _)| n.as_str())
        .collect();
    let unhashed = facts
        .attr
        .values()
        .flat_map(|r| &r.read)
        .filter(|r| r.path.is_some() && r.blob.is_none())
        .count();
    Ok(format!(
        "nixpkgs {} ({}): {} attributes, {asserted} cited columns ({unhashed} reads without a blob id); \
         not asserted (nobody checked them): {}; pins agree, none newer than the lock",
        &facts.nixpkgs.rev[..8],
        facts.nixpkgs.date,
        facts.attr.len(),
        if unchecked.is_empty() { "none".to_string() } else { unchecked.join(", ") },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> std::path::PathBuf {
        crate::toolchain::repo_root()
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
            assert_eq!(row.faults(), Vec::<String>::new(), "{name}");
        }
    }

    fn row<'a>(facts: &'a mut Facts, name: &str) -> &'a mut Row {
        facts.attr.get_mut(name).unwrap()
    }

    /// The finding: nvcc, cccl and libnvvm have one output in nixpkgs, with the file
    /// that says so.
    #[test]
    fn single_output_cuda_parts_say_out_with_their_citation() {
        let (facts, _, _) = load();
        for (attr, file) in [
            ("cuda_nvcc", "cuda_nvcc.nix"),
            ("cuda_cccl", "cuda_cccl.nix"),
            ("libnvvm", "libnvvm.nix"),
        ] {
            let r = &facts.attr[&format!("cudaPackages_13_0.{attr}")];
            assert_eq!(
                r.outputs.as_deref(),
                Some(&["out".to_string()][..]),
                "{attr}"
            );
            let read = r.cited("outputs").expect(attr);
            assert_eq!(
                read.path.as_deref(),
                Some(format!("pkgs/development/cuda-modules/packages/{file}").as_str())
            );
            assert!(read.blob.as_deref().is_some_and(hex40), "{attr}");
            assert!(
                read.says.contains("outputs = [ \"out\" ]"),
                "{attr}: {}",
                read.says
            );
        }
    }

    /// Deliberate breaks of the citation rule: a value without a read, a read without a blob,
    /// a setup hook with a version.
    #[test]
    fn an_uncited_column_is_refused() {
        let (mut facts, _, _) = load();
        row(&mut facts, "python3").version = Some("3.13.6".into());
        let f = row(&mut facts, "python3").faults().join("\n");
        assert!(f.contains("asserts `version` without a [[read]]"), "{f}");

        let (mut facts, _, _) = load();
        let r = row(&mut facts, "cudaPackages_13_0.cuda_cccl");
        r.read.iter_mut().for_each(|r| r.blob = None);
        let f = r.faults().join("\n");
        assert!(f.contains("needs the 40-hex git `blob` id"), "{f}");

        let (mut facts, _, _) = load();
        let r = row(&mut facts, "autoAddDriverRunpath");
        r.version = Some("0".into());
        let f = r.faults().join("\n");
        assert!(
            f.contains("made by makeSetupHook, which gives no `version`"),
            "{f}"
        );
    }

    /// Only cited columns are compared; a setup hook must evaluate without a version.
    #[test]
    fn comparison_skips_unchecked_columns_and_wants_no_version_for_a_hook() {
        let (facts, _, _) = load();
        let mut evaluated = serde_json::Map::new();
        for (name, r) in &facts.attr {
            let mut e = serde_json::json!({
                "version": r.version.clone().or(r.value.clone().map(|_| String::new())),
                "value": r.value,
                "name": r.name,
                "outputs": r.outputs.clone().unwrap_or_else(|| vec!["whatever".into()]),
                "unfree": r.unfree.unwrap_or(false),
                "platforms": r.platforms.clone().unwrap_or_default(),
                "propagated": r.propagated.clone().unwrap_or_default(),
            });
            if r.version.is_none() && r.made_by.is_none() && r.value.is_none() {
                e["version"] = "1.2.3".into(); // unknown to the facts: not compared
            }
            evaluated.insert(name.clone(), e);
        }
        let mut evaluated = Value::Object(evaluated);
        assert_eq!(compare_evaluated(&facts, &evaluated), Vec::<String>::new());
        evaluated["autoAddDriverRunpath"]["version"] = "0".into();
        evaluated["cudaPackages_13_0.cuda_nvcc"]["outputs"] =
            serde_json::json!(["out", "bin", "dev", "include", "static"]);
        let d = compare_evaluated(&facts, &evaluated).join("\n");
        assert!(
            d.contains("autoAddDriverRunpath.version: checks/nix/doubles/nixpkgs/facts.toml says no version")
                && d.contains("cuda_nvcc.outputs")
                && d.contains("[\"out\"], nixpkgs 104240a7 evaluates to [\"out\", \"bin\""),
            "{d}"
        );
    }
}
