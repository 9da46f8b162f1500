//! Wheel metadata: member path safety, RECORD, WHEEL tags, METADATA Requires-Dist.

use std::collections::BTreeMap;
use std::str::FromStr;

use base64::Engine;
use serde::Serialize;

use crate::finding::{finding, Finding};

/// Why a member path must not be extracted, or None when it is safe.
pub fn unsafe_path(name: &str) -> Option<&'static str> {
    if name.starts_with('/') || name.starts_with('\\') {
        return Some("absolute path");
    }
    if name.len() >= 2 && name.as_bytes()[1] == b':' {
        return Some("drive-letter path");
    }
    if name.contains('\0') {
        return Some("NUL in path");
    }
    if name.split(['/', '\\']).any(|c| c == "..") {
        return Some("`..` component");
    }
    None
}

/// `sha256=<urlsafe base64, no padding>` as RECORD writes it.
pub fn record_hash(digest: &[u8]) -> String {
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    )
}

#[derive(Debug, Clone)]
pub struct RecordRow {
    pub hash: String,
    pub size: Option<u64>,
}

/// Parses RECORD (CSV: path,hash,size). Rows that cannot be read become findings.
pub fn parse_record(
    text: &[u8],
    record_path: &str,
    findings: &mut Vec<Finding>,
) -> BTreeMap<String, RecordRow> {
    let mut rows = BTreeMap::new();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text);
    for (i, row) in reader.records().enumerate() {
        match row {
            Ok(r) if !r.is_empty() && !r[0].is_empty() => {
                let size = r
                    .get(2)
                    .filter(|s| !s.is_empty())
                    .and_then(|s| s.parse().ok());
                rows.insert(
                    r[0].to_string(),
                    RecordRow {
                        hash: r.get(1).unwrap_or("").to_string(),
                        size,
                    },
                );
            }
            Ok(_) => {}
            Err(e) => findings.push(finding(
                "wheel/record-mismatch",
                record_path,
                format!("RECORD line {}: {e}", i + 1),
                "regenerate RECORD with the build backend (maturin/pip wheel)",
            )),
        }
    }
    rows
}

/// What a member really is, for comparison against RECORD.
#[derive(Debug, Clone)]
pub struct MemberDigest {
    pub hash: String,
    pub size: u64,
}

/// Compares every member with RECORD (RECORD itself and signatures are exempt by the spec).
pub fn verify_record(
    record: &BTreeMap<String, RecordRow>,
    members: &BTreeMap<String, MemberDigest>,
    record_path: &str,
    require_listed: bool,
    findings: &mut Vec<Finding>,
) {
    let fix = "rebuild the wheel (or rewrite RECORD with the real sha256 and size of every member)";
    for (name, got) in members {
        let exempt = name == record_path
            || name.ends_with(".dist-info/RECORD.jws")
            || name.ends_with(".dist-info/RECORD.p7s");
        if exempt {
            continue;
        }
        match record.get(name) {
            None if require_listed => findings.push(finding(
                "wheel/record-missing",
                name,
                format!("{name} is in the archive but not in {record_path}"),
                fix,
            )),
            None => {}
            Some(row) => {
                if row.hash.is_empty() {
                    if require_listed {
                        findings.push(finding(
                            "wheel/record-mismatch",
                            name,
                            format!("{record_path} has no hash for {name}"),
                            fix,
                        ));
                    }
                } else if !row.hash.starts_with("sha256=") {
                    findings.push(finding(
                        "wheel/record-mismatch",
                        name,
                        format!(
                            "{record_path} uses {} for {name}; only sha256 is verified",
                            row.hash.split('=').next().unwrap_or("")
                        ),
                        "use sha256 in RECORD",
                    ));
                } else if row.hash != got.hash {
                    findings.push(finding(
                        "wheel/record-mismatch",
                        name,
                        format!(
                            "sha256 mismatch: RECORD says {}, content is {}",
                            row.hash, got.hash
                        ),
                        fix,
                    ));
                } else if row.size.is_some_and(|s| s != got.size) {
                    findings.push(finding(
                        "wheel/record-mismatch",
                        name,
                        format!(
                            "size mismatch: RECORD says {}, content is {} bytes",
                            row.size.unwrap_or(0),
                            got.size
                        ),
                        fix,
                    ));
                }
            }
        }
    }
    if require_listed {
        for name in record.keys() {
            if !members.contains_key(name) && name != record_path {
                findings.push(finding(
                    "wheel/record-mismatch",
                    record_path,
                    format!("{record_path} lists {name}, which is not in the archive"),
                    fix,
                ));
            }
        }
    }
}

/// RFC 822-style headers (METADATA, WHEEL): (key, value) in order; continuation lines joined.
pub fn parse_headers(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            break; // the body (long description) starts here
        }
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.1.push('\n');
                last.1.push_str(line.trim());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct Requirement {
    /// Normalized distribution name (PEP 503).
    pub name: String,
    pub raw: String,
    /// Versions the specifier admits are checked with [`Requirement::admits`].
    #[serde(skip)]
    parsed: Option<pep508_rs::Requirement>,
    /// The environment marker, when the requirement is conditional (e.g. an extra).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker: Option<String>,
}

impl Requirement {
    /// Does the version specifier admit `version`? (true when there is no specifier)
    pub fn admits(&self, version: &str) -> bool {
        let Some(req) = &self.parsed else { return true };
        let Ok(v) = pep508_rs::pep440_rs::Version::from_str(version) else {
            return false;
        };
        match &req.version_or_url {
            Some(pep508_rs::VersionOrUrl::VersionSpecifier(specs)) => specs.contains(&v),
            _ => true,
        }
    }
}

/// PEP 503 normalization: lower case, runs of `-_.` become `-`.
pub fn normalize_name(name: &str) -> String {
    let mut out = String::new();
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

pub fn parse_requires_dist(
    headers: &[(String, String)],
    file: &str,
    findings: &mut Vec<Finding>,
) -> Vec<Requirement> {
    let mut reqs = Vec::new();
    for (k, v) in headers {
        if !k.eq_ignore_ascii_case("Requires-Dist") {
            continue;
        }
        match pep508_rs::Requirement::from_str(v) {
            Ok(r) => {
                let marker = r.marker.contents().map(|m| m.to_string());
                reqs.push(Requirement {
                    name: normalize_name(r.name.as_ref()),
                    raw: v.clone(),
                    parsed: Some(r.clone()),
                    marker,
                });
            }
            Err(e) => {
                findings.push(finding(
                    "metadata/bad-requires-dist",
                    file,
                    format!("Requires-Dist {v:?} is not PEP 508: {}", e.message),
                    "write the requirement as PEP 508 (name, specifier, marker)",
                ));
                // Keep the name if one can be read, so linkage still sees the declaration.
                let name: String = v
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                    .collect();
                if !name.is_empty() {
                    reqs.push(Requirement {
                        name: normalize_name(&name),
                        raw: v.clone(),
                        parsed: None,
                        marker: None,
                    });
                }
            }
        }
    }
    reqs
}

/// Wheel file name parts: {name}-{ver}(-{build})?-{python}-{abi}-{platform}.whl
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FilenameTags {
    pub name: String,
    pub version: String,
    /// Expanded tags "py-abi-platform" (compressed tag sets like `cp39.cp310` expanded).
    pub tags: Vec<String>,
}

pub fn parse_filename(file_name: &str) -> Option<FilenameTags> {
    let stem = file_name.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() != 5 && parts.len() != 6 {
        return None;
    }
    let n = parts.len();
    Some(FilenameTags {
        name: parts[0].to_string(),
        version: parts[1].to_string(),
        tags: expand_tag(&format!(
            "{}-{}-{}",
            parts[n - 3],
            parts[n - 2],
            parts[n - 1]
        )),
    })
}

/// "cp39.cp310-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64" -> every combination.
pub fn expand_tag(tag: &str) -> Vec<String> {
    let parts: Vec<&str> = tag.split('-').collect();
    if parts.len() != 3 {
        return vec![tag.to_string()];
    }
    let mut out = Vec::new();
    for py in parts[0].split('.') {
        for abi in parts[1].split('.') {
            for plat in parts[2].split('.') {
                out.push(format!("{py}-{abi}-{plat}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths() {
        for bad in ["../x", "a/../../x", "/etc/passwd", "C:/x", "a\\..\\b"] {
            assert!(unsafe_path(bad).is_some(), "{bad}");
        }
        for ok in ["a/b.so", "a..b/c", "pkg.libs/libx.so.1"] {
            assert!(unsafe_path(ok).is_none(), "{ok}");
        }
    }

    #[test]
    fn requires_dist_with_markers_and_pins() {
        let headers = parse_headers(
            "Metadata-Version: 2.1\nName: x\nRequires-Dist: nvidia_cudnn_cu13 (==9.27.0.42)\nRequires-Dist: nvidia-nccl-cu13>=2.30; extra == 'cuda'\nRequires-Dist: !!bad\n\nbody: no\n",
        );
        let mut findings = Vec::new();
        let reqs = parse_requires_dist(&headers, "x.dist-info/METADATA", &mut findings);
        assert_eq!(reqs[0].name, "nvidia-cudnn-cu13");
        assert!(reqs[0].admits("9.27.0.42") && !reqs[0].admits("9.28"));
        assert!(reqs[1].marker.as_deref().unwrap().contains("extra"));
        assert_eq!(findings.len(), 1, "{findings:?}");
    }

    #[test]
    fn filename_tags_expand() {
        let t =
            parse_filename("kiln-0.1.0-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
                .unwrap();
        assert_eq!(
            t.tags,
            [
                "cp39-abi3-manylinux_2_17_x86_64",
                "cp39-abi3-manylinux2014_x86_64"
            ]
        );
        assert!(parse_filename("x.whl").is_none());
    }
}
