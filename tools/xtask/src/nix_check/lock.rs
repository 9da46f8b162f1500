//! flake.lock against flake.nix, with a message that says which input differs and how, before
//! Nix's own `nix flake metadata --offline --no-update-lock-file` (which, offline, can only say
//! that it failed to fetch something).

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::{nix_error, tools::Tools, Flake};

pub fn check(tools: &Tools, flake: &Flake) -> Result<String> {
    let lock_path = flake.root.join("flake.lock");
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(&lock_path).context("reading flake.lock")?)
            .context("flake.lock is not JSON")?;
    let out = tools
        .nix()
        .args(["eval", "--json", "--file"])
        .arg(flake.root.join("flake.nix"))
        .arg("inputs")
        .output()?;
    if !out.status.success() {
        bail!("reading the inputs of flake.nix: {}", nix_error(&out));
    }
    let inputs: Value = serde_json::from_slice(&out.stdout)?;
    let problems = compare(&inputs, &lock);
    if !problems.is_empty() {
        bail!(
            "flake.lock is out of date with flake.nix (run `nix flake lock` with network):\n{}",
            problems.join("\n")
        );
    }
    let out = tools
        .nix()
        .args(["flake", "metadata", "--offline", "--no-update-lock-file"])
        .arg(&flake.flake_ref)
        .output()?;
    if !out.status.success() {
        bail!(
            "nix flake metadata --offline --no-update-lock-file: {}",
            nix_error(&out)
        );
    }
    Ok(format!(
        "{} inputs locked with rev and narHash",
        inputs.as_object().map_or(0, |o| o.len())
    ))
}

/// `github:OWNER/REPO[/REF-OR-REV]` as the lock's `original` would record it.
fn parse_github(url: &str) -> Option<(String, String, Option<String>)> {
    let rest = url.strip_prefix("github:")?;
    let rest = rest.split('?').next()?;
    let mut parts = rest.splitn(3, '/');
    Some((
        parts.next()?.to_string(),
        parts.next()?.to_string(),
        parts.next().map(str::to_string),
    ))
}

fn is_rev(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

pub fn compare(inputs: &Value, lock: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let nodes = &lock["nodes"];
    let root_name = lock["root"].as_str().unwrap_or("root");
    let root_inputs = nodes[root_name]["inputs"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let declared = inputs.as_object().cloned().unwrap_or_default();

    for name in root_inputs.keys() {
        if !declared.contains_key(name) {
            problems.push(format!(
                "input `{name}` is locked but not declared in flake.nix"
            ));
        }
    }
    for (name, decl) in &declared {
        let Some(node_name) = root_inputs.get(name).and_then(Value::as_str) else {
            problems.push(format!(
                "input `{name}` is declared in flake.nix but not locked"
            ));
            continue;
        };
        let node = &nodes[node_name];
        let original = &node["original"];
        let locked = &node["locked"];
        match decl["url"].as_str().and_then(parse_github) {
            Some((owner, repo, r)) => {
                let o = |k: &str| original[k].as_str().map(str::to_string);
                let want_rev = r.clone().filter(|r| is_rev(r));
                let want_ref = r.filter(|r| !is_rev(r));
                if original["type"] != "github"
                    || o("owner").as_deref() != Some(owner.as_str())
                    || o("repo").as_deref() != Some(repo.as_str())
                    || o("rev") != want_rev
                    || o("ref") != want_ref
                {
                    problems.push(format!(
                        "input `{name}`: flake.nix says {}, the lock's original is {}",
                        decl["url"].as_str().unwrap_or("?"),
                        original
                    ));
                }
                if let Some(rev) = &want_rev {
                    if locked["rev"].as_str() != Some(rev.as_str()) {
                        problems.push(format!(
                            "input `{name}`: flake.nix pins rev {rev}, the lock has {}",
                            locked["rev"]
                        ));
                    }
                }
            }
            None => problems.push(format!(
                "input `{name}`: only github: inputs are expected, flake.nix says {}",
                decl["url"]
            )),
        }
        for key in ["rev", "narHash", "lastModified"] {
            if locked[key].is_null() {
                problems.push(format!("input `{name}`: the lock has no locked.{key}"));
            }
        }
        if let Some(nh) = locked["narHash"].as_str() {
            if !nh.starts_with("sha256-") {
                problems.push(format!(
                    "input `{name}`: locked.narHash {nh} is not an SRI sha256"
                ));
            }
        }
        // `inputs.<x>.follows` in flake.nix against the lock node's inputs.
        let decl_follows: Vec<(String, String)> = decl["inputs"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v["follows"].as_str().map(|f| (k.clone(), f.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let node_inputs = node["inputs"].as_object().cloned().unwrap_or_default();
        for (k, f) in &decl_follows {
            let want = Value::Array(f.split('/').map(|s| Value::String(s.to_string())).collect());
            if node_inputs.get(k) != Some(&want) {
                problems.push(format!(
                    "input `{name}`: flake.nix makes its `{k}` follow `{f}`, the lock has {}",
                    node_inputs.get(k).unwrap_or(&Value::Null)
                ));
            }
        }
        for (k, v) in &node_inputs {
            if v.is_array() && !decl_follows.iter().any(|(dk, _)| dk == k) {
                problems.push(format!(
                    "input `{name}`: the lock has `{k}` following {v}, flake.nix does not"
                ));
            }
        }
    }
    problems
}

/// The narHash recorded for crane and rust-overlay against the NAR hash of the given source
/// trees (unpacked `git archive`s of the locked revisions); the trees are then added to the
/// store under the name Nix's github fetcher uses, so the lock resolves offline.
pub fn check_real_hashes(
    tools: &Tools,
    flake: &Flake,
    crane: &Path,
    rust_overlay: &Path,
) -> Result<String> {
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(flake.root.join("flake.lock"))?)?;
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    for (name, dir) in [("crane", crane), ("rust-overlay", rust_overlay)] {
        let node = lock["nodes"]["root"]["inputs"][name]
            .as_str()
            .unwrap_or(name);
        let locked = &lock["nodes"][node]["locked"];
        let want = locked["narHash"].as_str().unwrap_or("");
        let out = tools.nix().args(["hash", "path"]).arg(dir).output()?;
        if !out.status.success() {
            bail!("nix hash path {}: {}", dir.display(), nix_error(&out));
        }
        let got = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if got == want {
            let add = tools
                .nix()
                .args(["store", "add-path", "--name", "source"])
                .arg(dir)
                .output()?;
            if !add.status.success() {
                bail!("nix store add-path {}: {}", dir.display(), nix_error(&add));
            }
            notes.push(format!(
                "{name} {} {got}",
                locked["rev"].as_str().unwrap_or("?")
            ));
        } else {
            problems.push(format!(
                "{name}: {} hashes to {got}, flake.lock records {want} for rev {}",
                dir.display(),
                locked["rev"]
            ));
        }
    }
    if problems.is_empty() {
        Ok(notes.join("; "))
    } else {
        bail!("{}", problems.join("\n"))
    }
}
