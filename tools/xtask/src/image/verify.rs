//! What the image must be, checked on the loaded image with no GPU and no network:
//! - no file of it is the driver library (`libcuda.so`, `libcuda.so.*`): the NVIDIA container
//!   toolkit mounts the host's at run time, and a copy in the image would shadow it;
//! - `kiln doctor --runtime-only` says it cannot run and why (no `libcuda.so.1`), exits 1 as
//!   README documents for a failed check, finds no stub libcuda, and finds the runtime wheels;
//! - `import kiln` works, `kiln.build_info()` is the wheel's, and a GPU call raises the clear
//!   `kiln.NoDriverError` ("no NVIDIA driver found: libcuda.so.1 …") the no-GPU wheel check expects;
//! - `kiln audit` of the image's site-packages, against the checkout's pins, is clean at the
//!   wheel check's level (`--fail-on error`, the default).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{ensure, Context, Result};
use serde_json::{json, Value};

use super::docker;

/// The probe run as `python3 -c` in the image.
const PROBE: &str = r#"
import json, kiln
r = {"version": kiln.__version__, "build_info": kiln.build_info(),
     "device_count": kiln.device_count(), "is_available": kiln.is_available()}
try:
    kiln.device_info()
    r["device_info"] = None
except BaseException as e:
    r["device_info"] = {"type": type(e).__name__, "message": str(e),
                        "is_no_driver": isinstance(e, kiln.NoDriverError)}
try:
    r["runtime_libraries"] = kiln.runtime_libraries()
except BaseException as e:
    r["runtime_libraries"] = {"error": repr(e)}
print(json.dumps(r, default=str))
"#;

/// Whether a file name is the driver library or one of its versioned names.
pub fn is_driver_library(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    base == "libcuda.so" || base.starts_with("libcuda.so.")
}

/// Every path in the image's filesystem (`docker export` of a created container, read as a tar
/// stream), and those that are the driver library.
pub fn scan(image: &str) -> Result<Value> {
    let c = docker::Created::new(image)?;
    let mut export = docker::docker()
        .args(["export", &c.id])
        .stdout(Stdio::piped())
        .spawn()
        .context("docker export")?;
    let mut list = Command::new("tar")
        .args(["--list", "--file", "-"])
        .stdin(export.stdout.take().context("docker export's stdout")?)
        .stdout(Stdio::piped())
        .spawn()
        .context("tar --list")?;
    let mut files = 0u64;
    let mut driver = Vec::new();
    for line in BufReader::new(list.stdout.take().context("tar's stdout")?).lines() {
        let line = line?;
        files += 1;
        if is_driver_library(&line) {
            driver.push(line);
        }
    }
    ensure!(
        list.wait()?.success(),
        "tar could not read docker export's stream"
    );
    ensure!(export.wait()?.success(), "docker export {} failed", c.id);
    ensure!(
        files > 1000,
        "docker export listed only {files} paths: not a whole image"
    );
    eprintln!(
        "image: scan: {files} paths in the image, {} named libcuda.so*{}",
        driver.len(),
        if driver.is_empty() {
            String::new()
        } else {
            format!(": {}", driver.join(", "))
        }
    );
    ensure!(
        driver.is_empty(),
        "the image carries the driver library ({}): the NVIDIA container toolkit mounts the host's \
         libcuda.so.1 at run time, and a copy in the image shadows it or is a link-time stub",
        driver.join(", ")
    );
    Ok(json!({ "paths": files, "libcuda": driver }))
}

/// `docker run --rm --network none IMAGE ARGS…`: exit code, stdout, stderr.
fn run_in(image: &str, pre: &[String], args: &[&str]) -> Result<(Option<i32>, String, String)> {
    let out = docker::docker()
        .args(["run", "--rm", "--network", "none"])
        .args(pre)
        .arg(image)
        .args(args)
        .output()
        .context("docker run")?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `kiln doctor --runtime-only` in the image, human (printed) and `--json` (checked).
pub fn doctor(image: &str) -> Result<Value> {
    let (code, text, err) = run_in(
        image,
        &[],
        &["kiln", "doctor", "--runtime-only", "--color", "never"],
    )?;
    eprintln!("image: kiln doctor --runtime-only (in the image, no GPU), exit {code:?}:");
    for line in text.lines() {
        eprintln!("  | {line}");
    }
    if !err.trim().is_empty() {
        eprintln!("  stderr: {}", err.trim());
    }
    let (jcode, json_text, jerr) =
        run_in(image, &[], &["kiln", "doctor", "--runtime-only", "--json"])?;
    let report: Value = serde_json::from_str(&json_text)
        .with_context(|| format!("kiln doctor --json printed no JSON (exit {jcode:?}): {jerr}"))?;
    let verdict = &report["verdict"];
    let blocker = &verdict["run_blocker"];
    let checks = report["checks"].as_array().cloned().unwrap_or_default();
    fn by_id<'a>(checks: &'a [Value], id: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        checks.iter().filter(move |c| c["id"] == id)
    }
    let by_id = |id: &'static str| by_id(&checks, id);
    let stubs: Vec<&Value> = by_id("trap.stub-libcuda")
        .filter(|c| c["status"] != "ok")
        .collect();
    let runtime: Vec<String> = by_id("trap.runtime-lib")
        .map(|c| {
            format!(
                "{}: {}",
                c["subject"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?")
            )
        })
        .collect();
    // Exit 1: a failed check (README: "Exit 0 when nothing fails, 1 when a check fails").
    ensure!(
        code == Some(1) && jcode == Some(1),
        "kiln doctor --runtime-only without a driver must exit 1 (a run check fails), got {code:?} / --json {jcode:?}"
    );
    ensure!(
        verdict["can_run"] == false && blocker["id"] == "driver.libcuda",
        "the doctor's verdict must be: cannot run, because driver.libcuda failed; got {verdict}"
    );
    let reason = blocker["reason"].as_str().unwrap_or_default();
    let libcuda: Vec<&Value> = by_id("driver.libcuda").collect();
    ensure!(
        libcuda.len() == 1
            && libcuda[0]["status"] == "fail"
            && libcuda[0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("libcuda.so.1")),
        "the doctor's driver.libcuda check must fail naming libcuda.so.1, got {libcuda:?}"
    );
    ensure!(
        by_id("trap.stub-libcuda").count() > 0 && stubs.is_empty(),
        "the doctor must look for a stub libcuda and find none: {stubs:?}"
    );
    ensure!(
        !runtime.is_empty()
            && by_id("trap.runtime-lib").all(|c| c["status"] == "ok" || c["status"] == "skip"),
        "the runtime wheels in the image must satisfy the doctor: {runtime:?}"
    );
    eprintln!(
        "image: doctor: exit 1, cannot run because {reason}; no stub libcuda; runtime libraries {}",
        runtime.join(", ")
    );
    Ok(json!({
        "exit": code,
        "can_run": verdict["can_run"],
        "run_blocker": blocker,
        "stub_libcuda": stubs,
        "runtime_libraries": runtime,
        "summary": report["summary"],
    }))
}

/// `import kiln` in the image: build_info, and the no-driver error on a GPU call.
pub fn import(image: &str, wheel_version: &str) -> Result<Value> {
    let (code, out, err) = run_in(
        image,
        &[],
        &["python3", "-c", "import kiln; print(kiln.build_info())"],
    )?;
    ensure!(
        code == Some(0),
        "python3 -c 'import kiln; print(kiln.build_info())' in the image: exit {code:?}: {err}"
    );
    let shown: String = out.chars().take(160).collect();
    eprintln!("image: python3 -c 'import kiln; print(kiln.build_info())': {shown}…");
    let (code, out, err) = run_in(image, &[], &["python3", "-c", PROBE])?;
    ensure!(
        code == Some(0),
        "the import probe in the image: exit {code:?}: {err}"
    );
    let r: Value = serde_json::from_str(out.trim().lines().last().unwrap_or_default())
        .with_context(|| format!("the import probe printed {out:?}"))?;
    ensure!(
        r["version"] == wheel_version && r["build_info"]["version"] == wheel_version,
        "kiln in the image is {} (build_info {}), the wheel is {wheel_version}",
        r["version"],
        r["build_info"]["version"]
    );
    let targets = r["build_info"]["targets"].as_array().map_or(0, |t| t.len());
    ensure!(targets > 0, "build_info lists no targets");
    let e = &r["device_info"];
    let message = e["message"].as_str().unwrap_or_default();
    ensure!(
        e["is_no_driver"] == true && message.starts_with("no NVIDIA driver found: libcuda.so.1"),
        "kiln.device_info() without a driver must raise kiln.NoDriverError(\"no NVIDIA driver found: libcuda.so.1 …\"), got {e}"
    );
    ensure!(
        r["device_count"] == 0 && r["is_available"] == false,
        "device_count() {} / is_available() {} without a driver",
        r["device_count"],
        r["is_available"]
    );
    eprintln!(
        "image: import kiln {wheel_version}: build_info lists {targets} targets; device_info() -> NoDriverError: {message}"
    );
    Ok(json!({
        "version": r["version"],
        "targets": targets,
        "no_driver_error": message,
        "device_count": r["device_count"],
        "runtime_libraries": r["runtime_libraries"],
    }))
}

/// The rules kiln's pins cannot judge NVIDIA's runtime libraries by: kiln's matrix, PTX and
/// driver floor are statements about kiln's binaries, and NVIDIA builds cuBLAS, cuDNN and NCCL
/// to its own. Waived for `nvidia/*` only, visibly (the report lists each waived finding with
/// the reason); kiln's own files get no waiver.
const NVIDIA_WAIVED: &[&str] = &[
    "arch/kernel-missing-sass",
    "arch/missing-sass",
    "arch/missing-ptx",
    "arch/unexpected-ptx",
    "arch/ptx-isa-too-new",
    "tags/cxx-abi-too-new",
];

/// `kiln audit SITE --policy Cargo.toml --json` run by the image's own kiln, on its own
/// site-packages (the checkout's Cargo.toml mounted read-only): exit 0 at the wheel check's
/// level (`--fail-on error`), with [`NVIDIA_WAIVED`] waived for `nvidia/*`, and no finding at
/// all (warnings included) on a file outside `nvidia/`.
pub fn audit(image: &str, site: &str, pins: &Path) -> Result<Value> {
    let mount = vec![
        "-v".to_string(),
        docker::mount(pins, "/kiln-pins/Cargo.toml", true)?,
    ];
    let mut args: Vec<String> = [
        "kiln",
        "audit",
        site,
        "--policy",
        "/kiln-pins/Cargo.toml",
        "--json",
    ]
    .map(String::from)
    .to_vec();
    for rule in NVIDIA_WAIVED {
        args.push("--allow".into());
        args.push(format!(
            "{rule}:nvidia/*=NVIDIA's runtime wheel, built to NVIDIA's matrix and toolchain, not kiln's pins"
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = run_in(image, &mount, &args)?;
    let report: Value = serde_json::from_str(&out).with_context(|| {
        format!("kiln audit {site} --json in the image printed no JSON (exit {code:?}): {err}")
    })?;
    let findings: Vec<String> = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "{} {} {}: {}",
                f["severity"].as_str().unwrap_or("?"),
                f["rule"].as_str().unwrap_or("?"),
                f["file"].as_str().unwrap_or(""),
                f["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    let binaries: Vec<&str> = report["binaries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["path"].as_str().or(b["file"].as_str()))
        .collect();
    let ours: Vec<&String> = findings
        .iter()
        .filter(|f| {
            !f.split_whitespace()
                .nth(2)
                .is_some_and(|p| p.starts_with("nvidia/"))
        })
        .filter(|f| !f.starts_with("info "))
        .collect();
    let waived = report["waived"].as_array().map_or(0, |w| w.len());
    for f in findings.iter().filter(|f| !f.starts_with("info ")) {
        eprintln!("  audit: {f}");
    }
    ensure!(
        code == Some(0),
        "kiln audit {site} --policy Cargo.toml in the image: exit {code:?} (0 = clean at --fail-on error), {} findings",
        findings.len()
    );
    ensure!(
        ours.is_empty(),
        "kiln audit {site}: findings outside nvidia/ (kiln's own files): {ours:?}"
    );
    ensure!(
        report["counts"]["binaries"].as_u64().unwrap_or(0) > 1,
        "kiln audit {site} read {:?} binaries: not the image's site-packages",
        report["counts"]["binaries"]
    );
    eprintln!(
        "image: kiln audit {site} --policy Cargo.toml: exit 0, {} binaries; {waived} NVIDIA-library findings waived by rule ({}), {} warnings/infos shown, none on kiln's files",
        report["counts"]["binaries"],
        NVIDIA_WAIVED.join(", "),
        findings.len()
    );
    Ok(
        json!({ "exit": code, "binaries": binaries, "findings": findings, "waived": waived, "counts": report["counts"] }),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_driver_library_is_the_driver_library() {
        use super::is_driver_library as d;
        assert!(d("./usr/lib/x86_64-linux-gnu/libcuda.so.1"));
        assert!(d("usr/lib/libcuda.so"));
        assert!(d("libcuda.so.580.95.05"));
        assert!(!d(
            "usr/local/lib/python3.11/dist-packages/nvidia/cu13/lib/libcudart.so.13"
        ));
        assert!(!d("libcudadevrt.a"));
        assert!(!d("libcuda.so.1.txt/other"));
    }
}
