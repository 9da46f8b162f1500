//! A directory is audited per distribution: each binary is judged by the WHEEL tags and
//! Requires-Dist of the distribution whose RECORD lists it; files in no RECORD are loose (no
//! tags, no Requires-Dist); a directory with nothing to audit is an error. The tree is shaped
//! like a virtualenv's site-packages as pip leaves it (PEP 376/627 `.dist-info` with real
//! RECORD rows: sha256 and size, written by kiln-wheel's RECORD writer), its libraries built
//! here by the host's C compiler.

use std::path::Path;
use std::process::Command;

use kiln_audit::{AuditError, NoProgress, Options, Policy, Report};

fn cc(dir: &Path, out: &str, src: &str, extra: &[&str]) -> Vec<u8> {
    std::fs::write(dir.join("src.c"), src).unwrap();
    let o = Command::new("cc")
        .args(["-shared", "-fPIC", "-o", out, "src.c", "-Wl,--no-as-needed"])
        .args(extra)
        .current_dir(dir)
        .output()
        .expect("cc runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(dir.join(out)).unwrap()
}

/// Writes one installed distribution: its files, METADATA, WHEEL (one Tag) and a RECORD that
/// lists them all.
fn install(site: &Path, name: &str, tag: &str, requires: &[&str], files: &[(&str, &[u8])]) {
    let dist = format!("{name}-1.0.dist-info");
    let metadata: String = std::iter::once(format!(
        "Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    ))
    .chain(requires.iter().map(|r| format!("Requires-Dist: {r}\n")))
    .collect();
    let wheel =
        format!("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n");
    let meta_path = format!("{dist}/METADATA");
    let wheel_path = format!("{dist}/WHEEL");
    let mut all: Vec<(&str, &[u8])> = files.to_vec();
    all.push((&meta_path, metadata.as_bytes()));
    all.push((&wheel_path, wheel.as_bytes()));
    for (path, data) in &all {
        let p = site.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    let record_path = format!("{dist}/RECORD");
    let record = kiln_wheel::record::generate(all.iter().copied(), &record_path);
    std::fs::write(site.join(record_path), record).unwrap();
}

fn audit(path: &Path) -> Result<Report, AuditError> {
    kiln_audit::audit(path, &Policy::default(), &Options::default(), &NoProgress)
}

/// Three distributions of different tags and one loose library:
/// - `oldpkg` (manylinux_2_17) with a library needing only old glibc symbols;
/// - `newpkg` (manylinux_2_34) with a library needing `pthread_create@GLIBC_2.34` — pooled
///   with oldpkg's tag, it was a false `tags/glibc-too-new`;
/// - `gpupkg` (manylinux_2_28) NEEDing libcudnn.so.9 without requiring the cuDNN wheel —
///   oldpkg requires it, and pooled Requires-Dist hid the missing one;
/// - `loose/tool.so`, in no RECORD, needing GLIBC_2.34: judged with no tags.
#[test]
fn a_virtualenv_is_judged_per_distribution() {
    let build = tempfile::tempdir().unwrap();
    let b = build.path();
    let old = cc(b, "old.so", "int old_f(void) { return 1; }\n", &[]);
    let new_src = "#include <pthread.h>\nstatic void *run(void *a) { return a; }\nint new_f(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }\n";
    let new = cc(b, "new.so", new_src, &["-pthread"]);
    cc(
        b,
        "libcudnn.so.9",
        "int cudnn_stub;\n",
        &["-Wl,-soname,libcudnn.so.9"],
    );
    let gpu = cc(
        b,
        "gpu.so",
        "int gpu_f(void) { return 2; }\n",
        &["./libcudnn.so.9"],
    );

    let venv = tempfile::tempdir().unwrap();
    let site = venv.path();
    install(
        site,
        "oldpkg",
        "cp312-cp312-manylinux_2_17_x86_64",
        &["nvidia-cudnn-cu13>=9.19,<10"],
        &[("oldpkg/_old.so", &old), ("oldpkg/__init__.py", b"")],
    );
    install(
        site,
        "newpkg",
        "cp312-cp312-manylinux_2_34_x86_64",
        &[],
        &[("newpkg/_new.so", &new)],
    );
    install(
        site,
        "gpupkg",
        "cp312-cp312-manylinux_2_28_x86_64",
        &[],
        &[("gpupkg/_gpu.so", &gpu)],
    );
    std::fs::create_dir_all(site.join("loose")).unwrap();
    std::fs::write(site.join("loose/tool.so"), &new).unwrap();

    let r = audit(site).unwrap();
    let errors: Vec<(&str, &str)> = r
        .findings
        .iter()
        .filter(|f| f.severity == kiln_audit::Severity::Error)
        .map(|f| (f.rule.as_str(), f.file.as_str()))
        .collect();
    // Only gpupkg's own missing Requires-Dist; no glibc error for newpkg or the loose file.
    assert_eq!(
        errors,
        [("metadata/missing-requires-dist", "gpupkg/_gpu.so")],
        "{:#?}",
        r.findings
    );
    // The fix names cuDNN's range from the pins a policy carries, or the soname's major; never
    // "(pinned)" against metadata/requires-dist-exact.
    let fix = &r
        .findings
        .iter()
        .find(|f| f.file == "gpupkg/_gpu.so")
        .unwrap()
        .fix;
    assert!(
        fix.contains("nvidia-cudnn-cu13>=9,<10") && !fix.contains("pinned"),
        "{fix}"
    );
    // The same tree pooled under oldpkg's tag: the glibc rule does fire when a tag is too low.
    let too_low = tempfile::tempdir().unwrap();
    install(
        too_low.path(),
        "newpkg",
        "cp312-cp312-manylinux_2_17_x86_64",
        &[],
        &[("newpkg/_new.so", &new)],
    );
    let low = audit(too_low.path()).unwrap();
    assert!(
        low.findings
            .iter()
            .any(|f| f.rule == "tags/glibc-too-new" && f.file == "newpkg/_new.so"),
        "{:#?}",
        low.findings
    );

    // One manylinux line per distribution with binaries (oldpkg's __init__.py is no binary),
    // then the loose files; the best tag from the symbols beside the declared one.
    let tags: Vec<(Option<&str>, &[String], Option<&str>)> = r
        .manylinux
        .iter()
        .map(|t| {
            (
                t.dist_info.as_deref(),
                t.declared.as_slice(),
                t.best.as_deref(),
            )
        })
        .collect();
    assert_eq!(tags.len(), 4, "{tags:?}");
    assert_eq!(tags[3].0, None, "loose files last: {tags:?}");
    assert_eq!(tags[3].2, Some("manylinux_2_34_x86_64"));
    let new_line = tags
        .iter()
        .find(|t| t.0 == Some("newpkg-1.0.dist-info"))
        .unwrap();
    assert_eq!(new_line.1, ["manylinux_2_34_x86_64"]);
    assert_eq!(new_line.2, Some("manylinux_2_34_x86_64"));
    let old_line = tags
        .iter()
        .find(|t| t.0 == Some("oldpkg-1.0.dist-info"))
        .unwrap();
    assert_eq!(old_line.1, ["manylinux_2_17_x86_64"]);
    // Every binary is still in the report, in path order.
    let paths: Vec<&str> = r.binaries.iter().map(|b| b.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "gpupkg/_gpu.so",
            "loose/tool.so",
            "newpkg/_new.so",
            "oldpkg/_old.so"
        ]
    );
    // A multi-distribution tree has no single `wheel`; each distribution is its own.
    assert!(r.wheel.is_none());

    // Every key of the report and of a ManylinuxTag is in the schema doc.
    let doc = include_str!("../../../docs/audit-json-schema.md");
    let v = serde_json::to_value(&r).unwrap();
    let tag = serde_json::to_value(&r.manylinux[0]).unwrap();
    for key in v
        .as_object()
        .unwrap()
        .keys()
        .chain(tag.as_object().unwrap().keys())
    {
        assert!(
            doc.contains(&format!("\"{key}\"")) || doc.contains(&format!("`{key}`")),
            "{key} is not in docs/audit-json-schema.md"
        );
    }
}

/// Nothing to audit is no pass: an empty directory, and one holding only Python files and a
/// clean dist-info, are errors naming what was missing.
#[test]
fn a_directory_with_nothing_to_audit_is_an_error() {
    let empty = tempfile::tempdir().unwrap();
    let e = audit(empty.path()).unwrap_err();
    assert!(matches!(e, AuditError::NothingToAudit(_, 0)), "{e}");
    assert!(e.to_string().contains("nothing to audit"), "{e}");

    let pure = tempfile::tempdir().unwrap();
    install(
        pure.path(),
        "purepkg",
        "py3-none-any",
        &[],
        &[("purepkg/__init__.py", b"x = 1\n")],
    );
    let e = audit(pure.path()).unwrap_err();
    assert!(matches!(e, AuditError::NothingToAudit(_, 4)), "{e}");

    // Something wrong with it is reported as a finding, not hidden behind "nothing to audit".
    std::fs::write(pure.path().join("purepkg/__init__.py"), "tampered\n").unwrap();
    let r = audit(pure.path()).unwrap();
    assert!(
        r.findings.iter().any(|f| f.rule == "wheel/record-mismatch"),
        "{:#?}",
        r.findings
    );
}
