//! reach/*: which GPU generations the device code can run on (the `reach` view, per kernel).
//! Policy-free: no forward path, gaps inside a binary's own range. Under `--require-gpus`:
//! every listed generation reached by every kernel, PTX counting only within `--min-driver`.

use crate::facts::{Artifact, Binary};
use crate::finding::{finding, Finding, Rule};
use crate::gates;
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

/// Every reach/* rule: per binary (no forward path, kiln's matrix holes), then over the reach
/// view (gaps; required GPUs).
pub fn check(artifact: &Artifact, policy: &Policy, findings: &mut Vec<Finding>) {
    for b in &artifact.binaries {
        no_forward_path(b, findings);
        matrix_holes(b, findings);
    }
    let view = reach::of(&artifact.binaries, policy.min_driver);
    // A cell's holes name their gates; the view keeps file names, the manifests are here.
    let manifest_of = |file: &str| {
        artifact
            .binaries
            .iter()
            .find(|b| b.path == file)
            .and_then(gates::manifest)
    };
    gaps(&view, policy, &manifest_of, findings);
    if let Some(required) = &policy.require_gpus {
        required_gpus(&view, required, policy, &manifest_of, findings);
    }
}

/// A binary's manifest by its file name.
type ManifestOf<'a> = dyn Fn(&str) -> Option<&'a kiln_manifest::Manifest> + 'a;

/// reach/no-forward-path: kernels with no PTX and only `a`/`f` SASS.
fn no_forward_path(b: &Binary, findings: &mut Vec<Finding>) {
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

/// reach/gap: a generation inside a binary's own range that it does not reach.
fn gaps(
    view: &reach::Reach,
    policy: &Policy,
    manifest_of: &ManifestOf,
    findings: &mut Vec<Finding>,
) {
    for b in &view.binaries {
        let (lo, hi) = b.range;
        for c in b.cells.iter().filter(|c| c.path == Path::None) {
            if c.capability > lo && c.capability < hi {
                findings.push(finding(
                    Rule::ReachGap,
                    &b.file,
                    format!(
                        "GPU {} lies inside this binary's range ({}–{}) but {}",
                        c.generation,
                        b.lowest,
                        b.highest,
                        why_not(b, c, policy, manifest_of(&b.file))
                    ),
                    format!(
                        "add SASS for {} (or a lower minor of its major), or PTX at or below it",
                        c.generation
                    ),
                ));
            }
        }
    }
}

/// reach/required-gpu: a `--require-gpus` generation that no binary can run beside (its CPU),
/// that no binary has device code for, or that a binary does not reach.
fn required_gpus(
    view: &reach::Reach,
    required: &[(u32, u32)],
    policy: &Policy,
    manifest_of: &ManifestOf,
    findings: &mut Vec<Finding>,
) {
    for o in &view.omitted {
        if required
            .iter()
            .any(|(a, b)| format!("{a}.{b}") == o.generation)
        {
            findings.push(finding(
                Rule::ReachRequiredGpu,
                "",
                format!("required GPU {}: no binary here can run beside it: {}", o.generation, o.why),
                "build the wheel for aarch64 too (a separate wheel with the aarch64 platform tag), or drop the generation from --require-gpus",
            ));
        }
    }
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
                    "required GPU {}: {}",
                    c.generation,
                    why_not(b, c, policy, manifest_of(&b.file))
                ),
                format!("add SASS for {} (or a lower minor of its major), or PTX at or below it that the oldest driver can JIT", c.generation),
            ));
        }
    }
}

/// Why a library cell is `none`: nothing runs there, or kernels meant for it have no way there
/// (a gated one named with its gate: the gate says it is meant there).
fn why_not(
    b: &reach::BinaryReach,
    c: &reach::ReachCell,
    policy: &Policy,
    manifest: Option<&kiln_manifest::Manifest>,
) -> String {
    if c.reached_count == 0 {
        return format!(
            "no kernel has a way there (no SASS of its major at or below it, no PTX that JITs to it{})",
            driver_note(policy)
        );
    }
    let whose = if b.strict {
        "kiln-built: every kernel must reach every GPU, a gated one every GPU its declared targets run on"
    } else {
        "not specialised for some GPUs: no `a`/`f`-only targets, no arch in their names"
    };
    format!(
        "{} kernel(s) the library has for other GPUs have no way there{} ({whose}): {}",
        c.holes_count,
        driver_note(policy),
        listing(&named(manifest, &c.holes), c.holes_count)
    )
}

/// Kernel names, each gated one with its gate's note.
fn named(manifest: Option<&kiln_manifest::Manifest>, kernels: &[String]) -> Vec<String> {
    kernels.iter().map(|k| gates::named(manifest, k)).collect()
}

/// kiln's own rule for a binary it built: every kernel its build manifest (or its bytes) name,
/// on every target of the manifest's matrix — a gated kernel on the targets its gate declares
/// (`Manifest::expects`, the rule kiln-build's own gap check uses). A declared target without
/// the kernel is still a hole, reported with the gate.
fn matrix_holes(b: &Binary, findings: &mut Vec<Finding>) {
    let Some(m) = gates::manifest(b) else {
        return;
    };
    let Ok(matrix) = kiln_pins::ArchMatrix::new(m.matrix.clone()) else {
        return; // manifest/unreadable says so
    };
    let mut have: std::collections::BTreeMap<
        crate::facts::Target,
        std::collections::BTreeSet<&str>,
    > = Default::default();
    for e in b.device.iter().flat_map(|d| &d.entries) {
        if e.error.is_some() || e.label_mismatch.is_some() {
            continue;
        }
        if let Some(t) = e.target.device() {
            have.entry(t)
                .or_default()
                .extend(e.kernels.iter().map(String::as_str));
        }
    }
    if !b.device.as_ref().is_some_and(|d| d.kernels_listed) {
        return;
    }
    let mut all: std::collections::BTreeSet<&str> = m.all_kernels();
    all.extend(have.values().flatten().copied());
    let wanted = matrix
        .sass()
        .map(crate::facts::Target::sass)
        .chain(matrix.ptx().map(crate::facts::Target::ptx));
    for t in wanted {
        let empty = Default::default();
        let got = have.get(&t).unwrap_or(&empty);
        let missing: Vec<&str> = all
            .iter()
            .filter(|k| !got.contains(*k) && m.expects(k, &t))
            .copied()
            .collect();
        if missing.is_empty() {
            continue;
        }
        let shown: Vec<String> = missing
            .iter()
            .take(reach::KERNELS_LISTED)
            .map(|k| gates::named(Some(m), k))
            .collect();
        let fix = if missing.iter().any(|k| gates::of(m, k).is_some()) {
            "compile every kernel for every target of the matrix, a gated kernel for every target its gate declares (kiln-build checks a gate against the built bytes; rebuild with `cargo xtask wheel`)"
        } else {
            "compile every kernel for every target of the matrix (kiln-build refuses a partial build; rebuild with `cargo xtask wheel`)"
        };
        findings.push(finding(
            Rule::ReachMatrixHole,
            &b.path,
            format!(
                "kiln-built (build manifest, matrix {}): {} kernel(s) have no {t} code: {}",
                m.matrix_text(),
                missing.len(),
                listing(&shown, missing.len())
            ),
            fix,
        ));
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
                kernels_listed: true,
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
    fn kernels_with_different_targets_intersect_per_kernel_not_per_library() {
        // `late` has only sm_90: per kernel, 8.6 lies inside the binary's range and `late` cannot
        // get there; per library, `late` is gated from 9.0 up (as NCCL's sm_90+ fp8 kernels).
        let a = artifact(vec![
            entry("sm_80", &["early"]),
            entry("sm_90", &["early", "late"]),
        ]);
        let r = reach::of(&a.binaries, None);
        let c = cell(&r, "8.6");
        assert_eq!(
            (c.kernel_path, c.unreached.clone()),
            (Path::None, vec!["late".to_string()])
        );
        assert_eq!((c.path, c.holes_count), (Path::Compatible, 0));
        let got = rules(&a, &Policy::default());
        assert!(got.is_empty(), "{got:?}");
        // Missing a target above its lowest one is a hole: `late` without 10.0.
        let a = artifact(vec![
            entry("sm_80", &["early"]),
            entry("sm_90", &["early", "late"]),
            entry("sm_100", &["early"]),
        ]);
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "10.0").holes, ["late"]);
    }

    /// `artifact` with the binary's ELF machine set (62 x86_64, 183 aarch64).
    fn on_cpu(mut a: Artifact, machine: u16) -> Artifact {
        let elf = crate::read::elf::ElfFacts {
            machine,
            ..Default::default()
        };
        a.binaries[0].elf = Some(elf);
        a
    }

    #[test]
    fn arm_only_generations_have_no_row_for_x86_64_binaries() {
        // kiln's matrix on x86_64: Thor (11.0) is Arm-only, so no row and no reach/gap for it.
        let a = on_cpu(kiln_matrix(), 62);
        let r = reach::of(&a.binaries, None);
        for g in ["8.7", "11.0", "12.1"] {
            assert!(
                !r.generations.iter().any(|x| x == g),
                "{g}: {:?}",
                r.generations
            );
            assert!(
                r.omitted
                    .iter()
                    .any(|o| o.generation == g && o.why.contains("x86_64")),
                "{g}: {:?}",
                r.omitted
            );
        }
        assert_eq!(r.binaries[0].cells.len(), r.generations.len());
        assert_eq!(r.whole.len(), r.generations.len());
        let got = rules(&a, &Policy::default());
        assert!(got.is_empty(), "{got:?}");
        // Asked for Thor on x86_64: an error that says why.
        let p = Policy {
            require_gpus: Some(vec![(11, 0)]),
            ..Policy::default()
        };
        let got = rules(&a, &p);
        assert!(
            got.iter().any(|(r, m)| *r == Rule::ReachRequiredGpu
                && m.contains("11.0")
                && m.contains("Arm")),
            "{got:?}"
        );
        // The same bytes on aarch64: every row, and the Thor gap.
        let a = on_cpu(kiln_matrix(), 183);
        let r = reach::of(&a.binaries, None);
        assert_eq!(r.generations.len(), kiln_pins::GPU_GENERATIONS.len());
        assert!(r.omitted.is_empty());
        let got = rules(&a, &Policy::default());
        assert!(
            got.iter()
                .any(|(r, m)| *r == Rule::ReachGap && m.contains("GPU 11.0")),
            "{got:?}"
        );
    }

    #[test]
    fn arch_tokens_in_names() {
        use kiln_pins::Variant::*;
        assert_eq!(reach::arch_tokens("sm90_xmma_gemm_f16"), [(90, Plain)]);
        assert_eq!(
            reach::arch_tokens("cutlass3x_sm100_tensorop_gemm"),
            [(100, Plain)]
        );
        assert_eq!(reach::arch_tokens("_Z13sm89_xmma_fooPf"), [(89, Plain)]);
        assert_eq!(reach::arch_tokens("k_sm_90a_x"), [(90, ArchSpecific)]);
        assert_eq!(reach::arch_tokens("nccl_sm100f"), [(100, Family)]);
        // Not arch tokens: glued to letters, unknown numbers, more digits.
        // Architecture words (cuDNN): a turing kernel with no 8.0 code is dispatch there.
        let a = artifact(vec![
            entry(
                "sm_75",
                &["gemm", "_5x_cudnn_turing_fp16_s1688cudnn_fp16_v1"],
            ),
            entry("sm_80", &["gemm", "cudnn_adapter_x"]),
            entry("sm_90", &["gemm", "cudnn_adapter_x"]),
        ]);
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "8.0").holes_count, 0);
        assert_eq!(cell(&r, "8.0").dispatched_count, 1);
        assert_eq!(r.binaries[0].specialised, 1, "`adapter` is no `ada`");
        for n in ["rsm80_x", "sm80x", "sm12_x", "sm1000_x", "asm90", "sm_9"] {
            assert!(reach::arch_tokens(n).is_empty(), "{n}");
        }
    }

    /// The shape of a per-arch-dispatching library (a sparse-matmul library: `sm89_xmma_*` only
    /// for sm_89, `sm90_xmma_*` only for sm_90a, `cutlass3x_sm100_*` only for sm_100; NCCL:
    /// multicast kernels only sm_100f), with general kernels for every target.
    fn dispatching() -> Artifact {
        let general = &["gemm", "reduce"];
        artifact(vec![
            entry("sm_80", general),
            entry("sm_89", &["gemm", "reduce", "sm89_xmma_gemm"]),
            entry("sm_90", general),
            entry("sm_90a", &["hopper_wgmma"]),
            entry("sm_100", &["gemm", "reduce", "cutlass3x_sm100_gemm"]),
            entry("sm_100f", &["multicast"]),
            entry("sm_120", general),
            entry("compute_120", general),
        ])
    }

    #[test]
    fn dispatch_is_not_a_hole_per_library_but_is_per_kernel() {
        let a = dispatching();
        let r = reach::of(&a.binaries, None);
        assert_eq!(r.binaries[0].specialised, 4);
        for (g, lib) in [
            ("7.5", Path::None),
            ("8.0", Path::Exact),
            ("8.6", Path::Compatible),
            ("8.9", Path::Exact),
            ("9.0", Path::Exact),
            ("10.0", Path::Exact),
            // The sm_100f multicast kernels get there as family code.
            ("10.3", Path::Family),
            ("11.0", Path::None),
            ("12.0", Path::Exact),
            ("12.1", Path::Compatible),
        ] {
            let c = cell(&r, g);
            assert_eq!(c.path, lib, "{g}: {c:?}");
            assert_eq!(c.holes_count, 0, "{g}: {c:?}");
        }
        // Per kernel: the specialised kernels are missing nearly everywhere.
        assert_eq!(cell(&r, "9.0").kernel_path, Path::None);
        assert_eq!(
            cell(&r, "9.0").unreached_count,
            3,
            "sm89, sm100 and multicast"
        );
        assert_eq!(cell(&r, "9.0").dispatched_count, 3);
        // No reach/gap: the only GPU with no code inside the range is 11.0.
        let got: Vec<String> = rules(&a, &Policy::default())
            .into_iter()
            .filter(|(r, _)| *r == Rule::ReachGap)
            .map(|(_, m)| m)
            .collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].contains("GPU 11.0") && got[0].contains("no kernel has a way there"),
            "{got:?}"
        );
    }

    #[test]
    fn a_general_kernel_missing_a_target_is_a_hole() {
        let mut a = dispatching();
        // `reduce` compiled out of sm_90: a real hole at 9.0 (sm_90a `a` code is another kernel).
        if let Some(dev) = a.binaries[0].device.as_mut() {
            for e in &mut dev.entries {
                if e.target.to_string() == "sm_90" {
                    e.kernels.retain(|k| k != "reduce");
                }
            }
        }
        let r = reach::of(&a.binaries, None);
        let c = cell(&r, "9.0");
        assert_eq!(
            (c.path, c.holes.clone(), c.reached_count),
            (Path::None, vec!["reduce".to_string()], 2)
        );
        let got = rules(&a, &Policy::default());
        assert!(
            got.iter().any(|(r, m)| *r == Rule::ReachGap
                && m.contains("GPU 9.0")
                && m.contains("reduce")),
            "{got:?}"
        );
        // A specialised kernel missing on a GPU its name says, where it runs on another it
        // names, is a hole there too: an `ampere` kernel built only for sm_86 misses 8.0.
        let a = artifact(vec![
            entry("sm_80", &["gemm"]),
            entry("sm_86", &["gemm", "_5x_cudnn_ampere_gemm"]),
            entry("sm_90", &["gemm"]),
        ]);
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "8.0").holes, ["_5x_cudnn_ampere_gemm"]);
        assert_eq!(cell(&r, "8.9").path, Path::Compatible);
        assert_eq!(cell(&r, "9.0").holes_count, 0);
    }

    /// cuDNN 9.28 builds `sm80_xmma_*` kernels only for sm_90a, sm_100f or sm_120f: the name
    /// is their style, not their GPU, so where their targets run decides what they are for.
    #[test]
    fn a_name_no_target_of_the_kernel_runs_on_is_its_style() {
        let a = artifact(vec![
            entry("sm_80", &["gemm", "sm80_xmma_a"]),
            entry("sm_90", &["gemm"]),
            entry("sm_100f", &["gemm", "sm80_xmma_b"]),
        ]);
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "8.0").holes_count, 0, "{:?}", cell(&r, "8.0"));
        assert_eq!(cell(&r, "8.0").dispatched_count, 1);
        assert_eq!(cell(&r, "10.0").dispatched_count, 1);
        assert_eq!(r.binaries[0].specialised, 2);
    }

    /// cuDNN 9.28.1.4's engines_precompiled: besides kernels named for an architecture, some
    /// with no arch in their name exist only as sm_75 SASS (`dgrad_1d<9>`): Turing's.
    #[test]
    fn a_single_target_kernel_is_specialised_only_in_a_dispatching_library() {
        let dispatching = artifact(vec![
            entry("sm_75", &["gemm", "dgrad_1d", "_5x_cudnn_turing_fp16_x"]),
            entry("sm_80", &["gemm", "sm80_xmma_gemm"]),
            entry("sm_90", &["gemm"]),
        ]);
        let r = reach::of(&dispatching.binaries, None);
        for g in ["8.0", "8.6", "9.0"] {
            let c = cell(&r, g);
            assert_eq!(
                (c.holes_count, c.path != Path::None),
                (0, true),
                "{g}: {c:?}"
            );
        }
        assert_eq!(cell(&r, "9.0").dispatched_count, 3);
        assert_eq!(r.binaries[0].specialised, 3);
        // Per kernel it is still missing above 7.5.
        assert_eq!(cell(&r, "8.0").kernel_path, Path::None);

        // No sign of dispatch: the same kernel compiled out of sm_80 and sm_90 is a hole.
        let plain = artifact(vec![
            entry("sm_75", &["gemm", "dgrad_1d"]),
            entry("sm_80", &["gemm"]),
            entry("sm_90", &["gemm"]),
        ]);
        let r = reach::of(&plain.binaries, None);
        assert_eq!(cell(&r, "8.0").holes, ["dgrad_1d"]);
        assert_eq!(r.binaries[0].specialised, 0);
        // Nor does one target plus its PTX make a kernel specialised.
        let ptx = artifact(vec![
            entry("sm_75", &["gemm", "dgrad_1d", "sm75_x"]),
            entry("compute_75", &["dgrad_1d"]),
            entry("sm_90", &["gemm"]),
        ]);
        let r = reach::of(&ptx.binaries, None);
        assert_eq!(cell(&r, "9.0").holes_count, 0);
        assert_eq!(cell(&r, "9.0").path, Path::Ptx);
    }

    /// `a` as kiln-built on x86_64: a build manifest of `matrix` whose targets hold what the
    /// bytes hold (honest, as kiln-build writes it), with `gates` (kernel -> target names).
    fn kiln_built(mut a: Artifact, matrix: &[&str], gates: &[(&str, &[&str])]) -> Artifact {
        let b = &mut a.binaries[0];
        let targets: Vec<serde_json::Value> = b
            .device
            .iter()
            .flat_map(|d| &d.entries)
            .map(|e| {
                let t = e.target.device().unwrap();
                let ptx = t.kind == crate::facts::TargetKind::Ptx;
                serde_json::json!({
                    "target": t.name(),
                    "kind": if ptx { "ptx" } else { "sass" },
                    "kernels": e.kernels,
                })
            })
            .collect();
        let gates: std::collections::BTreeMap<&str, &[&str]> = gates.iter().copied().collect();
        let json = serde_json::json!({
            "schema": 1,
            "matrix": matrix,
            "min_driver": 580,
            "toolchain": {"nvcc": "n", "cuda": "c", "clang_major": 21, "libclang": "l",
                          "rust_nightly": "r", "maturin": "m", "cudnn": "d", "nccl": "x"},
            "flags": [],
            "sources": [],
            "targets": targets,
            "gates": gates,
        });
        let m = kiln_manifest::Manifest::from_json(&json.to_string()).unwrap();
        b.elf = Some(crate::read::elf::ElfFacts {
            machine: 62,
            build_manifest: Some(m),
            ..Default::default()
        });
        a
    }

    /// fp8 kernels compiled only under `#if __CUDA_ARCH__ >= 890`: matrix 8.0 8.9 9.0+PTX,
    /// `fp8` in every target but sm_80.
    fn fp8_library() -> Artifact {
        artifact(vec![
            entry("sm_80", &["gemm"]),
            entry("sm_89", &["gemm", "fp8"]),
            entry("sm_90", &["gemm", "fp8"]),
            entry("compute_90", &["gemm", "fp8"]),
        ])
    }

    const FP8_MATRIX: &[&str] = &["8.0", "8.9", "9.0+PTX"];
    const FP8_GATE: &[&str] = &["sm_89", "sm_90", "compute_90"];

    /// reach/* and arch/* findings: both judge a kernel's absence per target.
    fn reach_and_arch(a: &Artifact, policy: &Policy) -> Vec<(Rule, String)> {
        let mut f = Vec::new();
        crate::rules::arch::check(a, policy, &mut f);
        let mut got: Vec<(Rule, String)> = f.into_iter().map(|f| (f.rule, f.message)).collect();
        got.extend(rules(a, policy));
        got
    }

    /// The pins' expectations for [`FP8_MATRIX`]: arch/kernel-missing-sass judges per kernel.
    fn fp8_policy() -> Policy {
        let archs = |list: &str| Some(crate::parse_arch_list(list).unwrap());
        Policy {
            expect_sass: archs("80,89,90"),
            expect_ptx: archs("90"),
            ..Policy::default()
        }
    }

    #[test]
    fn a_declared_gate_keeps_a_kiln_built_kernel_off_the_targets_it_leaves_out() {
        let a = kiln_built(fp8_library(), FP8_MATRIX, &[("fp8", FP8_GATE)]);
        let got = reach_and_arch(&a, &fp8_policy());
        assert!(got.is_empty(), "{got:?}");
        let r = reach::of(&a.binaries, None);
        let b = &r.binaries[0];
        assert!(b.strict);
        assert_eq!(b.specialised, 1, "the gated kernel, nothing guessed");
        for g in ["8.0", "8.6"] {
            let c = cell(&r, g);
            assert_eq!(
                (c.holes_count, c.dispatched_count, c.path == Path::None),
                (0, 1, false),
                "{g}: {c:?}"
            );
            // Per kernel it is still missing there.
            assert_eq!(c.unreached, ["fp8"], "{g}");
        }
        // compute_90 carries it to every newer GPU: meant there, and it runs there.
        assert_eq!(cell(&r, "10.0").path, Path::Ptx);
        assert_eq!(cell(&r, "10.0").holes_count, 0);
        // The coverage row says why its sm_80 cell is empty.
        let cov = crate::kernel_matrix::of(&a.binaries[0]).unwrap();
        let row = cov.rows.iter().find(|r| r.kernels == ["fp8"]).unwrap();
        assert_eq!(
            row.gate.as_deref(),
            Some("gated: exists for sm_89, sm_90, compute_90 (declared)")
        );
        assert!(cov
            .rows
            .iter()
            .all(|r| r.kernels == ["fp8"] || r.gate.is_none()));
    }

    #[test]
    fn an_undeclared_absence_in_a_kiln_built_binary_is_still_a_hole() {
        // The same bytes and manifest with the gate removed: the strict rule as before.
        let a = kiln_built(fp8_library(), FP8_MATRIX, &[]);
        let got = reach_and_arch(&a, &fp8_policy());
        let holes: Vec<&String> = got
            .iter()
            .filter(|(r, _)| *r == Rule::ReachMatrixHole)
            .map(|(_, m)| m)
            .collect();
        assert_eq!(holes.len(), 1, "{got:?}");
        assert!(
            holes[0].contains("no sm_80 code: fp8") && !holes[0].contains("gated"),
            "{holes:?}"
        );
        assert!(
            got.iter().any(|(r, m)| *r == Rule::ArchKernelMissingSass
                && m.contains("sm_80")
                && m.contains("fp8")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|(r, m)| *r == Rule::ReachGap && m.contains("GPU 8.6") && m.contains("fp8")),
            "{got:?}"
        );
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "8.0").holes, ["fp8"]);
        assert_eq!(r.binaries[0].specialised, 0);
        // A gate for another kernel changes nothing for this one.
        let a = kiln_built(fp8_library(), FP8_MATRIX, &[("gemm", &["sm_80", "sm_89"])]);
        let got = reach_and_arch(&a, &fp8_policy());
        assert!(
            got.iter()
                .any(|(r, m)| *r == Rule::ReachMatrixHole && m.contains("no sm_80 code: fp8")),
            "{got:?}"
        );
    }

    #[test]
    fn a_gate_declaring_a_target_the_bytes_lack_is_a_hole_named_with_its_gate() {
        // The gate says fp8 exists for sm_80 too; sm_80 has no fp8 code.
        let gate: &[&str] = &["sm_80", "sm_89", "sm_90", "compute_90"];
        let a = kiln_built(fp8_library(), FP8_MATRIX, &[("fp8", gate)]);
        let got = reach_and_arch(&a, &fp8_policy());
        let note = "fp8 (gated: exists for sm_80, sm_89, sm_90, compute_90 (declared))";
        for rule in [
            Rule::ReachMatrixHole,
            Rule::ArchKernelMissingSass,
            Rule::ReachGap,
        ] {
            assert!(
                got.iter().any(|(r, m)| *r == rule && m.contains(note)),
                "{rule:?}: {got:?}"
            );
        }
        let r = reach::of(&a.binaries, None);
        assert_eq!(cell(&r, "8.0").holes, ["fp8"]);
        // The gate says sm_90, the bytes (and the honest manifest) have fp8 there only as
        // compute_90 PTX: the matrix hole names the gate, though the JIT still carries fp8
        // onto 9.0 GPUs.
        let mut bytes = fp8_library();
        if let Some(dev) = bytes.binaries[0].device.as_mut() {
            for e in dev
                .entries
                .iter_mut()
                .filter(|e| e.target.to_string() == "sm_90")
            {
                e.kernels.retain(|k| k != "fp8");
            }
        }
        let a = kiln_built(bytes, FP8_MATRIX, &[("fp8", FP8_GATE)]);
        let got = rules(&a, &Policy::default());
        assert!(
            got.iter().any(|(r, m)| *r == Rule::ReachMatrixHole
                && m.contains("no sm_90 code: fp8 (gated: exists for sm_89, sm_90, compute_90")),
            "{got:?}"
        );
        assert_eq!(cell(&reach::of(&a.binaries, None), "9.0").path, Path::Ptx);
    }

    #[test]
    fn without_kernel_lists_reach_is_per_binary_and_says_so() {
        let mut a = dispatching();
        if let Some(dev) = a.binaries[0].device.as_mut() {
            dev.kernels_listed = false;
            for e in &mut dev.entries {
                if e.kind == EntryKind::Cubin {
                    e.kernels.clear();
                }
            }
        }
        let r = reach::of(&a.binaries, None);
        assert!(!r.kernels_listed);
        // PTX names alone do not make the cubin targets kernel-less: 9.0 runs its own SASS.
        assert_eq!(cell(&r, "9.0").path, Path::Exact);
        assert_eq!(r.binaries[0].kernels, 1);
    }
}
