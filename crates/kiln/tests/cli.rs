//! `kiln audit` exit codes and output modes, on real files (this test's own ELF binaries).

use std::process::{Command, Output};

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .output()
        .unwrap()
}

fn kiln_exe() -> &'static str {
    env!("CARGO_BIN_EXE_kiln")
}

#[test]
fn unreadable_input_exits_2_with_a_reason() {
    let out = kiln(&["audit", "/nonexistent/file.whl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/file.whl"));

    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"not a wheel, not an ELF").unwrap();
    let out = kiln(&["audit", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a wheel"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let zip = dir.path().join("broken.whl");
    std::fs::write(&zip, b"PK\x03\x04 truncated").unwrap();
    assert_eq!(
        kiln(&["audit", zip.to_str().unwrap()]).status.code(),
        Some(2)
    );
}

#[test]
fn bad_policy_flags_exit_2() {
    for args in [
        ["--expect-sass", "81x"],
        ["--platform", "win_amd64"],
        ["--min-driver", "100"],
        ["--policy", "/nonexistent/Cargo.toml"],
        // 8.8 is an nvcc target without a GPU row; 9.0a is a target, not a GPU.
        ["--require-gpus", "8.8"],
        ["--require-gpus", "9.0a"],
        ["--require-gpus", ","],
    ] {
        let out = kiln(&["audit", kiln_exe(), args[0], args[1]]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn require_gpus_on_a_binary_without_device_code_fails_with_its_rule() {
    let out = kiln(&["audit", kiln_exe(), "--require-gpus", "9.0", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["policy"]["require_gpus"], serde_json::json!(["9.0"]));
    // Errors and warnings only: kiln's own tables of sonames (in its .rodata) are reported as
    // possible dlopens, at info.
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info")
        .filter_map(|f| f["rule"].as_str())
        .collect();
    assert_eq!(rules, ["reach/required-gpu"]);
    assert_eq!(v["reach"]["binaries"], serde_json::json!([]));
}

#[test]
fn host_binary_without_policy_is_clean_and_with_a_policy_fails() {
    let out = kiln(&["audit", kiln_exe()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("PASS"), "verdict first: {text}");

    // kiln itself carries no device code: a policy expecting SASS must fail, naming the rule.
    let out = kiln(&["audit", kiln_exe(), "--expect-sass", "80,90a", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["kind"], "elf");
    assert_eq!(v["policy"]["expect_sass"], serde_json::json!(["80", "90a"]));
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["rule"] == "arch/no-device-code"));
    assert!(v["binaries"][0]["elf"]["needed"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n == "libc.so.6"));

    let quiet = kiln(&["audit", kiln_exe(), "--expect-sass", "80", "--quiet"]);
    assert_eq!(quiet.status.code(), Some(1));
    assert!(quiet.stdout.is_empty());
    let never = kiln(&[
        "audit",
        kiln_exe(),
        "--expect-sass",
        "80",
        "--fail-on",
        "never",
    ]);
    assert_eq!(never.status.code(), Some(0));
}

#[test]
fn glibc_ceiling_from_platform_flag() {
    // Any binary built on this machine needs a GLIBC newer than manylinux1's 2.5.
    let out = kiln(&[
        "audit",
        kiln_exe(),
        "--platform",
        "manylinux1_x86_64",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "tags/glibc-too-new"),
        "{v:#}"
    );
}

#[test]
fn directory_input_reads_every_elf() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pkg")).unwrap();
    std::fs::copy(kiln_exe(), dir.path().join("pkg/tool")).unwrap();
    std::fs::write(dir.path().join("pkg/__init__.py"), "").unwrap();
    let out = kiln(&["audit", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "directory");
    assert_eq!(v["binaries"][0]["path"], "pkg/tool");
}
