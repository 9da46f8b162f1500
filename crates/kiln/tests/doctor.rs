//! `kiln doctor` end to end, as a child process (LD_LIBRARY_PATH only takes effect at process
//! start): no driver, a stub libcuda on LD_LIBRARY_PATH, a fake nvcc, --json ids, exit codes.

use std::process::{Command, Output};

use kiln_test_support::build_stub_libcuda as build_stub;
use kiln_test_support::repo_root as repo;
use serde_json::Value;

fn kiln() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln"));
    cmd.current_dir(repo());
    cmd
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The checks with `id`.
fn checks<'a>(report: &'a Value, id: &str) -> Vec<&'a Value> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == id)
        .collect()
}

fn status<'a>(report: &'a Value, id: &str) -> &'a str {
    let c = checks(report, id);
    assert_eq!(c.len(), 1, "{id}: {c:?}");
    c[0]["status"].as_str().unwrap()
}

#[test]
fn no_driver_fails_the_driver_check_with_exit_1() {
    let out = kiln()
        .args(["doctor", "--json"])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let r = json(&out);
    if status(&r, "driver.libcuda") == "ok" {
        println!("skipped: this machine has an NVIDIA driver (libcuda.so.1 loads), so 'no driver' cannot be shown here");
        return;
    }
    let c = checks(&r, "driver.libcuda")[0];
    assert_eq!(c["status"], "fail");
    let msg = c["message"].as_str().unwrap();
    assert!(
        msg.starts_with("no NVIDIA driver found: libcuda.so.1"),
        "{msg}"
    );
    // dlerror's own words, not just "dlopen failed".
    assert!(msg.contains("cannot open shared object file"), "{msg}");
    assert!(!c["fix"].as_array().unwrap().is_empty());
    for id in [
        "driver.init",
        "driver.version",
        "driver.ptx-jit",
        "gpu.devices",
    ] {
        assert_eq!(status(&r, id), "skip", "{id}");
    }
    assert_eq!(out.status.code(), Some(1));
    assert!(r["summary"]["fail"].as_u64().unwrap() >= 1);
}

#[test]
fn stub_on_ld_library_path_fails_init_and_the_stub_trap() {
    let tmp = tempfile::tempdir().unwrap();
    let stub = build_stub(tmp.path(), "libcuda.so.1");
    let out = kiln()
        .args(["doctor", "--json"])
        .env("LD_LIBRARY_PATH", tmp.path())
        .output()
        .unwrap();
    let r = json(&out);
    // LD_LIBRARY_PATH comes first, so even a machine with a driver loads the stub.
    let init = &checks(&r, "driver.init")[0];
    assert_eq!(init["status"], "fail", "{init}");
    assert!(
        init["message"]
            .as_str()
            .unwrap()
            .contains("CUDA_ERROR_STUB_LIBRARY"),
        "{init}"
    );
    let traps = checks(&r, "trap.stub-libcuda");
    let hit = traps
        .iter()
        .find(|c| c["subject"] == stub.to_str().unwrap())
        .unwrap_or_else(|| panic!("{traps:?}"));
    assert_eq!(hit["status"], "fail");
    // Confirmed in the isolated child probe, not guessed from the size.
    assert!(
        hit["message"]
            .as_str()
            .unwrap()
            .contains("its cuInit returns CUDA_ERROR_STUB_LIBRARY"),
        "{hit}"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn fake_nvcc_of_another_release_fails_the_nvcc_check() {
    let out = kiln()
        .args(["doctor", "--json", "--build-only"])
        .env("KILN_NVCC", repo().join("checks/doctor/fake-nvcc"))
        .env("KILN_FAKE_NVCC_RELEASE", "13.5.20")
        .output()
        .unwrap();
    let r = json(&out);
    let c = checks(&r, "toolchain.nvcc")[0];
    assert_eq!(c["status"], "fail", "{c}");
    assert!(c["message"].as_str().unwrap().contains("13.5.20"), "{c}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn human_output_is_one_line_per_check_with_fix_lines() {
    let out = kiln()
        .args(["doctor"])
        .env("KILN_NVCC", repo().join("checks/doctor/fake-nvcc"))
        .env("KILN_FAKE_NVCC_RELEASE", "12.4.131")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // The checks come after the verdict, the count line and the environment section.
    let checks = text.find("\nchecks\n").expect(&text) + "\nchecks\n".len();
    let lines: Vec<&str> = text[checks..].lines().collect();
    let nvcc = lines
        .iter()
        .position(|l| l.split_whitespace().nth(1) == Some("toolchain.nvcc"))
        .expect(&text);
    assert!(lines[nvcc].starts_with("fail  "), "{}", lines[nvcc]);
    assert!(
        lines[nvcc + 1].trim_start().starts_with("fix: "),
        "{}",
        lines[nvcc + 1]
    );
    for l in lines.iter().take_while(|l| !l.is_empty()) {
        let first = l.split_whitespace().next().unwrap();
        assert!(
            ["ok", "warn", "fail", "skip", "fix:"].contains(&first),
            "{l}"
        );
    }
    assert!(
        text.contains(" ok · ") && text.contains(" fail · "),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn json_ids_are_the_documented_ones() {
    let out = kiln().args(["doctor", "--json"]).output().unwrap();
    let r = json(&out);
    assert_eq!(r["schema"], 1);
    let doc = std::fs::read_to_string(repo().join("crates/kiln-doctor/src/lib.rs")).unwrap();
    for c in r["checks"].as_array().unwrap() {
        let id = c["id"].as_str().unwrap();
        assert!(
            doc.contains(&format!("| `{id}` |")),
            "{id} is not documented in kiln-doctor's lib.rs"
        );
        assert!(["ok", "warn", "fail", "skip"].contains(&c["status"].as_str().unwrap()));
    }
    for id in [
        "pins",
        "toolchain.nvcc",
        "toolchain.libclang",
        "driver.libcuda",
        "trap.stub-libcuda",
        "trap.cuda-home",
        "link.driver-api",
    ] {
        assert!(!checks(&r, id).is_empty(), "{id} missing");
    }
    let failed = r["summary"]["fail"].as_u64().unwrap() > 0;
    assert_eq!(out.status.code(), Some(if failed { 1 } else { 0 }));
}

#[test]
fn unreadable_pins_exit_2() {
    let out = kiln()
        .args(["doctor", "--pins", "/nonexistent/Cargo.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/Cargo.toml"), "{err}");
}

#[test]
fn gpu_machine_names_each_gpu_its_capability_and_coverage() {
    let out = kiln()
        .args(["doctor", "--json", "--runtime-only"])
        .output()
        .unwrap();
    let r = json(&out);
    let init = &checks(&r, "driver.init")[0];
    if init["status"] != "ok" {
        println!(
            "skipped: no usable NVIDIA driver and GPU here ({})",
            init["message"]
        );
        return;
    }
    let gpus = checks(&r, "gpu.coverage");
    assert!(
        !gpus.is_empty(),
        "a working driver but no gpu.coverage: {r}"
    );
    for g in gpus {
        let msg = g["message"].as_str().unwrap();
        assert!(msg.starts_with("GPU ") && msg.contains("(sm_"), "{msg}");
        // The default matrix lists 9.0: an H100/H200 must be covered by its own SASS.
        assert!(
            ["sass", "ptx", "none"].contains(&g["facts"]["coverage"].as_str().unwrap()),
            "{g}"
        );
        if g["facts"]["sm"] == "sm_90" {
            assert_eq!(g["status"], "ok", "{g}");
            assert_eq!(g["facts"]["coverage"], "sass");
            assert!(msg.contains("SASS sm_90 in the matrix covers it"), "{msg}");
        }
    }
}

#[test]
fn skip_waives_a_check_and_rejects_unknown_ids() {
    let out = kiln()
        .args(["doctor", "--json", "--skip", "link.driver-api"])
        .output()
        .unwrap();
    let r = json(&out);
    assert_eq!(status(&r, "link.driver-api"), "skip");
    let out = kiln()
        .args(["doctor", "--skip", "link.nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such check"));
}
