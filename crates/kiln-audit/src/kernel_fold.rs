//! Kernels folded by the set of targets they have: what the coverage matrix and the reach grid
//! are computed over. Built from sorted (kernel, target) pairs rather than a set per kernel, so
//! memory stays near the entries' own kernel lists (a PTX naming 400 k kernels costs a few MB
//! here, not a node-per-kernel map).

use std::collections::BTreeMap;

/// Distinct targets (sorted) and, per target set (indices into them), its kernels (sorted).
pub struct Folded<'a, T> {
    pub targets: Vec<T>,
    pub sets: BTreeMap<Vec<usize>, Vec<&'a str>>,
}

/// `entries`: each target with the kernels an entry for it holds.
pub fn fold<'a, T: Ord + Copy>(
    entries: impl Iterator<Item = (T, &'a [String])> + Clone,
) -> Folded<'a, T> {
    let mut targets: Vec<T> = entries.clone().map(|(t, _)| t).collect();
    targets.sort_unstable();
    targets.dedup();
    let mut pairs: Vec<(&str, usize)> = Vec::new();
    for (t, kernels) in entries {
        let i = targets.binary_search(&t).expect("collected above");
        pairs.extend(kernels.iter().map(|k| (k.as_str(), i)));
    }
    pairs.sort_unstable();
    pairs.dedup();
    let mut sets: BTreeMap<Vec<usize>, Vec<&str>> = BTreeMap::new();
    for group in pairs.chunk_by(|a, b| a.0 == b.0) {
        let key: Vec<usize> = group.iter().map(|p| p.1).collect();
        sets.entry(key).or_default().push(group[0].0);
    }
    Folded { targets, sets }
}
