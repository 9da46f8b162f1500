//! Rewrites a wheel with extra `Requires-Dist` lines in its METADATA, the runtime wheels added
//! to its CycloneDX SBOM (`*.dist-info/sboms/*.cyclonedx.json`, written by maturin with the
//! Rust crates) and the matching RECORD lines (sha256, size), keeping every other entry
//! byte-identical, in order, with its timestamp. Refuses wheels that carry bytecode
//! (`__pycache__/`, `*.pyc`): those come from local runs and make the wheel unreproducible.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use base64::Engine;
use sha2::{Digest, Sha256};

/// A Python wheel the built wheel depends on at run time, at the exact version it was built and
/// tested with (the SBOM's component; Requires-Dist declares the pin's range).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuntimeWheel {
    pub name: String,
    pub version: String,
}

/// Copies `src` to `dst` with `requires` added to METADATA and `runtime` to every CycloneDX
/// SBOM in the dist-info (`build_root`, the checkout, is mapped to `/kiln` in the SBOM's
/// references, as the compiler's paths are). Returns the wheel's tags (the `Tag:` lines of its
/// WHEEL file).
pub fn rewrite(
    src: &Path,
    dst: &Path,
    requires: &[String],
    runtime: &[RuntimeWheel],
    build_root: &Path,
) -> Result<Vec<String>> {
    let mut archive =
        zip::ZipArchive::new(std::fs::File::open(src)?).context("reading the wheel as zip")?;
    let names: Vec<String> = archive.file_names().map(str::to_string).collect();
    let bytecode: Vec<&String> = names.iter().filter(|n| is_bytecode(n)).collect();
    if !bytecode.is_empty() {
        bail!(
            "the wheel packs Python bytecode ({}); exclude it in crates/kiln-py/pyproject.toml [tool.maturin] exclude",
            bytecode.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    let dist_info = names
        .iter()
        .filter_map(|n| n.split_once('/').map(|(d, _)| d))
        .find(|d| d.ends_with(".dist-info"))
        .context("the wheel has no .dist-info directory")?
        .to_string();
    let metadata_name = format!("{dist_info}/METADATA");
    let record_name = format!("{dist_info}/RECORD");

    let old_metadata = read_text(&mut archive, &metadata_name)?;
    let new_metadata = with_requires(&old_metadata, requires)?;
    let mut new_record = rehash_record(
        &read_text(&mut archive, &record_name)?,
        &metadata_name,
        new_metadata.as_bytes(),
    )?;
    let sbom_prefix = format!("{dist_info}/sboms/");
    let sbom_names: Vec<String> = names
        .iter()
        .filter(|n| n.starts_with(&sbom_prefix) && n.ends_with(".cyclonedx.json"))
        .cloned()
        .collect();
    if sbom_names.is_empty() {
        bail!("the wheel has no {sbom_prefix}*.cyclonedx.json (maturin writes the Rust crates' SBOM there)");
    }
    let mut new_sboms = std::collections::BTreeMap::new();
    for name in &sbom_names {
        let sbom = with_runtime_components(&read_text(&mut archive, name)?, runtime, build_root)
            .with_context(|| format!("adding the runtime wheels to {name}"))?;
        new_record = rehash_record(&new_record, name, sbom.as_bytes())?;
        new_sboms.insert(name.clone(), sbom);
    }
    let tags: Vec<String> = read_text(&mut archive, &format!("{dist_info}/WHEEL"))?
        .lines()
        .filter_map(|l| l.strip_prefix("Tag:").map(|t| t.trim().to_string()))
        .collect();

    let tmp = dst.with_extension("whl.partial");
    let mut writer = zip::ZipWriter::new(std::fs::File::create(&tmp)?);
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i)?;
        let name = entry.name().to_string();
        let mut options =
            zip::write::SimpleFileOptions::default().compression_method(entry.compression());
        if let Some(t) = entry.last_modified() {
            options = options.last_modified_time(t);
        }
        if let Some(mode) = entry.unix_mode() {
            options = options.unix_permissions(mode);
        }
        let mut data = Vec::with_capacity(entry.size() as usize);
        entry.read_to_end(&mut data)?;
        let data = if name == metadata_name {
            new_metadata.clone().into_bytes()
        } else if name == record_name {
            new_record.clone().into_bytes()
        } else if let Some(sbom) = new_sboms.get(&name) {
            sbom.clone().into_bytes()
        } else {
            data
        };
        writer.start_file(name, options)?;
        writer.write_all(&data)?;
    }
    writer.finish()?;
    std::fs::rename(&tmp, dst)?;
    Ok(tags)
}

fn read_text<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    name: &str,
) -> Result<String> {
    let mut s = String::new();
    archive
        .by_name(name)
        .with_context(|| format!("the wheel has no {name}"))?
        .read_to_string(&mut s)?;
    Ok(s)
}

/// `__pycache__/` entries and compiled bytecode.
pub fn is_bytecode(name: &str) -> bool {
    name.split('/').any(|c| c == "__pycache__") || name.ends_with(".pyc") || name.ends_with(".pyo")
}

/// The CycloneDX document with one `library` component per runtime wheel (purl
/// `pkg:pypi/<name>@<version>`) and a dependency edge from the root component to each;
/// deterministic: components and edges sorted, the `timestamp` and `serialNumber` (a random
/// UUID) dropped, the checkout's path mapped to /kiln.
pub fn with_runtime_components(
    sbom: &str,
    runtime: &[RuntimeWheel],
    build_root: &Path,
) -> Result<String> {
    use serde_json::{json, Value};
    let root_url = format!("file://{}", build_root.display());
    let sbom = if build_root.as_os_str().is_empty() {
        sbom.to_string()
    } else {
        sbom.replace(&root_url, "file:///kiln")
    };
    let mut doc: Value = serde_json::from_str(&sbom).context("the SBOM is not JSON")?;
    if doc.get("bomFormat").and_then(Value::as_str) != Some("CycloneDX") {
        bail!(
            "not a CycloneDX document (bomFormat {:?})",
            doc.get("bomFormat")
        );
    }
    let obj = doc
        .as_object_mut()
        .context("the SBOM is not a JSON object")?;
    obj.remove("serialNumber");
    let root_ref = {
        let metadata = obj
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .context("the SBOM has no metadata")?;
        metadata.remove("timestamp");
        metadata
            .get("component")
            .and_then(|c| c.get("bom-ref"))
            .and_then(Value::as_str)
            .context("the SBOM has no metadata.component.bom-ref (the root)")?
            .to_string()
    };
    let mut wheels = runtime.to_vec();
    wheels.sort();
    wheels.dedup();
    let purl = |w: &RuntimeWheel| format!("pkg:pypi/{}@{}", w.name, w.version);

    let components = obj
        .entry("components")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .context("components is not a list")?;
    components.retain(|c| {
        !c.get("purl")
            .and_then(Value::as_str)
            .is_some_and(|p| wheels.iter().any(|w| purl(w) == p))
    });
    for w in &wheels {
        components.push(json!({
            "type": "library",
            "bom-ref": purl(w),
            "name": w.name,
            "version": w.version,
            "scope": "required",
            "purl": purl(w),
        }));
    }
    let key = |c: &Value| {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        (s("name"), s("version"), s("bom-ref"))
    };
    components.sort_by_key(key);

    let deps = obj
        .entry("dependencies")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .context("dependencies is not a list")?;
    if !deps
        .iter()
        .any(|d| d.get("ref").and_then(Value::as_str) == Some(&root_ref))
    {
        deps.push(json!({ "ref": root_ref, "dependsOn": [] }));
    }
    for d in deps.iter_mut() {
        let is_root = d.get("ref").and_then(Value::as_str) == Some(&root_ref);
        let on = d
            .as_object_mut()
            .context("a dependency is not an object")?
            .entry("dependsOn")
            .or_insert_with(|| json!([]));
        let list = on.as_array_mut().context("dependsOn is not a list")?;
        if is_root {
            for w in &wheels {
                let p = Value::from(purl(w));
                if !list.contains(&p) {
                    list.push(p);
                }
            }
        }
        list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
    for w in &wheels {
        deps.push(json!({ "ref": purl(w), "dependsOn": [] }));
    }
    deps.sort_by(|a, b| {
        a.get("ref")
            .and_then(Value::as_str)
            .cmp(&b.get("ref").and_then(Value::as_str))
    });
    deps.dedup_by(|a, b| a.get("ref") == b.get("ref"));
    let mut out = serde_json::to_string_pretty(&doc)?;
    out.push('\n');
    Ok(out)
}

/// Inserts the lines at the end of the header block (before the blank line and the body).
fn with_requires(metadata: &str, requires: &[String]) -> Result<String> {
    let (headers, body) = match metadata.find("\n\n") {
        Some(i) => (&metadata[..i + 1], &metadata[i + 1..]),
        None => (metadata, ""),
    };
    // A requirement's distribution name: what precedes its version specifier or marker.
    let name = |r: &str| -> String {
        r.trim()
            .split(['=', '<', '>', '!', '~', ' ', ';', '['])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    for line in headers
        .lines()
        .filter_map(|l| l.strip_prefix("Requires-Dist:"))
    {
        let existing = line.trim();
        if requires.iter().any(|r| name(r) == name(existing)) {
            bail!("METADATA already has `Requires-Dist: {existing}`; the pins are the only place for it");
        }
    }
    let mut out = headers.to_string();
    for r in requires {
        out.push_str(&format!("Requires-Dist: {r}\n"));
    }
    out.push_str(body);
    Ok(out)
}

/// RECORD with the line for `name` replaced by the new hash and size.
fn rehash_record(record: &str, name: &str, data: &[u8]) -> Result<String> {
    let digest = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(data));
    let mut found = false;
    let mut out = String::new();
    for line in record.lines() {
        // RECORD is CSV: path,hash,size; only the last two fields are split off, so a path
        // with a comma in it stays whole.
        let path = line.rsplitn(3, ',').nth(2).unwrap_or(line);
        if path == name {
            found = true;
            out.push_str(&format!("{name},sha256={digest},{}\n", data.len()));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !found {
        bail!("RECORD has no line for {name}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requires_go_at_the_end_of_the_headers() {
        let m = "Metadata-Version: 2.4\nName: kiln\nVersion: 0.1.0\n\nbody\n\nmore\n";
        let out = with_requires(m, &["a==1".into(), "b==2".into()]).unwrap();
        assert_eq!(out, "Metadata-Version: 2.4\nName: kiln\nVersion: 0.1.0\nRequires-Dist: a==1\nRequires-Dist: b==2\n\nbody\n\nmore\n");
        let no_body = with_requires("Name: kiln\n", &["a==1".into()]).unwrap();
        assert_eq!(no_body, "Name: kiln\nRequires-Dist: a==1\n");
    }

    #[test]
    fn a_restated_requirement_is_refused() {
        let m = "Name: kiln\nRequires-Dist: nvidia-cublas>=13\n\n";
        let e = with_requires(m, &["nvidia-cublas>=13.0,<14".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("already has"), "{e}");
        let m = "Name: kiln\nRequires-Dist: nvidia-cublas==13.1.0.3\n\n";
        assert!(with_requires(m, &["nvidia-cublas>=13.0,<14".into()]).is_err());
        assert!(with_requires(m, &["nvidia-cudnn-cu13>=9.19,<10".into()]).is_ok());
    }

    /// A maturin-style SBOM (cargo-cyclonedx) with a Rust crate, plus the real pins' runtime
    /// wheels: the result lists the crate and every runtime wheel, with edges from the root.
    #[test]
    fn sbom_lists_rust_crates_and_every_runtime_wheel() {
        let pins = kiln_pins::Pins::discover(Path::new(env!("CARGO_MANIFEST_DIR")))
            .expect("workspace pins");
        let runtime: Vec<RuntimeWheel> = pins
            .runtime
            .values()
            .map(|l| RuntimeWheel {
                name: l.wheel.clone(),
                version: l.version.clone(),
            })
            .collect();
        assert!(!runtime.is_empty());
        let maturin = r#"{"bomFormat":"CycloneDX","specVersion":"1.5","version":1,
          "serialNumber":"urn:uuid:0f3c2d2e-0000-4000-8000-000000000000",
          "metadata":{"timestamp":"2026-11-30T12:27:34Z",
            "component":{"type":"library","bom-ref":"path+file:///build/here/crates/kiln-py#0.1.0","name":"kiln-py","version":"0.1.0"}},
          "components":[{"type":"library","bom-ref":"registry+https://github.com/rust-lang/crates.io-index#pyo3@0.30.0",
            "name":"pyo3","version":"0.30.0","purl":"pkg:cargo/pyo3@0.30.0"}],
          "dependencies":[{"ref":"path+file:///build/here/crates/kiln-py#0.1.0",
            "dependsOn":["registry+https://github.com/rust-lang/crates.io-index#pyo3@0.30.0"]}]}"#;
        let out = with_runtime_components(maturin, &runtime, Path::new("/build/here")).unwrap();
        // Deterministic: the same input gives the same bytes, in any order of the runtime list.
        let mut reversed = runtime.clone();
        reversed.reverse();
        assert_eq!(
            out,
            with_runtime_components(maturin, &reversed, Path::new("/build/here")).unwrap()
        );
        assert!(
            !out.contains("timestamp")
                && !out.contains("serialNumber")
                && !out.contains("/build/here"),
            "{out}"
        );
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        let comps = doc["components"].as_array().unwrap();
        let purls: Vec<&str> = comps.iter().filter_map(|c| c["purl"].as_str()).collect();
        assert!(purls.contains(&"pkg:cargo/pyo3@0.30.0"), "{purls:?}");
        let root = doc["metadata"]["component"]["bom-ref"].as_str().unwrap();
        assert_eq!(root, "path+file:///kiln/crates/kiln-py#0.1.0");
        let root_deps: Vec<&str> = doc["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["ref"] == root)
            .unwrap()["dependsOn"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        for lib in pins.runtime.values() {
            let purl = format!("pkg:pypi/{}@{}", lib.wheel, lib.version);
            let c = comps
                .iter()
                .find(|c| c["purl"] == purl.as_str())
                .unwrap_or_else(|| panic!("{purl} missing: {out}"));
            assert_eq!(
                (
                    c["type"].as_str(),
                    c["name"].as_str(),
                    c["version"].as_str()
                ),
                (
                    Some("library"),
                    Some(lib.wheel.as_str()),
                    Some(lib.version.as_str())
                )
            );
            assert!(root_deps.contains(&purl.as_str()), "no edge root -> {purl}");
        }
        // Idempotent: a second pass adds nothing.
        assert_eq!(
            with_runtime_components(&out, &runtime, Path::new("/build/here")).unwrap(),
            out
        );
    }

    #[test]
    fn bytecode_is_recognised() {
        assert!(is_bytecode("kiln/__pycache__/_errors.cpython-311.pyc"));
        assert!(is_bytecode("kiln/x.pyc"));
        assert!(!is_bytecode("kiln/_errors.py") && !is_bytecode("kiln/_kiln.abi3.so"));
    }

    #[test]
    fn record_line_is_rehashed() {
        let rec = "k/__init__.py,sha256=abc,3\nk-0.1.dist-info/METADATA,sha256=old,10\nk-0.1.dist-info/RECORD,,\n";
        let out = rehash_record(rec, "k-0.1.dist-info/METADATA", b"hello").unwrap();
        // sha256("hello"), urlsafe base64 without padding, as wheels record it.
        assert!(
            out.contains(
                "k-0.1.dist-info/METADATA,sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ,5\n"
            ),
            "{out}"
        );
        assert!(out.starts_with("k/__init__.py,sha256=abc,3\n") && out.ends_with("RECORD,,\n"));
        assert!(rehash_record(rec, "missing", b"").is_err());
    }
}
