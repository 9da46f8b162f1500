//! The audit's view against the real consumers of the same bytes:
//! - every generated wheel: Python's `zipfile` and `pip install --no-deps --no-index --target`
//!   (checks/hostile/pip_view.py). Either the audit fails the wheel, or pip installs exactly the
//!   members (names and sha256) the audit read, and zipfile lists exactly them.
//! - generated ELFs, alone and with their dependency beside them: `ctypes.CDLL` (dlopen through
//!   ld.so). Either the audit fails the library, or the loader loads it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kiln_audit::{NoProgress, Options, Policy, Severity};
use kiln_hostile::cases;
use kiln_hostile::elfs::{self, MISSING_SONAME};
use serde_json::Value;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checks/hostile/pip_view.py")
}

fn python(mode: &str, paths: &[PathBuf], out: &Path) -> BTreeMap<String, Value> {
    let status = std::process::Command::new("python3")
        .arg(script())
        .arg(mode)
        .arg(out)
        .args(paths)
        .status()
        .expect("python3 runs");
    assert!(status.success(), "pip_view.py {mode} failed");
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// Exit-code view of one input: Err (refused) or the report; fails = refused or an error.
fn audit(path: &Path, policy: &Policy) -> (bool, Option<kiln_audit::Artifact>, String) {
    match kiln_audit::read::path(path, &Options::default(), &NoProgress) {
        Err(e) => (true, None, format!("refused: {e}")),
        Ok(a) => {
            let report = kiln_audit::evaluate(path, a.clone(), policy);
            let errors: Vec<&str> = report
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Error)
                .map(|f| f.rule.as_str())
                .collect();
            (!errors.is_empty(), Some(a), format!("{errors:?}"))
        }
    }
}

fn outside_dist_info(name: &str) -> bool {
    !name.split('/').next().unwrap_or("").ends_with(".dist-info")
}

#[test]
#[ignore = "needs gcc, python3 with pip and a kiln build: `cargo xtask test --only hostile` runs it (cargo test -p kiln-hostile -- --include-ignored)"]
fn pip_installs_what_the_audit_read_or_the_audit_fails() {
    let root = tempfile::tempdir().unwrap();
    let elf_dir = root.path().join("elfs");
    std::fs::create_dir_all(&elf_dir).unwrap();
    let e = elfs::build(&elf_dir).unwrap();
    let all = cases::all(&e, kiln_kernels::fatbin());
    let mut paths = Vec::new();
    let mut names = Vec::new();
    for (i, c) in all.iter().enumerate() {
        // The overlap bomb inflates 32 GiB through a zipfile without CPython 3.12's overlap
        // check (Debian 12's 3.11): its refusal is checked in hostile.rs.
        // The raw-cubin library is 268 MB: its bounds are checked in hostile.rs.
        if c.name == "bounds/overlap-bomb" || c.name == "bounds/raw-cubins-in-rodata" {
            continue;
        }
        if let Some(bytes) = c.wheel() {
            let dir = root.path().join(format!("w{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            let p = dir.join(cases::WHEEL_NAME);
            std::fs::write(&p, bytes).unwrap();
            paths.push(p);
            names.push(c.name.clone());
        }
    }
    let views = python("wheels", &paths, &root.path().join("wheels.json"));
    let (mut refused_by_pip, mut installed, mut audit_failed) = (0, 0, 0);
    let mut failures = Vec::new();
    for (p, name) in paths.iter().zip(&names) {
        let view = &views[&p.display().to_string()];
        let (fails, artifact, why) = audit(p, &Policy::default());
        audit_failed += usize::from(fails);
        let pip = &view["pip"];
        if pip.get("error").is_some() {
            refused_by_pip += 1;
            if !fails {
                failures.push(format!(
                    "{name}: pip refuses ({}) but the audit passes",
                    pip["error"]
                ));
            }
            continue;
        }
        installed += 1;
        if fails {
            continue; // stricter than pip: allowed
        }
        let a = artifact.expect("passed, so read");
        let audited: BTreeMap<&str, &str> = a
            .digests
            .iter()
            .map(|(n, d)| (n.as_str(), d.hash.as_str()))
            .collect();
        let pip_files: BTreeMap<&str, &str> = pip["files"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(n, h)| (n.as_str(), h.as_str().unwrap_or("")))
            .filter(|(n, _)| outside_dist_info(n))
            .collect();
        let audited_outside: BTreeMap<&str, &str> = audited
            .iter()
            .filter(|(n, _)| outside_dist_info(n))
            .map(|(n, h)| (*n, *h))
            .collect();
        if pip_files != audited_outside {
            failures.push(format!(
                "{name}: the audit passes ({why}) but pip installed {pip_files:?}, the audit read {audited_outside:?}"
            ));
        }
        let zip_members: BTreeMap<&str, &str> = view["zipfile"]["members"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(n, h)| (n.as_str(), h.as_str().unwrap_or("")))
                    .collect()
            })
            .unwrap_or_default();
        if zip_members != audited {
            failures.push(format!(
                "{name}: zipfile lists {zip_members:?}, the audit read {audited:?}"
            ));
        }
    }
    eprintln!(
        "{} wheels: pip refused {refused_by_pip}, installed {installed}; the audit failed {audit_failed}",
        paths.len()
    );
    // Not vacuous: both sides of the comparison occur.
    assert!(
        refused_by_pip >= 5 && installed >= 20,
        "{refused_by_pip} refused, {installed} installed"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs gcc, python3 with pip and a kiln build: `cargo xtask test --only hostile` runs it (cargo test -p kiln-hostile -- --include-ignored)"]
fn the_loader_loads_what_the_audit_passed() {
    let root = tempfile::tempdir().unwrap();
    let elf_dir = root.path().join("elfs");
    std::fs::create_dir_all(&elf_dir).unwrap();
    let e = elfs::build(&elf_dir).unwrap();
    let variants: Vec<(&str, Vec<u8>)> = vec![
        ("plain", e.plain.clone()),
        ("needs", e.needs_missing.clone()),
        ("stripped", elfs::strip_section_table(&e.needs_missing)),
        ("decoy", elfs::decoy_dynamic(&e.needs_missing)),
        ("aarch64", elfs::set_machine(&e.plain, 183)),
        (
            "verneed-loop",
            elfs::verneed_loop(&e.needs_missing, u32::MAX, 1),
        ),
        ("truncated-half", e.plain[..e.plain.len() / 2].to_vec()),
        ("truncated-headers", e.plain[..200].to_vec()),
    ];
    // The platform is this machine's, so a foreign e_machine is judged as the loader judges it.
    let policy = Policy::from_flags(None, None, None, None, Some("manylinux_2_36_x86_64")).unwrap();
    let mut paths = Vec::new();
    let mut labels = Vec::new();
    for (name, bytes) in &variants {
        for beside in [false, true] {
            let dir = root.path().join(format!("{name}-{beside}"));
            std::fs::create_dir_all(&dir).unwrap();
            if beside {
                std::fs::write(dir.join(MISSING_SONAME), &e.missing).unwrap();
            }
            let p = dir.join("libcase.so");
            std::fs::write(&p, bytes).unwrap();
            paths.push(p);
            labels.push(format!("{name} (dependency beside: {beside})"));
        }
    }
    let views = python("load", &paths, &root.path().join("load.json"));
    let (mut loaded, mut refused) = (0, 0);
    let mut failures = Vec::new();
    for (p, label) in paths.iter().zip(&labels) {
        let view = &views[&p.display().to_string()];
        let ok = view["ctypes"] == "ok";
        let (fails, _, why) = audit(p, &policy);
        if ok {
            loaded += 1;
        } else {
            refused += 1;
            if !fails {
                failures.push(format!(
                    "{label}: the loader refuses ({}) but the audit passes",
                    view["ctypes"]
                ));
            }
        }
        eprintln!(
            "{label:<45} loader {:<5} audit {}",
            if ok { "ok" } else { "fails" },
            if fails { why } else { "passes".into() }
        );
    }
    assert!(
        loaded >= 3 && refused >= 5,
        "{loaded} loaded, {refused} refused"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
