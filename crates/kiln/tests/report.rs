//! `kiln audit`'s human report and its edges: identical findings grouped with a count, the
//! verdict repeated last, colour only when asked or on a terminal, waivers (`--allow`, the
//! policy table) listed with their reasons, a closed stdout, and the exit codes in `--help`.
//! Inputs are directories of libraries the host's C compiler builds here.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn kiln(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln"));
    cmd.args(args)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// `n` copies of a library NEEDing `libmissing.so.1` (no RUNPATH): n identical
/// `linkage/unresolved-needed` findings.
fn tree(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("stub.c"), "int stub;\n").unwrap();
    std::fs::write(d.join("ext.c"), "int ext(void) { return 1; }\n").unwrap();
    for (args, out) in [
        (
            vec![
                "-shared",
                "-fPIC",
                "-o",
                "libmissing.so.1",
                "stub.c",
                "-Wl,-soname,libmissing.so.1",
            ],
            "libmissing.so.1",
        ),
        (
            vec![
                "-shared",
                "-fPIC",
                "-o",
                "ext.so",
                "ext.c",
                "-Wl,--no-as-needed",
                "./libmissing.so.1",
            ],
            "ext.so",
        ),
    ] {
        let o = Command::new("cc")
            .args(&args)
            .current_dir(d)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{out}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let lib = std::fs::read(d.join("ext.so")).unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("pkg")).unwrap();
    for i in 0..n {
        std::fs::write(root.path().join(format!("pkg/ext{i:02}.so")), &lib).unwrap();
    }
    root
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn identical_findings_print_once_with_a_count_and_the_verdict_comes_last() {
    let t = tree(21);
    let out = kiln(&["audit", arg(t.path())], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("linkage/unresolved-needed").count(),
        1,
        "{text}"
    );
    assert!(text.contains("linkage/unresolved-needed  ×21"), "{text}");
    assert!(text.contains("in: pkg/{ext00.so, ext01.so,"), "{text}");
    assert!(text.contains("… and 9 more"), "{text}");
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("FAIL: ") && text.starts_with("FAIL: "),
        "{text}"
    );
    // Piped, no --color: no escape sequence.
    assert!(!text.contains('\x1b'), "{text}");
}

#[test]
fn colour_only_on_request_or_a_terminal_and_never_with_no_color() {
    let t = tree(1);
    let always = kiln(&["audit", arg(t.path()), "--color", "always"], &[]);
    assert!(String::from_utf8_lossy(&always.stdout).contains("\x1b["));
    // NO_COLOR turns `auto` off (a pipe is already off; CLICOLOR_FORCE would turn it on).
    let forced = kiln(&["audit", arg(t.path())], &[("CLICOLOR_FORCE", "1")]);
    assert!(String::from_utf8_lossy(&forced.stdout).contains("\x1b["));
    let no = kiln(
        &["audit", arg(t.path())],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")],
    );
    assert!(!String::from_utf8_lossy(&no.stdout).contains('\x1b'));
    let never = kiln(
        &["audit", arg(t.path()), "--color", "never"],
        &[("CLICOLOR_FORCE", "1")],
    );
    assert!(!String::from_utf8_lossy(&never.stdout).contains('\x1b'));
}

#[test]
fn allow_waives_visibly_and_an_unused_allow_warns() {
    let t = tree(3);
    let out = kiln(
        &[
            "audit",
            arg(t.path()),
            "--allow",
            "linkage/unresolved-needed:pkg/*.so=loaded by the host application",
            "--allow",
            "reach/gap=no device code here",
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Waived"), "{text}");
    assert!(
        text.contains(
            "waived by linkage/unresolved-needed:pkg/*.so: loaded by the host application"
        ),
        "{text}"
    );
    assert!(text.lines().last().unwrap().contains("3 waived"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("waiver reach/gap matched no finding"), "{err}");

    let json = kiln(
        &[
            "audit",
            arg(t.path()),
            "--json",
            "--allow",
            "linkage/unresolved-needed=host",
        ],
        &[],
    );
    assert_eq!(json.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["counts"]["waived"], 3);
    assert_eq!(v["counts"]["errors"], 0);
    assert_eq!(v["waived"][0]["rule"], "linkage/unresolved-needed");
    assert_eq!(v["waived"][0]["reason"], "host");
    assert_eq!(v["policy"]["allow"][0]["from"], "--allow");

    // A glob that matches nothing waives nothing: the gate fails.
    let miss = kiln(
        &[
            "audit",
            arg(t.path()),
            "--allow",
            "linkage/unresolved-needed:other/*=x",
        ],
        &[],
    );
    assert_eq!(miss.status.code(), Some(1));
    // Bad waivers are refused with exit 2.
    for bad in [
        "linkage/unresolved-needed",
        "no/such-rule=x",
        "reach/gap=  ",
    ] {
        let out = kiln(&["audit", arg(t.path()), "--allow", bad], &[]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
}

#[test]
fn the_policy_table_waives_the_same_way() {
    let t = tree(2);
    let cfg = tempfile::tempdir().unwrap();
    let toml = cfg.path().join("Cargo.toml");
    std::fs::write(
        &toml,
        "[package]\nname = \"c\"\nversion = \"0.1.0\"\n\n[package.metadata.kiln]\narchs = [\"8.0\"]\n\n\
         [package.metadata.kiln.audit]\nallow = [\n  { rule = \"linkage/unresolved-needed\", path = \"pkg/*\", reason = \"host app\" },\n  \
         { rule = \"arch/no-device-code\", reason = \"host-only test tree\" },\n]\n",
    )
    .unwrap();
    let out = kiln(
        &["audit", arg(t.path()), "--policy", arg(&toml), "--json"],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["counts"]["waived"], 3, "{v:#}");
    assert_eq!(v["waived"][0]["reason"], "host-only test tree");
    assert_eq!(v["policy"]["allow"][0]["from"], arg(&toml));
}

/// `kiln audit --json … | head`: the reader goes away; kiln ends with the verdict's code and
/// says nothing (it used to exit 2, "writing the report: Broken pipe").
#[test]
fn a_closed_stdout_ends_quietly_with_the_verdict() {
    // Over 1 MiB of JSON (the output buffer): serde writes while serializing, and the closed
    // pipe used to surface as an `Other` error.
    let t = tree(2000);
    for extra in [&["--json"][..], &[][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["audit", arg(t.path()), "--full"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(1), "{extra:?}: {err}");
        assert!(err.is_empty(), "{extra:?}: {err}");
    }
}

#[test]
fn help_states_the_exit_codes() {
    let out = kiln(&["audit", "--help"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "0  no finding",
        "1  findings at or above",
        "2  could not run",
    ] {
        assert!(text.contains(line), "{text}");
    }
    assert!(text.contains("--allow <RULE[:PATH_GLOB]=REASON>"), "{text}");
}

/// `kiln audit --json-schema` prints the committed docs/audit-json-schema.json (else rewrite it:
/// `kiln audit --json-schema > docs/audit-json-schema.json`; the `cli-wheel` suite validates
/// real reports against the file).
#[test]
fn the_committed_schema_is_what_json_schema_prints() {
    let out = kiln(&["audit", "--json-schema"], &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let path = kiln_test_support::repo_root().join("docs/audit-json-schema.json");
    let have = std::fs::read_to_string(&path).unwrap();
    assert!(
        have.as_bytes() == out.stdout.as_slice(),
        "{} is stale: run `kiln audit --json-schema > docs/audit-json-schema.json`",
        path.display()
    );
}

/// What the schema must say for the check to mean anything: closed objects, the rule ids,
/// and build_manifest where the output puts it (inside `binaries[].elf`).
#[test]
fn the_schema_is_closed_and_places_build_manifest_in_elf() {
    let out = kiln(&["audit", "--json-schema"], &[]);
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["additionalProperties"], false, "{s:#}");
    let defs = s["$defs"].as_object().unwrap();
    assert!(defs["ElfFacts"]["properties"]["build_manifest"].is_object());
    assert!(defs["Binary"]["properties"].get("build_manifest").is_none());
    let rules = defs["Rule"]["enum"].as_array().unwrap();
    assert!(rules.iter().any(|r| r == "arch/missing-sass"), "{rules:?}");
}

/// --json-schema reads no input and takes no other flag; without it INPUT is required.
#[test]
fn json_schema_stands_alone_and_input_is_otherwise_required() {
    assert_eq!(
        kiln(&["audit", "--json-schema", "x.whl"], &[])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(kiln(&["audit"], &[]).status.code(), Some(2));
}
