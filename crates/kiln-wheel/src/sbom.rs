//! The runtime wheels in maturin's CycloneDX SBOM (`*.dist-info/sboms/*.cyclonedx.json`, the
//! Rust crates): one `library` component per wheel the extension reaches at run time, made
//! deterministic (no timestamp, no random serial number, the checkout's path mapped to /kiln).

use std::path::Path;

/// A Python wheel the built wheel depends on at run time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuntimeWheel {
    /// Its distribution name.
    pub name: String,
    /// The pinned version.
    pub version: String,
}

/// The CycloneDX document with one `library` component per runtime wheel (purl
/// `pkg:pypi/<name>@<version>`) and a dependency edge from the root component to each;
/// deterministic: components and edges sorted, the `timestamp` and `serialNumber` (a random
/// UUID) dropped, the checkout's path mapped to /kiln.
pub fn with_runtime_components(
    sbom: &str,
    runtime: &[RuntimeWheel],
    build_root: &Path,
) -> crate::Result<String> {
    use serde_json::{json, Value};
    let root_url = format!("file://{}", build_root.display());
    let sbom = if build_root.as_os_str().is_empty() {
        sbom.to_string()
    } else {
        sbom.replace(&root_url, "file:///kiln")
    };
    let mut doc: Value = serde_json::from_str(&sbom)
        .map_err(|e| crate::Error::Invalid(format!("the SBOM is not JSON: {e}")))?;
    if doc.get("bomFormat").and_then(Value::as_str) != Some("CycloneDX") {
        return crate::invalid(format!(
            "not a CycloneDX document (bomFormat {:?})",
            doc.get("bomFormat")
        ));
    }
    let obj = doc
        .as_object_mut()
        .ok_or_else(|| crate::Error::Invalid("the SBOM is not a JSON object".into()))?;
    obj.remove("serialNumber");
    let root_ref = {
        let metadata = obj
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| crate::Error::Invalid("the SBOM has no metadata".into()))?;
        metadata.remove("timestamp");
        metadata
            .get("component")
            .and_then(|c| c.get("bom-ref"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                crate::Error::Invalid(
                    "the SBOM has no metadata.component.bom-ref (the root)".into(),
                )
            })?
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
        .ok_or_else(|| crate::Error::Invalid("components is not a list".into()))?;
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
        .ok_or_else(|| crate::Error::Invalid("dependencies is not a list".into()))?;
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
            .ok_or_else(|| crate::Error::Invalid("a dependency is not an object".into()))?
            .entry("dependsOn")
            .or_insert_with(|| json!([]));
        let list = on
            .as_array_mut()
            .ok_or_else(|| crate::Error::Invalid("dependsOn is not a list".into()))?;
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
    let mut out = serde_json::to_string_pretty(&doc).expect("a JSON value serializes");
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
