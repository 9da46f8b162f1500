//! The one post-processing step after `maturin build`, identical for `cargo xtask wheel` and
//! for Nix (`kiln wheel finalize`): Requires-Dist and the SBOM's runtime components from the
//! pins, RECORD rehashed for what changed, every other member byte-identical, in order, with its
//! timestamp and mode. Refuses bytecode and a platform tag other than the pinned manylinux level.
//!
//! Why not pyproject.toml: maturin takes Requires-Dist only from a static list there, and the
//! versions live once, in `[workspace.metadata.kiln]`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kiln_pins::Pins;

use crate::sbom::RuntimeWheel;
use crate::{invalid, metadata, record, sbom, tags, Error, Result};

/// What finalizing adds, all derived from the pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// `Requires-Dist:` values, in order.
    pub requires: Vec<String>,
    /// The wheels behind `requires`, for the SBOM.
    pub runtime: Vec<RuntimeWheel>,
    /// The platform level every `Tag:` must carry, e.g. "manylinux_2_34".
    pub manylinux: String,
    /// The checkout, mapped to /kiln in the SBOM's references (as the compiler's paths are).
    pub checkout: PathBuf,
}

impl Recipe {
    /// The recipe for the checkout at `checkout` (whose Cargo.toml gave `pins`): the Requires-Dist
    /// rule of `[workspace.metadata.kiln.wheel]` — one line per `[runtime.*]` library that is a
    /// default feature of the extension crate — and its manylinux level.
    pub fn from_pins(pins: &Pins, checkout: &Path) -> Result<Recipe> {
        let wheel = pins.wheel.as_ref().ok_or_else(|| {
            Error::Invalid(format!(
                "{} has no [workspace.metadata.kiln.wheel] (manylinux, extension)",
                pins.manifest.display()
            ))
        })?;
        let manifest = checkout.join(&wheel.extension).join("Cargo.toml");
        let features = runtime_features(pins, &manifest)?;
        Ok(Recipe {
            requires: features
                .iter()
                .map(|f| pins.runtime[f].requirement())
                .collect(),
            runtime: features
                .iter()
                .map(|f| RuntimeWheel {
                    name: pins.runtime[f].wheel.clone(),
                    version: pins.runtime[f].version.clone(),
                })
                .collect(),
            manylinux: wheel.manylinux.clone(),
            checkout: checkout.to_path_buf(),
        })
    }
}

/// The extension crate's default features that name a `[workspace.metadata.kiln.runtime]` entry.
fn runtime_features(pins: &Pins, manifest: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(manifest)
        .map_err(|e| Error::Io(manifest.display().to_string(), e))?;
    let doc: toml::Table = toml::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{}: {}", manifest.display(), e.message())))?;
    let defaults = doc
        .get("features")
        .and_then(|f| f.get("default"))
        .and_then(|d| d.as_array())
        .ok_or_else(|| {
            Error::Invalid(format!(
                "{} has no [features] default list",
                manifest.display()
            ))
        })?;
    let features: Vec<String> = defaults
        .iter()
        .filter_map(|v| v.as_str())
        .filter(|f| pins.runtime.contains_key(*f))
        .map(String::from)
        .collect();
    if features.is_empty() {
        return invalid(format!(
            "no default feature of {} names a [workspace.metadata.kiln.runtime] library",
            manifest.display()
        ));
    }
    Ok(features)
}

/// Copies the maturin wheel `src` to `dst`, finalized by `recipe`. Returns the wheel's tags (the
/// `Tag:` lines of its WHEEL file).
pub fn finalize(src: &Path, dst: &Path, recipe: &Recipe) -> Result<Vec<String>> {
    let zip_err = |e| Error::Zip(src.display().to_string(), e);
    let io_err = |p: &Path, e| Error::Io(p.display().to_string(), e);
    let file = std::fs::File::open(src).map_err(|e| io_err(src, e))?;
    let mut archive = zip::ZipArchive::new(file).map_err(zip_err)?;
    let names: Vec<String> = archive.file_names().map(str::to_string).collect();
    let bytecode: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| crate::archive::is_bytecode(n))
        .collect();
    if !bytecode.is_empty() {
        return invalid(format!(
            "the wheel packs Python bytecode ({}); exclude it in crates/kiln-py/pyproject.toml [tool.maturin] exclude",
            bytecode.join(", ")
        ));
    }
    let dist_info = crate::archive::dist_info(names.iter().map(String::as_str))
        .ok_or_else(|| Error::Invalid("the wheel has no .dist-info directory".into()))?;
    let mut read_text = |name: &str| -> Result<String> {
        let mut s = String::new();
        archive
            .by_name(name)
            .map_err(|_| Error::Invalid(format!("the wheel has no {name}")))?
            .read_to_string(&mut s)
            .map_err(|e| io_err(src, e))?;
        Ok(s)
    };
    let wheel_tags = tags::wheel_file_tags(&read_text(&format!("{dist_info}/WHEEL"))?);
    if wheel_tags.is_empty() || !wheel_tags.iter().all(|t| t.contains(&recipe.manylinux)) {
        return invalid(format!(
            "the wheel has tags {wheel_tags:?}; the pins ([workspace.metadata.kiln.wheel] manylinux) say {}",
            recipe.manylinux
        ));
    }

    let metadata_name = format!("{dist_info}/METADATA");
    let record_name = format!("{dist_info}/RECORD");
    let mut replaced: BTreeMap<String, String> = BTreeMap::new();
    let new_metadata = metadata::with_requires(&read_text(&metadata_name)?, &recipe.requires)?;
    let mut new_record = record::rehash(
        &read_text(&record_name)?,
        &metadata_name,
        new_metadata.as_bytes(),
    )?;
    replaced.insert(metadata_name, new_metadata);
    let sbom_prefix = format!("{dist_info}/sboms/");
    let sbom_names: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with(&sbom_prefix) && n.ends_with(".cyclonedx.json"))
        .collect();
    if sbom_names.is_empty() {
        return invalid(format!(
            "the wheel has no {sbom_prefix}*.cyclonedx.json (maturin writes the Rust crates' SBOM there)"
        ));
    }
    for name in sbom_names {
        let sbom =
            sbom::with_runtime_components(&read_text(name)?, &recipe.runtime, &recipe.checkout)
                .map_err(|e| Error::Invalid(format!("adding the runtime wheels to {name}: {e}")))?;
        new_record = record::rehash(&new_record, name, sbom.as_bytes())?;
        replaced.insert(name.clone(), sbom);
    }
    replaced.insert(record_name, new_record);

    let tmp = dst.with_extension("whl.partial");
    let out = std::fs::File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    let mut writer = zip::ZipWriter::new(out);
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(zip_err)?;
        let name = entry.name().to_string();
        let mut options =
            zip::write::SimpleFileOptions::default().compression_method(entry.compression());
        if let Some(t) = entry.last_modified() {
            options = options.last_modified_time(t);
        }
        if let Some(mode) = entry.unix_mode() {
            options = options.unix_permissions(mode);
        }
        let data = match replaced.get(&name) {
            Some(text) => text.clone().into_bytes(),
            None => {
                let mut data = Vec::with_capacity(entry.size() as usize);
                entry.read_to_end(&mut data).map_err(|e| io_err(src, e))?;
                data
            }
        };
        writer
            .start_file(name, options)
            .map_err(|e| Error::Zip(tmp.display().to_string(), e))?;
        writer.write_all(&data).map_err(|e| io_err(&tmp, e))?;
    }
    writer
        .finish()
        .map_err(|e| Error::Zip(tmp.display().to_string(), e))?;
    std::fs::rename(&tmp, dst).map_err(|e| io_err(dst, e))?;
    Ok(wheel_tags)
}
