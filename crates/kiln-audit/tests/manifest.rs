//! The embedded build manifest is a claim the audit re-derives from the bytes: this test binary
//! links kiln-kernels, so it carries both `.nv_fatbin` and `.kiln_manifest`. Editing the
//! manifest (with objcopy, as a tamperer would) to claim more than the fatbin holds is caught.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_audit::{NoProgress, Options, Policy};
use kiln_test_support::repo_root as repo;

fn rules(path: &Path, policy: &Policy) -> Vec<(String, String)> {
    let report = kiln_audit::audit(path, policy, &Options::default(), &NoProgress).unwrap();
    report
        .findings
        .iter()
        .filter(|f| f.rule.as_str().starts_with("manifest/"))
        .map(|f| (f.rule.to_string(), f.message.clone()))
        .collect()
}

/// A copy of this test binary whose `.kiln_manifest` is `json`.
fn with_manifest(dir: &Path, json: &str) -> PathBuf {
    let (src, out) = (dir.join("manifest.json"), dir.join("tampered"));
    std::fs::write(&src, json).unwrap();
    let status = Command::new("objcopy")
        .arg("--remove-section=.kiln_manifest")
        .arg(format!("--add-section=.kiln_manifest={}", src.display()))
        .arg(std::env::current_exe().unwrap())
        .arg(&out)
        .status()
        .expect("objcopy (binutils) is needed to tamper with the manifest");
    assert!(status.success());
    out
}

#[test]
fn the_manifest_agrees_with_the_bytes() {
    assert!(!kiln_kernels::fatbin().is_empty() && !kiln_kernels::MANIFEST_JSON.is_empty());
    let pins = kiln_pins::Pins::discover(&repo()).unwrap();
    let exe = std::env::current_exe().unwrap();
    let report = kiln_audit::audit(
        &exe,
        &Policy::from_pins(&pins),
        &Options::default(),
        &NoProgress,
    )
    .unwrap();
    let manifest = report.binaries[0]
        .elf
        .as_ref()
        .and_then(|e| e.build_manifest.as_ref());
    assert_eq!(
        manifest,
        Some(&kiln_kernels::manifest()),
        "the audit reads the embedded manifest"
    );
    assert_eq!(
        rules(&exe, &Policy::from_pins(&pins)),
        vec![],
        "no manifest findings on a genuine build"
    );
}

#[test]
fn a_manifest_claiming_an_extra_target_is_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = kiln_kernels::manifest();
    let mut extra = m.targets[0].clone();
    extra.target = kiln_pins::Target::parse("sm_75").unwrap();
    m.targets.push(extra);
    let tampered = with_manifest(dir.path(), &m.to_json());
    let found = rules(&tampered, &Policy::default());
    assert!(
        found
            .iter()
            .any(|(r, msg)| r == "manifest/target-missing" && msg.contains("sm_75")),
        "{found:?}"
    );
}

#[test]
fn a_manifest_claiming_a_kernel_the_cubin_lacks_is_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = kiln_kernels::manifest();
    m.targets[1].kernels.push("flash_attention_f16".into());
    let tampered = with_manifest(dir.path(), &m.to_json());
    let found = rules(&tampered, &Policy::default());
    assert!(
        found
            .iter()
            .any(|(r, msg)| r == "manifest/kernel-missing" && msg.contains("flash_attention_f16")),
        "{found:?}"
    );
}

#[test]
fn a_dropped_target_and_a_garbled_manifest_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = kiln_kernels::manifest();
    let dropped = m.targets.remove(0).target;
    let tampered = with_manifest(dir.path(), &m.to_json());
    let found = rules(&tampered, &Policy::default());
    assert!(
        found
            .iter()
            .any(|(r, msg)| r == "manifest/unclaimed-target" && msg.contains(&dropped.name())),
        "{found:?}"
    );

    let garbled = with_manifest(dir.path(), "{\"schema\": 1, \"targets\": ");
    let found = rules(&garbled, &Policy::default());
    assert!(
        found.iter().any(|(r, _)| r == "manifest/unreadable"),
        "{found:?}"
    );
}
