//! reach/*: which GPU generations the device code can run on (the `reach` view, per kernel).
//! Policy-free: no forward path, gaps inside a binary's own range. Under `--require-gpus`:
//! every listed generation reached by every kernel, PTX counting only within `--min-driver`.

use crate::facts::Artifact;
use crate::finding::{finding, Finding, Rule};
use crate::policy::Policy;
use crate::reach::{self, Path};

/// "a, b, c" and " …" when `count` exceeds what is listed.
fn listing(names: &[String], count: usize) -> String {
    let more = if count > names.len() {
        format!(" … ({} more)", count - names.len())
    } else {
        String::new()
    };
    format!("{}{more}", names.join(", "))
}

pub fn check(artifact: &Artifact, policy: &Policy, findings: &mut Vec<Finding>) {
    for b in &artifact.binaries {
        let (names, count) = reach::without_forward_path(b);
        if count > 0 {
            findings.push(finding(
                Rule::ReachNoForwardPath,
                &b.path,
                format!(
                    "{count} kernel(s) have no PTX and only arch-specific (`a`) or family (`f`) SASS: no GPU beyond that arch or family can run them: {}",
                    listing(&names, count)
                ),
                "also build plain SASS or PTX (e.g. -gencode arch=compute_120,code=compute_120) for a forward path",
            ));
        }
    }
    let view = reach::of(&artifact.binaries, policy.min_driver);
    for b in &view.binaries {
        let (lo, hi) = b.range;
        for c in b.cells.iter().filter(|c| c.path == Path::None) {
            if c.capability > lo && c.capability < hi {
                findings.push(finding(
                    Rule::ReachGap,
                    &b.file,
                    format!(
                        "GPU {} lies inside this binary's range ({}–{}) but {} kernel(s) have no way there (no SASS of its major at or below it, no PTX that JITs to it{}): {}",
                        c.generation,
                        b.lowest,
                        b.highest,
                        c.unreached_count,
                        driver_note(policy),
                        listing(&c.unreached, c.unreached_count)
                    ),
                    format!("add SASS for {} (or a lower minor of its major), or PTX at or below it", c.generation),
                ));
            }
        }
    }
    let Some(required) = &policy.require_gpus else {
        return;
    };
    if view.binaries.is_empty() && !required.is_empty() {
        findings.push(finding(
            Rule::ReachRequiredGpu,
            "",
            format!(
                "--require-gpus lists {} generation(s), but no binary has device code",
                required.len()
            ),
            "check that the kernels are linked into the binaries",
        ));
        return;
    }
    for b in &view.binaries {
        for c in &b.cells {
            if !required.contains(&c.capability) || c.path != Path::None {
                continue;
            }
            findings.push(finding(
                Rule::ReachRequiredGpu,
                &b.file,
                format!(
                    "required GPU {} is not reached by {} kernel(s){}: {}",
                    c.generation,
                    c.unreached_count,
                    driver_note(policy),
                    listing(&c.unreached, c.unreached_count)
                ),
                format!("add SASS for {} (or a lower minor of its major), or PTX at or below it that the oldest driver can JIT", c.generation),
            ));
        }
    }
}

fn driver_note(policy: &Policy) -> String {
    match policy.min_driver {
        Some(d) => format!(" within driver {d}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{
        Binary, Compression, DeviceCode, EntryFacts, EntryKind, EntryTarget, InputKind, Target,
    };

    /// One entry of `target` ("sm_90a", "compute_120") holding `kernels`, PTX ISA 9.0.
    fn entry(target: &str, kernels: &[&str]) -> EntryFacts {
        let t = Target::parse(target).unwrap();
        let ptx = t.kind == crate::facts::TargetKind::Ptx;
        EntryFacts {
            container: 0,
            offset: 0,
            kind: if ptx {
                EntryKind::Ptx
            } else {
                EntryKind::Cubin
            },
            target: EntryTarget::Device(t),
            sm: t.arch.number(),
            variant: t.arch.variant,
            compression: Compression::None,
            stored_size: 0,
            size: 0,
            kernels: kernels.iter().map(|k| k.to_string()).collect(),
            kernels_demangled: Vec::new(),
            ptx_isa: ptx.then(|| "9.0".into()),
            ptx_isa_num: ptx.then_some((9, 0)),
            label_mismatch: None,
            error: None,
            section: None,
        }
    }

    fn artifact(entries: Vec<EntryFacts>) -> Artifact {
        let mut a = Artifact::empty(InputKind::Elf);
        a.binaries.push(Binary {
            path: "lib.so".into(),
            size: 0,
            elf: None,
            device: Some(DeviceCode {
                containers: 1,
                entries,
            }),
            relocatable: None,
            elf_error: None,
            device_error: None,
        });
        a
    }

    fn rules(a: &Artifact, policy: &Policy) -> Vec<(Rule, String)> {
        let mut f = Vec::new();
        check(a, policy, &mut f);
        f.into_iter().map(|f| (f.rule, f.message)).collect()
    }

    fn cell<'a>(r: &'a reach::Reach, g: &str) -> &'a reach::ReachCell {
        let i = r.generations.iter().position(|x| x == g).unwrap();
        &r.binaries[0].cells[i]
    }

    /// A fixture with the shape of kiln's matrix (the live one is Cargo.toml's): 8.0 8.6 8.9
    /// 9.0 10.0 12.0 SASS + compute_120 PTX.
    fn kiln_matrix() -> Artifact {
        let k = &["k"];
        artifact(vec![
            entry("sm_80", k),
            entry("sm_86", k),
            entry("sm_89", k),
            entry("sm_90", k),
            entry("sm_100", k),
            entry("sm_120", k),
            entry("compute_120", k),
        ])
    }

    #[test]
    fn paths_follow_the_compatibility_rules() {
        let a = kiln_matrix();
        let r = reach::of(&a.binaries, None);
        let path = |g| cell(&r, g).path;
        assert_eq!(path("7.5"), Path::None, "no SASS or PTX at or below 7.5");
        assert_eq!(path("8.0"), Path::Exact);
        assert_eq!(path("8.7"), Path::Compatible, "sm_86 runs on 8.7");
        assert_eq!(path("10.3"), Path::Compatible, "sm_100 runs on 10.3");
        assert_eq!(
            path("11.0"),
            Path::None,
            "compute_120 does not JIT down to 11.0"
        );
        assert_eq!(path("12.1"), Path::Compatible);
        assert_eq!(cell(&r, "12.1").min_driver, None, "SASS needs no JIT");
        // Only PTX: the JIT, with the oldest driver of ISA 9.0.
        let a = artifact(vec![entry("compute_80", &["k"])]);
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "12.1").path, Path::Ptx);
        assert_eq!(cell(&r, "12.1").min_driver, Some(580));
        assert_eq!(cell(&r, "7.5").path, Path::None);
        // `a` SASS: exactly its arch; `f` SASS: its family only.
        let a = artifact(vec![entry("sm_90a", &["k"]), entry("sm_100f", &["k"])]);
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "9.0").path, Path::Exact);
        assert_eq!(cell(&r, "10.3").path, Path::Family);
        assert_eq!(
            cell(&r, "11.0").path,
            Path::None,
            "10.x family stops at 11.0"
        );
        // `a`/`f` PTX: within its arch/family.
        let a = artifact(vec![
            entry("compute_100f", &["k"]),
            entry("compute_90a", &["k"]),
        ]);
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "10.3").path, Path::Ptx);
        assert_eq!(cell(&r, "12.0").path, Path::None);
        assert_eq!(cell(&r, "9.0").path, Path::Ptx);
    }

    #[test]
    fn a_binary_reaches_only_what_every_kernel_reaches() {
        let a = artifact(vec![
            entry("sm_80", &["both", "only80"]),
            entry("sm_90", &["both"]),
        ]);
        let r = reach::of(&a.binaries, None);
        let c = cell(&r, "9.0");
        // sm_80 SASS never runs on another major: `only80` has no way to 9.0.
        assert_eq!(
            (c.path, c.unreached.clone(), c.unreached_count),
            (Path::None, vec!["only80".to_string()], 1)
        );
        assert_eq!(cell(&r, "8.9").path, Path::Compatible);
        assert_eq!(
            r.whole[5].path,
            Path::None,
            "the input as a whole is no better"
        );
    }

    #[test]
    fn kiln_matrix_has_one_gap_thor_and_a_forward_path() {
        let got = rules(&kiln_matrix(), &Policy::default());
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, Rule::ReachGap);
        assert!(got[0].1.contains("GPU 11.0"), "{}", got[0].1);
    }

    #[test]
    fn no_forward_path_fires_only_without_ptx_and_plain_sass() {
        let a = artifact(vec![entry("sm_90a", &["k"]), entry("sm_100f", &["k"])]);
        let got = rules(&a, &Policy::default());
        assert!(
            got.iter().any(|(r, _)| *r == Rule::ReachNoForwardPath),
            "{got:?}"
        );
        for extra in ["sm_90", "compute_90a", "compute_100f"] {
            let mut entries = vec![entry("sm_90a", &["k"]), entry("sm_100f", &["k"])];
            entries.push(entry(extra, &["k"]));
            let got = rules(&artifact(entries), &Policy::default());
            let fires = got.iter().any(|(r, _)| *r == Rule::ReachNoForwardPath);
            // Plain SASS or any PTX gives a path beyond the `a`/`f` targets.
            assert!(!fires, "{extra}: {got:?}");
        }
    }

    #[test]
    fn require_gpus_and_min_driver() {
        let a = artifact(vec![entry("sm_80", &["k"]), entry("compute_90", &["k"])]);
        let mut p = Policy {
            require_gpus: Some(vec![(8, 6), (12, 0)]),
            ..Policy::default()
        };
        assert!(rules(&a, &p).is_empty(), "{:?}", rules(&a, &p));
        p.require_gpus = Some(vec![(7, 5), (12, 0)]);
        let got = rules(&a, &p);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].1.contains("required GPU 7.5"), "{}", got[0].1);
        // ISA 9.0 needs driver 580: under --min-driver 570 the PTX is no path to 12.0.
        p.require_gpus = Some(vec![(12, 0)]);
        p.min_driver = Some(570);
        let got = rules(&a, &p);
        assert!(
            got[0].1.contains("required GPU 12.0") && got[0].1.contains("within driver 570"),
            "{got:?}"
        );
        p.min_driver = Some(580);
        assert!(rules(&a, &p).is_empty());
    }

    #[test]
    fn listed_names_are_bounded() {
        let long = "k".repeat(100_000);
        let names: Vec<String> = (0..50).map(|i| format!("{long}{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let a = artifact(vec![entry("sm_80", &refs), entry("sm_90", &refs[..1])]);
        let r = reach::of(&a.binaries, None);
        let c = cell(&r, "9.0");
        assert_eq!(
            (c.unreached.len(), c.unreached_count),
            (reach::KERNELS_LISTED, 49)
        );
        assert!(c
            .unreached
            .iter()
            .all(|n| n.chars().count() == reach::NAME_CHARS + 1));
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.len() < 300_000, "{} bytes", text.len());
    }

    #[test]
    fn kernels_with_different_targets_intersect() {
        // `late` has only sm_90: 8.6 lies inside the binary's range, and `late` cannot get there.
        let a = artifact(vec![
            entry("sm_80", &["early"]),
            entry("sm_90", &["early", "late"]),
        ]);
        let r = reach::of(&a.binaries, None);
        let c = cell(&r, "8.6");
        assert_eq!(
            (c.path, c.unreached.clone()),
            (Path::None, vec!["late".to_string()])
        );
        let got = rules(&a, &Policy::default());
        assert!(
            got.iter()
                .any(|(r, m)| *r == Rule::ReachGap && m.contains("GPU 8.6") && m.contains("late")),
            "{got:?}"
        );
    }
}
