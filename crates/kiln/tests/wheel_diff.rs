//! `kiln wheel diff A.whl B.whl [--json]`: exit 0 identical, 1 they differ, 2 could not run; the
//! comparison itself is kiln_wheel::diff's (its unit tests).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

fn kiln(args: &[&Path], json: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln"));
    cmd.args(["wheel", "diff"]).args(args);
    if json {
        cmd.arg("--json");
    }
    cmd.output().unwrap()
}

fn wheel(path: &Path, members: &[(&str, &[u8])]) {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, data) in members {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn identical_wheels_exit_0_differing_ones_1_with_the_member_named() {
    let d = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        d.path().join("a.whl"),
        d.path().join("b.whl"),
        d.path().join("c.whl"),
    );
    wheel(&a, &[("pkg/__init__.py", b"x = 1\n")]);
    wheel(&b, &[("pkg/__init__.py", b"x = 1\n")]);
    wheel(&c, &[("pkg/__init__.py", b"x = 2\n")]);

    let same = kiln(&[&a, &b], false);
    assert_eq!(same.status.code(), Some(0), "{same:?}");
    assert!(
        String::from_utf8_lossy(&same.stdout).starts_with("identical:"),
        "{same:?}"
    );

    let differ = kiln(&[&a, &c], false);
    assert_eq!(differ.status.code(), Some(1), "{differ:?}");
    let text = String::from_utf8_lossy(&differ.stdout);
    assert!(
        text.contains("pkg/__init__.py: content differs first at byte 0x4"),
        "{text}"
    );

    let json = kiln(&[&a, &c], true);
    assert_eq!(json.status.code(), Some(1), "{json:?}");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["identical"], false);
    assert_eq!(v["differences"][0]["member"], "pkg/__init__.py");
    assert_eq!(v["differences"][0]["kind"], "content");
}

#[test]
fn an_unreadable_wheel_exits_2_with_its_path_on_stderr() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.whl");
    wheel(&a, &[("pkg/__init__.py", b"")]);
    let missing = d.path().join("missing.whl");
    let out = kiln(&[&a, &missing], true);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("kiln wheel diff: ") && err.contains("missing.whl"),
        "{err}"
    );
}
