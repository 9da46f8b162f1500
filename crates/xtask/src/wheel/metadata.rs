//! Rewrites a wheel with extra `Requires-Dist` lines in its METADATA and the matching RECORD
//! line (sha256, size), keeping every other entry byte-identical, in order, with its timestamp.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use base64::Engine;
use sha2::{Digest, Sha256};

/// Copies `src` to `dst` with `requires` added to METADATA. Returns the wheel's tags
/// (the `Tag:` lines of its WHEEL file).
pub fn add_requires_dist(src: &Path, dst: &Path, requires: &[String]) -> Result<Vec<String>> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(src)?).context("reading the wheel as zip")?;
    let names: Vec<String> = archive.file_names().map(str::to_string).collect();
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
    let new_record = rehash_record(&read_text(&mut archive, &record_name)?, &metadata_name, new_metadata.as_bytes())?;
    let tags: Vec<String> = read_text(&mut archive, &format!("{dist_info}/WHEEL"))?
        .lines()
        .filter_map(|l| l.strip_prefix("Tag:").map(|t| t.trim().to_string()))
        .collect();

    let tmp = dst.with_extension("whl.partial");
    let mut writer = zip::ZipWriter::new(std::fs::File::create(&tmp)?);
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i)?;
        let name = entry.name().to_string();
        let mut options = zip::write::SimpleFileOptions::default().compression_method(entry.compression());
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

fn read_text<R: Read + std::io::Seek>(archive: &mut zip::ZipArchive<R>, name: &str) -> Result<String> {
    let mut s = String::new();
    archive.by_name(name).with_context(|| format!("the wheel has no {name}"))?.read_to_string(&mut s)?;
    Ok(s)
}

/// Inserts the lines at the end of the header block (before the blank line and the body).
fn with_requires(metadata: &str, requires: &[String]) -> Result<String> {
    let (headers, body) = match metadata.find("\n\n") {
        Some(i) => (&metadata[..i + 1], &metadata[i + 1..]),
        None => (metadata, ""),
    };
    for line in headers.lines().filter_map(|l| l.strip_prefix("Requires-Dist:")) {
        let existing = line.trim();
        if requires.iter().any(|r| r.split("==").next() == existing.split(['=', '<', '>', ' ', ';']).next()) {
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
        let e = with_requires(m, &["nvidia-cublas==13.1.0.3".into()]).unwrap_err().to_string();
        assert!(e.contains("already has"), "{e}");
    }

    #[test]
    fn record_line_is_rehashed() {
        let rec = "k/__init__.py,sha256=abc,3\nk-0.1.dist-info/METADATA,sha256=old,10\nk-0.1.dist-info/RECORD,,\n";
        let out = rehash_record(rec, "k-0.1.dist-info/METADATA", b"hello").unwrap();
        // sha256("hello"), urlsafe base64 without padding, as wheels record it.
        assert!(out.contains("k-0.1.dist-info/METADATA,sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ,5\n"), "{out}");
        assert!(out.starts_with("k/__init__.py,sha256=abc,3\n") && out.ends_with("RECORD,,\n"));
        assert!(rehash_record(rec, "missing", b"").is_err());
    }
}
