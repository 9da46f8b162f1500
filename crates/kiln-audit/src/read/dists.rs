//! The distributions of a directory input: every top-level `<name>-<version>.dist-info` read on
//! its own (a site-packages holds hundreds; pooling their tags judged numpy by another
//! package's manylinux tag), and which of them owns each file, from the RECORDs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::facts::{ReadProblem, WheelMeta};
use crate::read::dist_info::read_dist_info;

/// `.dist-info` directories read from one directory input; past this the rest is a problem
/// (a large ML environment has a few hundred).
pub const DIR_DIST_INFO_LIMIT: usize = 10_000;

/// Reads every top-level dist-info among `texts` (`<x>.dist-info/{RECORD,METADATA,WHEEL}` →
/// bytes), each into its own [`WheelMeta`], sorted by name.
pub fn read(texts: BTreeMap<String, Vec<u8>>, problems: &mut Vec<ReadProblem>) -> Vec<WheelMeta> {
    let mut by_dist: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    for (path, text) in texts {
        let Some((dist, _)) = path.split_once('/') else {
            continue;
        };
        if !by_dist.contains_key(dist) && by_dist.len() >= DIR_DIST_INFO_LIMIT {
            problems.push(ReadProblem::OverLimit {
                file: String::new(),
                what: ".dist-info directories",
                limit: DIR_DIST_INFO_LIMIT as u64,
            });
            break;
        }
        by_dist
            .entry(dist.to_string())
            .or_default()
            .insert(path, text);
    }
    by_dist
        .values()
        .map(|texts| read_dist_info(texts, None, problems))
        .collect()
}

/// Which distribution (index into `dists`) owns each of `paths`: the one whose RECORD lists it.
/// A directory holding exactly one dist-info without a RECORD (an unpacked wheel written by a
/// tool that skips it) owns every file; otherwise a path no RECORD lists is loose (None).
pub fn owners(dists: &[WheelMeta], paths: &[&str]) -> Vec<Option<usize>> {
    let unrecorded_single = dists.len() == 1 && dists[0].records.iter().all(|r| r.rows.is_none());
    if unrecorded_single {
        return vec![Some(0); paths.len()];
    }
    let wanted: BTreeSet<&str> = paths.iter().copied().collect();
    let mut owner: HashMap<&str, usize> = HashMap::new();
    for (i, d) in dists.iter().enumerate() {
        for rows in d.records.iter().filter_map(|r| r.rows.as_ref()) {
            for name in rows.keys() {
                // RECORD paths are relative to site-packages; `./` is tolerated by pip.
                let name = name.strip_prefix("./").unwrap_or(name);
                if let Some(p) = wanted.get(name) {
                    owner.entry(p).or_insert(i);
                }
            }
        }
    }
    paths.iter().map(|p| owner.get(p).copied()).collect()
}
