//! A wheel's `.dist-info`: what pip refuses in it (`check_dist_info`) and its RECORD, WHEEL and
//! METADATA parsed into [`WheelMeta`] (`read_dist_info`). Wheels (`archive`) and directories
//! (`dists`) both read their distributions through here.

use std::collections::{BTreeMap, BTreeSet};

use kiln_wheel::{metadata, record, tags};

use crate::facts::{DistRecord, ReadProblem, WheelMeta};

pub(crate) fn is_dist_info_file(name: &str) -> bool {
    let mut parts = name.split('/');
    matches!((parts.next(), parts.next(), parts.next()), (Some(d), Some("RECORD" | "METADATA" | "WHEEL"), None) if d.ends_with(".dist-info"))
}

/// Largest dist-info text (RECORD, METADATA, WHEEL) kept for parsing; a real RECORD of a
/// large wheel is a few MB (torch 2.x: ~2 MB).
pub(crate) const DIST_INFO_TEXT_LIMIT: u64 = 64 << 20;

/// Requires-Dist lines read from one METADATA (torch 2.x has ~20; each is in the report).
const REQUIRES_DIST_LIMIT: usize = 1000;

/// Top-level `.dist-info` directories read in detail; more than one is already an error.
const DIST_INFO_LIMIT: usize = 4;

/// What pip's `wheel_dist_info_dir` and `wheel_metadata` refuse (pip/_internal/utils/wheel.py):
/// no or several top-level `.dist-info` directories, one whose name does not start with the
/// project name, no WHEEL, a Wheel-Version that is missing or not 1.x; and METADATA, which every
/// installer reads. Stricter than pip in one place: the dist-info must be `{name}-{version}` of
/// the file name (pip accepts any suffix after the name).
pub(crate) fn check_dist_info(
    names: &[String],
    texts: &BTreeMap<String, Vec<u8>>,
    filename: Option<&tags::FilenameTags>,
    problems: &mut Vec<ReadProblem>,
) {
    let dirs: BTreeSet<&str> = names
        .iter()
        .map(|n| n.split('/').next().unwrap_or(""))
        .filter(|d| d.ends_with(".dist-info"))
        .collect();
    if dirs.len() > 1 {
        problems.push(ReadProblem::BadDistInfo {
            dist_info: String::new(),
            why: format!(
                "{} .dist-info directories (pip refuses more than one): {}",
                dirs.len(),
                dirs.iter().take(8).copied().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    for d in dirs.iter().take(DIST_INFO_LIMIT) {
        if let Some(f) = filename {
            named_for_the_file(d, f, problems);
        }
        for needed in ["WHEEL", "METADATA"] {
            if !texts.contains_key(&format!("{d}/{needed}")) {
                problems.push(ReadProblem::BadDistInfo {
                    dist_info: d.to_string(),
                    why: format!("{d}/{needed} is missing (pip refuses the wheel)"),
                });
            }
        }
        if let Some(text) = texts.get(&format!("{d}/WHEEL")) {
            wheel_version(d, &String::from_utf8_lossy(text), problems);
        }
    }
}

/// The dist-info `d` must be `{name}-{version}` of the wheel's file name.
fn named_for_the_file(d: &str, f: &tags::FilenameTags, problems: &mut Vec<ReadProblem>) {
    let stem = d.trim_end_matches(".dist-info");
    let (name, version) = stem.split_once('-').unwrap_or((stem, ""));
    let same_name = metadata::normalize_name(name) == metadata::normalize_name(&f.name);
    let same_version = same_version(version, &f.version);
    if !same_name || !same_version {
        problems.push(ReadProblem::BadDistInfo {
            dist_info: d.to_string(),
            why: format!(
                "named for {stem:?}, but the file name says {}-{}",
                f.name, f.version
            ),
        });
    }
}

/// WHEEL's Wheel-Version must be 1.x (pip refuses other majors, and a missing one).
fn wheel_version(d: &str, text: &str, problems: &mut Vec<ReadProblem>) {
    let headers = metadata::parse_headers(text);
    let v = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("Wheel-Version"))
        .map(|(_, v)| v.as_str());
    let major = v.and_then(|v| v.split('.').next()?.trim().parse::<u64>().ok());
    if major != Some(1) {
        problems.push(ReadProblem::BadDistInfo {
            dist_info: d.to_string(),
            why: match v {
                None => "WHEEL has no Wheel-Version (pip refuses the wheel)".into(),
                Some(v) => format!("Wheel-Version {v:?} is not 1.x (pip refuses other majors)"),
            },
        });
    }
}

/// PEP 440 equality of the dist-info's and the file name's version (`1.0` == `1.0.0`).
fn same_version(a: &str, b: &str) -> bool {
    use std::str::FromStr;
    let parse = |v: &str| pep508_rs::pep440_rs::Version::from_str(&v.replace('_', "-")).ok();
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Parses RECORD / WHEEL / METADATA of every top-level `.dist-info` (the first few).
pub(crate) fn read_dist_info(
    texts: &BTreeMap<String, Vec<u8>>,
    filename: Option<tags::FilenameTags>,
    problems: &mut Vec<ReadProblem>,
) -> WheelMeta {
    let mut meta = WheelMeta {
        filename,
        ..Default::default()
    };
    let dist_infos: BTreeSet<&str> = texts
        .keys()
        .filter_map(|k| k.split_once('/').map(|(d, _)| d))
        .collect();
    for d in dist_infos.iter().take(DIST_INFO_LIMIT) {
        meta.dist_info.push(d.to_string());
        let record_path = format!("{d}/RECORD");
        let rows = texts.get(&record_path).map(|text| {
            let (rows, bad) = record::parse(text);
            problems.extend(bad.into_iter().map(|b| ReadProblem::BadRecordLine {
                record: record_path.clone(),
                line: b.line,
                error: b.error,
            }));
            rows
        });
        meta.records.push(DistRecord {
            dist_info: d.to_string(),
            rows,
        });
        if let Some(text) = texts.get(&format!("{d}/WHEEL")) {
            wheel_tags(d, &String::from_utf8_lossy(text), &mut meta, problems);
        }
        let metadata_path = format!("{d}/METADATA");
        if let Some(text) = texts.get(&metadata_path) {
            requires_dist(
                &metadata_path,
                &String::from_utf8_lossy(text),
                &mut meta,
                problems,
            );
        }
    }
    meta
}

/// WHEEL's tags, expanded, into `meta.tags` (up to [`tags::MAX_EXPANDED_TAGS`]).
fn wheel_tags(d: &str, text: &str, meta: &mut WheelMeta, problems: &mut Vec<ReadProblem>) {
    for v in tags::wheel_file_tags(text) {
        match tags::expand_tag_bounded(&v, tags::MAX_EXPANDED_TAGS - meta.tags.len()) {
            Some(t) => meta.tags.extend(t),
            None => {
                problems.push(ReadProblem::OverLimit {
                    file: format!("{d}/WHEEL"),
                    what: "expanded wheel tags",
                    limit: tags::MAX_EXPANDED_TAGS as u64,
                });
                break;
            }
        }
    }
}

/// METADATA's Requires-Dist (the first [`REQUIRES_DIST_LIMIT`]) into `meta.requires_dist`.
fn requires_dist(
    metadata_path: &str,
    text: &str,
    meta: &mut WheelMeta,
    problems: &mut Vec<ReadProblem>,
) {
    let mut headers = metadata::parse_headers(text);
    let mut seen = 0usize;
    headers.retain(|(k, _)| {
        let req = k.eq_ignore_ascii_case("Requires-Dist");
        seen += usize::from(req);
        !req || seen <= REQUIRES_DIST_LIMIT
    });
    if seen > REQUIRES_DIST_LIMIT {
        problems.push(ReadProblem::OverLimit {
            file: metadata_path.to_string(),
            what: "Requires-Dist lines",
            limit: REQUIRES_DIST_LIMIT as u64,
        });
    }
    let (reqs, bad) = metadata::parse_requires_dist(&headers);
    meta.requires_dist.extend(reqs);
    problems.extend(bad.into_iter().map(|b| ReadProblem::BadRequiresDist {
        metadata: metadata_path.to_string(),
        value: b.value,
        error: b.error,
    }));
}
