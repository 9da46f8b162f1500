//! Declared arch gates (`[…metadata.kiln.kernels] gates`), checked against the built bytes.
//!
//! Libraries compile some kernels only for newer GPUs (`#if __CUDA_ARCH__ >= 890` around fp8
//! code). A gate declares that, per kernel or per source file; kiln-build then proves the
//! declaration from what each target's output really holds — a gated kernel missing where its
//! gate admits it, or present where it does not, fails the build just like an undeclared hole —
//! and records the resolved gates in the manifest for the audit.

use std::collections::{BTreeMap, BTreeSet};

use kiln_manifest::Manifest;
use kiln_pins::Gate;

/// Resolves `gates` (keys: kernel names or source names) over the manifest's targets, checks
/// them against what each target holds, and records them in `manifest.gates`. Returns every
/// disagreement, one line each.
pub fn apply(
    manifest: &mut Manifest,
    gates: &BTreeMap<String, Gate>,
    kernels_by_source: &BTreeMap<String, BTreeSet<String>>,
) -> Result<(), Vec<String>> {
    let known = manifest.all_kernels();
    let mut per_kernel: BTreeMap<String, (&Gate, &str)> = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, gate) in gates {
        if let Some(kernels) = kernels_by_source.get(name) {
            for k in kernels {
                per_kernel.insert(k.clone(), (gate, name));
            }
        } else if known.contains(name.as_str()) {
            per_kernel.insert(name.clone(), (gate, name));
        } else if manifest.targets.iter().any(|t| gate.admits(t.target.arch)) {
            problems.push(format!(
                "gate {name:?} names neither a source file nor a kernel this build produced \
                 (kernels are named as the manifest lists them: extern \"C\" names or mangled)"
            ));
        }
    }
    for (kernel, (gate, declared_by)) in &per_kernel {
        let mut exists_for = Vec::new();
        for t in &manifest.targets {
            let admitted = gate.admits(t.target.arch);
            let present = t.kernels.iter().any(|k| k == kernel);
            match (admitted, present) {
                (true, true) => exists_for.push(t.target),
                (true, false) => problems.push(format!(
                    "{kernel} missing for {}, although its gate ({declared_by:?} = {gate}) says it exists there",
                    t.target
                )),
                (false, true) => problems.push(format!(
                    "{kernel} is built for {}, but its gate ({declared_by:?} = {gate}) says it does not exist there: \
                     the gate and the source's #if disagree",
                    t.target
                )),
                (false, false) => {}
            }
        }
        manifest.gates.insert(kernel.clone(), exists_for);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_manifest::TargetKernels;
    use kiln_pins::{Target, TargetKind};

    fn manifest(targets: &[(&str, &[&str])]) -> Manifest {
        let mut m = kiln_manifest::Manifest::from_json(
            r#"{"schema":1,"matrix":["8.0","8.9","9.0+PTX"],"min_driver":580,
            "toolchain":{"nvcc":"","cuda":"","clang_major":21,"libclang":"","rust_nightly":"",
            "maturin":"","cudnn":"","nccl":""},"flags":[],"sources":[],"targets":[]}"#,
        )
        .unwrap();
        for (name, kernels) in targets {
            let target = Target::parse(name).unwrap();
            m.targets.push(TargetKernels {
                target,
                kind: target.kind,
                ptx_isa: (target.kind == TargetKind::Ptx).then(|| "9.0".into()),
                kernels: kernels.iter().map(|k| k.to_string()).collect(),
            });
        }
        m
    }

    fn gate(spec: &str) -> BTreeMap<String, Gate> {
        let n: u32 = spec.replace('.', "").parse().unwrap();
        [("fp8.cu".to_string(), Gate::AtLeast(n))].into()
    }

    #[test]
    fn a_source_gate_covers_its_kernels_and_is_recorded() {
        let by_source = [("fp8.cu".to_string(), ["fp8_scale".to_string()].into())].into();
        let mut m = manifest(&[
            ("sm_80", &["add"]),
            ("sm_89", &["add", "fp8_scale"]),
            ("compute_90", &["add", "fp8_scale"]),
        ]);
        apply(&mut m, &gate("8.9"), &by_source).unwrap();
        let names: Vec<String> = m.gates["fp8_scale"].iter().map(Target::name).collect();
        assert_eq!(names, ["sm_89", "compute_90"]);
        assert!(m.gaps().is_empty());
        // The same bytes with the gate at 9.0: sm_89 holds a kernel the gate denies.
        let mut m2 = manifest(&[("sm_89", &["add", "fp8_scale"])]);
        let e = apply(&mut m2, &gate("9.0"), &by_source).unwrap_err();
        assert!(e[0].contains("says it does not exist there"), "{e:?}");
        // Gated at 8.0 while sm_80 lacks it: still a hole.
        let mut m3 = manifest(&[("sm_80", &["add"]), ("sm_89", &["add", "fp8_scale"])]);
        let e = apply(&mut m3, &gate("8.0"), &by_source).unwrap_err();
        assert!(e[0].contains("missing for sm_80"), "{e:?}");
    }

    #[test]
    fn a_gate_naming_nothing_built_is_an_error() {
        let mut m = manifest(&[("sm_89", &["add"])]);
        let gates = [("fp8_scal".to_string(), Gate::AtLeast(89))].into();
        let e = apply(&mut m, &gates, &BTreeMap::new()).unwrap_err();
        assert!(
            e[0].contains("names neither a source file nor a kernel"),
            "{e:?}"
        );
    }
}
