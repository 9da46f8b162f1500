//! `cargo xtask packaged`: kiln as the crates registry would serve it.
//!
//! Every workspace member that may be published (no `publish = false`; found by `cargo metadata`,
//! not listed here) is packed by `cargo package --no-verify`, its publish metadata checked, and
//! the `.crate` files unpacked outside the checkout. Then one cargo workspace there, made of a
//! copy of checks/consumer whose kiln-build and kiln-embed are plain version requirements and
//! the packaged `kiln` CLI, builds against the unpacked sources (`[patch.crates-io]`, since
//! nothing is on crates.io yet). So a crate that reads a file outside its own directory, or a
//! dependency without a version, fails here rather than at `cargo publish`.
//!
//! Cost: `--no-verify` skips cargo's per-crate rebuild in its own target directory (twelve
//! crates verified one by one took 1,331 s); the single build below shares the checkout's
//! `target/` and kernel cache instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

use crate::toolchain::{cargo, copy_tree, repo_root, run_checked, run_status, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// Keep the directory with the unpacked crates and the workspace (printed at the end).
    #[arg(long)]
    pub keep: bool,
}

/// A workspace member `cargo publish` would accept: its name, version and directory.
#[derive(Debug, Clone)]
pub struct Published {
    pub name: String,
    pub version: String,
    pub dir: PathBuf,
}

pub fn run(args: Args, layout: &Layout) -> Result<()> {
    let started = Instant::now();
    let root = repo_root();
    let target = crate::wheel::target_dir();
    let published = published_members(&root)?;
    let names: Vec<&str> = published.iter().map(|p| p.name.as_str()).collect();
    eprintln!("packaged: {} crates: {}", names.len(), names.join(", "));
    check_metadata(&root, &published)?;

    // 1. The .crate files, as `cargo publish` would upload them.
    let out = target.join("package");
    let mut pack = cargo();
    pack.current_dir(&root)
        .args(["package", "--no-verify", "--locked", "--allow-dirty"]);
    for p in &published {
        pack.args(["-p", &p.name]);
    }
    run_checked(&mut pack).context("cargo package")?;
    eprintln!(
        "packaged: cargo package in {:.0} s",
        started.elapsed().as_secs_f64()
    );

    // 2. Unpacked outside the checkout, where no path can reach kiln's tree.
    let work = tempfile::Builder::new()
        .prefix("kiln-packaged-")
        .tempdir()
        .context("creating the work directory")?;
    let registry = work.path().join("registry");
    std::fs::create_dir_all(&registry)?;
    let mut unpacked = BTreeMap::new();
    for p in &published {
        let file = out.join(format!("{}-{}.crate", p.name, p.version));
        run_checked(
            Command::new("tar")
                .arg("xzf")
                .arg(&file)
                .arg("-C")
                .arg(&registry),
        )
        .with_context(|| format!("unpacking {}", file.display()))?;
        let dir = registry.join(format!("{}-{}", p.name, p.version));
        check_normalized(&dir)?;
        unpacked.insert(p.name.clone(), dir);
    }
    check_pins_embedded(&root, &unpacked)?;

    // 3. One workspace: the consumer (kiln-build, kiln-embed by version) and the CLI.
    let ws = work.path().join("ws");
    let consumer = ws.join("consumer");
    copy_tree(
        &root.join("checks/consumer"),
        &consumer,
        &["target", "dist"],
    )?;
    let versions: BTreeMap<&str, &str> = published
        .iter()
        .map(|p| (p.name.as_str(), p.version.as_str()))
        .collect();
    by_version(&consumer.join("Cargo.toml"), &versions)?;
    // The consumer's lock, so registry crates resolve to the versions it is tested with.
    std::fs::copy(
        root.join("checks/consumer/Cargo.lock"),
        ws.join("Cargo.lock"),
    )?;
    // Cargo wants members below the workspace root: the unpacked CLI moves into it.
    let cli_from = unpacked
        .get("kiln")
        .context("the `kiln` crate is not published")?;
    let cli = ws.join(cli_from.file_name().context("crate dir")?);
    std::fs::rename(cli_from, &cli)?;
    unpacked.insert("kiln".into(), cli.clone());
    std::fs::write(ws.join("Cargo.toml"), workspace_manifest(&cli, &unpacked))?;
    check_resolved_from(&ws, work.path(), &unpacked)?;

    let t = Instant::now();
    let mut build = cargo();
    build
        .current_dir(&ws)
        .args(["build", "--workspace"])
        .env("CARGO_TARGET_DIR", &target);
    layout.apply(&mut build);
    run_status(
        &mut build,
        "the consumer and the CLI from the packaged crates failed to build",
    )?;
    eprintln!(
        "packaged: consumer + kiln CLI built from the .crate files in {:.0} s",
        t.elapsed().as_secs_f64()
    );

    // 4. The packaged CLI judges the packaged kiln-build's output against the consumer's table.
    let lib = target.join("debug/libkiln_consumer_example.so");
    let kiln = target.join("debug/kiln");
    let audit = Command::new(&kiln)
        .arg("audit")
        .arg(&lib)
        .arg("--policy")
        .arg(consumer.join("Cargo.toml"))
        .output()
        .with_context(|| format!("running {}", kiln.display()))?;
    ensure!(
        audit.status.success(),
        "kiln audit (packaged) of the consumer's library (packaged kiln-build) failed ({}):\n{}{}",
        audit.status,
        String::from_utf8_lossy(&audit.stdout),
        String::from_utf8_lossy(&audit.stderr)
    );
    eprintln!(
        "packaged: the packaged kiln audits the consumer's library clean; all in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if args.keep {
        eprintln!("kept {}", work.keep().display());
    }
    Ok(())
}

/// Workspace members without `publish = false`, from `cargo metadata`.
pub fn published_members(root: &Path) -> Result<Vec<Published>> {
    let out = run_checked(cargo().current_dir(root).args([
        "metadata",
        "--no-deps",
        "--locked",
        "--format-version",
        "1",
    ]))?;
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut found = Vec::new();
    for p in meta["packages"]
        .as_array()
        .context("cargo metadata: packages")?
    {
        // `publish`: null = anywhere, [] = nowhere (publish = false).
        if p["publish"].as_array().is_some_and(|a| a.is_empty()) {
            continue;
        }
        let manifest = PathBuf::from(p["manifest_path"].as_str().context("manifest_path")?);
        found.push(Published {
            name: p["name"].as_str().context("name")?.to_string(),
            version: p["version"].as_str().context("version")?.to_string(),
            dir: manifest.parent().context("manifest dir")?.to_path_buf(),
        });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// What crates.io shows and requires: a description, a license, the one repository, a readme.
fn check_metadata(root: &Path, published: &[Published]) -> Result<()> {
    let ws: toml::Table = toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml"))?)?;
    let repo = ws["workspace"]["package"]["repository"]
        .as_str()
        .context("[workspace.package] repository")?;
    ensure!(
        !repo.contains("example.invalid"),
        "Cargo.toml's repository is still a placeholder: {repo}"
    );
    let mut problems = Vec::new();
    for p in published {
        let text = std::fs::read_to_string(p.dir.join("Cargo.toml"))?;
        let doc: toml::Table = toml::from_str(&text)?;
        let pkg = doc["package"].as_table().context("[package]")?;
        for key in ["description", "license", "repository"] {
            if !pkg.contains_key(key) {
                problems.push(format!("{}: no {key}", p.name));
            }
        }
        // Explicit (not inherited) repositories must still be the workspace's.
        if let Some(r) = pkg.get("repository").and_then(|v| v.as_str()) {
            if r != repo {
                problems.push(format!(
                    "{}: repository {r:?}, the workspace's is {repo:?}",
                    p.name
                ));
            }
        }
        if !pkg.contains_key("readme") && !p.dir.join("README.md").exists() {
            problems.push(format!("{}: no readme", p.name));
        }
    }
    if !problems.is_empty() {
        bail!("publish metadata:\n  {}", problems.join("\n  "));
    }
    Ok(())
}

/// The packaged Cargo.toml names every dependency by version only (cargo rewrites path
/// dependencies; one without a version would have failed `cargo package`).
fn check_normalized(dir: &Path) -> Result<()> {
    let text = std::fs::read_to_string(dir.join("Cargo.toml"))?;
    let doc: toml::Table = toml::from_str(&text)?;
    for section in ["dependencies", "build-dependencies"] {
        for (name, dep) in doc
            .get(section)
            .and_then(|d| d.as_table())
            .into_iter()
            .flatten()
        {
            ensure!(
                dep.get("path").is_none(),
                "{}: {section}.{name} still has a path",
                dir.display()
            );
        }
    }
    Ok(())
}

/// kiln-pins carries kiln's Cargo.toml as it is (the pins written once, in the workspace root).
fn check_pins_embedded(root: &Path, unpacked: &BTreeMap<String, PathBuf>) -> Result<()> {
    let pins = unpacked
        .get("kiln-pins")
        .context("kiln-pins is not published")?;
    let packed = std::fs::read(pins.join("kiln-workspace.toml"))
        .context("the packaged kiln-pins has no kiln-workspace.toml")?;
    ensure!(
        packed == std::fs::read(root.join("Cargo.toml"))?,
        "the packaged kiln-pins' kiln-workspace.toml differs from kiln's Cargo.toml"
    );
    Ok(())
}

/// The consumer's kiln dependencies by version (as a project off crates.io writes them).
fn by_version(manifest: &Path, versions: &BTreeMap<&str, &str>) -> Result<()> {
    let mut doc: toml::Table = toml::from_str(&std::fs::read_to_string(manifest)?)?;
    let mut changed = 0;
    for section in ["dependencies", "build-dependencies"] {
        let Some(deps) = doc.get_mut(section).and_then(|d| d.as_table_mut()) else {
            continue;
        };
        for (name, dep) in deps.iter_mut() {
            if dep.get("path").is_some() {
                let v = versions
                    .get(name.as_str())
                    .with_context(|| format!("the consumer's {name} is not a published crate"))?;
                *dep = toml::Value::String(v.to_string());
                changed += 1;
            }
        }
    }
    ensure!(
        changed >= 2,
        "the consumer names kiln-build and kiln-embed by path; found {changed}"
    );
    std::fs::write(manifest, toml::to_string(&doc)?)?;
    Ok(())
}

fn workspace_manifest(cli: &Path, unpacked: &BTreeMap<String, PathBuf>) -> String {
    let mut s = format!(
        "[workspace]\nresolver = \"2\"\nmembers = [\"consumer\", {:?}]\n\n[patch.crates-io]\n",
        cli.display().to_string()
    );
    for (name, dir) in unpacked {
        s.push_str(&format!(
            "{name} = {{ path = {:?} }}\n",
            dir.display().to_string()
        ));
    }
    s
}

/// Every kiln crate of the workspace's graph comes from the unpacked `.crate` files.
fn check_resolved_from(ws: &Path, work: &Path, unpacked: &BTreeMap<String, PathBuf>) -> Result<()> {
    let out = run_checked(
        cargo()
            .current_dir(ws)
            .args(["metadata", "--format-version", "1"]),
    )
    .context("cargo metadata in the packaged workspace")?;
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut seen = 0;
    for p in meta["packages"].as_array().context("packages")? {
        let name = p["name"].as_str().unwrap_or_default();
        // Inside the throwaway directory, each from its own unpacked .crate.
        if let Some(dir) = unpacked.get(name) {
            let path = Path::new(p["manifest_path"].as_str().unwrap_or_default());
            ensure!(
                path.starts_with(work) && path.starts_with(dir),
                "{name} resolves to {}, not to its packaged copy",
                path.display()
            );
            seen += 1;
        }
    }
    eprintln!("packaged: {seen} kiln crates in the graph, each from its .crate file");
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The set this suite packs is cargo's, and it is the set docs/install.md names.
    #[test]
    fn published_crates_are_documented() {
        let root = crate::toolchain::repo_root();
        let published = super::published_members(&root).unwrap();
        let names: Vec<&str> = published.iter().map(|p| p.name.as_str()).collect();
        for must in [
            "kiln",
            "kiln-build",
            "kiln-embed",
            "kiln-pins",
            "kiln-audit",
        ] {
            assert!(names.contains(&must), "{must} not published: {names:?}");
        }
        for never in ["kiln-kernels", "kiln-py", "kiln-runtime", "xtask"] {
            assert!(!names.contains(&never), "{never} published: {names:?}");
        }
        let doc = std::fs::read_to_string(root.join("docs/install.md")).unwrap();
        for n in &names {
            assert!(
                doc.contains(&format!("`{n}`")),
                "docs/install.md does not name `{n}`"
            );
        }
    }
}
