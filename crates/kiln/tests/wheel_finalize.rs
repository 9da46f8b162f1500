//! The two routes to kiln's released wheel run one post-processing step and must give the same
//! bytes: the xtask route (`cargo xtask wheel` calls `kiln_wheel::finalize` with
//! `Recipe::from_pins(pins, checkout)`, tools/xtask/src/wheel.rs) and the Nix route (the
//! `kiln wheel finalize …` command line in nix/wheel-build.sh, the step nix/wheel.nix runs:
//! from the checkout, on maturin's `raw/*.whl`). Each route builds in its own checkout directory,
//! as Nix (/build/source) and a developer's clone do.
//!
//! The raw wheel has the layout maturin 1.16 writes for crates/kiln-py (seen in
//! `cargo xtask wheel` output): the package, the abi3 extension, METADATA, WHEEL with one
//! `Tag:`, the cargo-cyclonedx SBOM under `.dist-info/sboms/`, RECORD last. The SBOM names the
//! root component by the checkout's path, as cargo-cyclonedx does.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_test_support::repo_root as workspace;

const DIST: &str = "kiln-0.1.0.dist-info";

/// A maturin-shaped wheel built in `checkout`; returns its path under `checkout/raw`.
fn raw_wheel(checkout: &Path, manylinux: &str, extra: &[(&str, &[u8])]) -> PathBuf {
    let root_ref = format!("path+file://{}/crates/kiln-py#0.1.0", checkout.display());
    let sbom = format!(
        r#"{{"bomFormat":"CycloneDX","specVersion":"1.5","version":1,
  "serialNumber":"urn:uuid:{}",
  "metadata":{{"timestamp":"2026-12-01T08:00:0{}Z",
    "component":{{"type":"library","bom-ref":"{root_ref}","name":"kiln-py","version":"0.1.0"}}}},
  "components":[{{"type":"library","bom-ref":"registry+https://github.com/rust-lang/crates.io-index#pyo3@0.30.1",
    "name":"pyo3","version":"0.30.1","purl":"pkg:cargo/pyo3@0.30.1"}}],
  "dependencies":[{{"ref":"{root_ref}","dependsOn":["registry+https://github.com/rust-lang/crates.io-index#pyo3@0.30.1"]}}]}}"#,
        // Random per build in real SBOMs: the step must drop both.
        checkout.display().to_string().len(),
        checkout.display().to_string().len() % 10,
    );
    let tag = format!("cp39-abi3-{manylinux}_x86_64");
    let mut members: Vec<(String, Vec<u8>)> = vec![
        ("kiln/__init__.py".into(), b"from ._kiln import *\n".to_vec()),
        ("kiln/_kiln.abi3.so".into(), b"\x7fELF not really".to_vec()),
        (
            format!("{DIST}/METADATA"),
            b"Metadata-Version: 2.4\nName: kiln\nVersion: 0.1.0\nRequires-Python: >=3.9\nSummary: kiln\n\n# kiln\n\nbody\n".to_vec(),
        ),
        (
            format!("{DIST}/WHEEL"),
            format!("Wheel-Version: 1.0\nGenerator: maturin (1.16.0)\nRoot-Is-Purelib: false\nTag: {tag}\n").into_bytes(),
        ),
        (format!("{DIST}/sboms/kiln-py.cyclonedx.json"), sbom.into_bytes()),
    ];
    for (n, d) in extra {
        members.push((n.to_string(), d.to_vec()));
    }
    let record = format!("{DIST}/RECORD");
    let text = kiln_wheel::record::generate(
        members.iter().map(|(n, d)| (n.as_str(), d.as_slice())),
        &record,
    );
    members.push((record, text.into_bytes()));
    let dir = checkout.join("raw");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("kiln-0.1.0-{tag}.whl"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    for (name, data) in &members {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(zip::DateTime::from_date_and_time(2026, 12, 1, 8, 0, 0).unwrap());
        zip.start_file(name.as_str(), opts).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap();
    path
}

/// A checkout holding what the step reads: the workspace Cargo.toml (the pins) and the
/// extension crate's Cargo.toml (its default features).
fn checkout(dir: &Path) -> PathBuf {
    let ws = workspace();
    std::fs::create_dir_all(dir.join("crates/kiln-py")).unwrap();
    std::fs::copy(ws.join("Cargo.toml"), dir.join("Cargo.toml")).unwrap();
    std::fs::copy(
        ws.join("crates/kiln-py/Cargo.toml"),
        dir.join("crates/kiln-py/Cargo.toml"),
    )
    .unwrap();
    dir.to_path_buf()
}

/// The arguments after `"$KILN"` (the kiln CLI) in nix/wheel-build.sh, the build step
/// nix/wheel.nix runs.
fn nix_finalize_args() -> Vec<String> {
    let wheel_nix = std::fs::read_to_string(workspace().join("nix/wheel.nix")).unwrap();
    assert!(
        wheel_nix.contains("./wheel-build.sh"),
        "nix/wheel.nix no longer runs wheel-build.sh"
    );
    let nix = std::fs::read_to_string(workspace().join("nix/wheel-build.sh")).unwrap();
    let joined = nix.replace("\\\n", " ");
    let line = joined
        .lines()
        .find(|l| l.trim_start().starts_with("\"$KILN\" wheel finalize"))
        .expect("nix/wheel-build.sh runs `\"$KILN\" wheel finalize`");
    let args = line.split("\"$KILN\"").nth(1).unwrap();
    args.split_whitespace().map(String::from).collect()
}

/// Runs the Nix route's command in `checkout`, expanding `raw/*.whl` as the shell does.
fn nix_route(checkout: &Path) -> PathBuf {
    let mut args = Vec::new();
    for a in nix_finalize_args() {
        if a.contains('*') {
            let (dir, pat) = a.rsplit_once('/').unwrap();
            let suffix = pat.trim_start_matches('*');
            for e in std::fs::read_dir(checkout.join(dir)).unwrap() {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                if name.ends_with(suffix) {
                    args.push(format!("{dir}/{name}"));
                }
            }
        } else {
            args.push(a);
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .current_dir(checkout)
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kiln {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    checkout.join(printed)
}

/// The xtask route: what tools/xtask/src/wheel.rs `recipe` + `finalize` do.
fn xtask_route(checkout: &Path, raw: &Path, out_dir: &Path) -> PathBuf {
    let pins = kiln_pins::Pins::load(&checkout.join("Cargo.toml")).unwrap();
    let recipe = kiln_wheel::finalize::Recipe::from_pins(&pins, checkout).unwrap();
    std::fs::create_dir_all(out_dir).unwrap();
    let dst = out_dir.join(raw.file_name().unwrap());
    kiln_wheel::finalize::finalize(raw, &dst, &recipe).unwrap();
    dst
}

fn member(wheel: &Path, name: &str) -> Vec<u8> {
    let mut z = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
    let mut data = Vec::new();
    z.by_name(name).unwrap().read_to_end(&mut data).unwrap();
    data
}

fn manylinux() -> String {
    let pins = kiln_pins::Pins::load(&workspace().join("Cargo.toml")).unwrap();
    pins.wheel.unwrap().manylinux
}

#[test]
fn xtask_and_nix_routes_give_the_same_wheel() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = checkout(&tmp.path().join("home/dev/kiln"));
    let nix = checkout(&tmp.path().join("build/source"));
    let raw_dev = raw_wheel(&dev, &manylinux(), &[]);
    raw_wheel(&nix, &manylinux(), &[]);
    assert_ne!(
        std::fs::read(&raw_dev).unwrap(),
        std::fs::read(nix.join("raw").join(raw_dev.file_name().unwrap())).unwrap(),
        "the raw wheels differ (paths, timestamps) as two real builds do"
    );

    let from_xtask = xtask_route(&dev, &raw_dev, &dev.join("target/wheels"));
    let from_nix = nix_route(&nix);
    for name in [
        format!("{DIST}/METADATA"),
        format!("{DIST}/sboms/kiln-py.cyclonedx.json"),
        format!("{DIST}/RECORD"),
    ] {
        assert_eq!(
            String::from_utf8_lossy(&member(&from_xtask, &name)),
            String::from_utf8_lossy(&member(&from_nix, &name)),
            "{name} differs between the routes"
        );
    }
    assert_eq!(
        std::fs::read(&from_xtask).unwrap(),
        std::fs::read(&from_nix).unwrap(),
        "the finalized wheels differ"
    );

    // And what they agree on is the pins' Requires-Dist, a consistent RECORD, a clean SBOM.
    let pins = kiln_pins::Pins::load(&workspace().join("Cargo.toml")).unwrap();
    let metadata = String::from_utf8(member(&from_nix, &format!("{DIST}/METADATA"))).unwrap();
    for f in ["cublas", "cudnn", "nccl"] {
        let line = format!("Requires-Dist: {}\n", pins.runtime[f].requirement());
        assert!(metadata.contains(&line), "{line} missing:\n{metadata}");
    }
    let sbom = String::from_utf8(member(
        &from_nix,
        &format!("{DIST}/sboms/kiln-py.cyclonedx.json"),
    ))
    .unwrap();
    assert!(
        !sbom.contains("/build/source")
            && !sbom.contains("timestamp")
            && sbom.contains("file:///kiln/"),
        "{sbom}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["audit", "--json"])
        .arg(&from_nix)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let wheel_rules: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["rule"].as_str())
        .filter(|r| r.starts_with("wheel/") || r.starts_with("tags/"))
        .collect();
    assert!(wheel_rules.is_empty(), "{wheel_rules:?}");
}

/// `kiln wheel finalize RAW --out OUT` in `dir` (the default `--pins Cargo.toml`).
fn finalize_in(dir: &Path, raw: &Path, out: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .current_dir(dir)
        .args(["wheel", "finalize"])
        .arg(raw)
        .args(["--out", out])
        .output()
        .unwrap()
}

#[test]
fn finalize_refuses_what_the_pins_forbid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = checkout(tmp.path());
    // A tag other than the pinned level.
    let raw = raw_wheel(&dir, "manylinux_2_17", &[]);
    let out = finalize_in(&dir, &raw, "dist");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("manylinux") && err.contains(&manylinux()),
        "{err}"
    );
    std::fs::remove_dir_all(dir.join("raw")).unwrap();
    // Bytecode.
    let raw = raw_wheel(
        &dir,
        &manylinux(),
        &[("kiln/__pycache__/x.cpython-312.pyc", b"\0")],
    );
    let out = finalize_in(&dir, &raw, "dist");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bytecode"));
    // The input's own directory as --out.
    let out = finalize_in(&dir, &raw, "raw");
    assert_eq!(out.status.code(), Some(2));
}
