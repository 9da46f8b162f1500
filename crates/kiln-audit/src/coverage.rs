//! The kernel x target coverage matrix of one binary, with kernels that have identical target
//! sets folded into one row.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::facts::{Binary, EntryKind};

#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    pub file: String,
    /// Column order: SASS targets by number, then PTX targets.
    pub targets: Vec<String>,
    pub rows: Vec<CoverageRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CoverageRow {
    /// Kernels sharing exactly this target set (sorted).
    pub kernels: Vec<String>,
    /// One bool per column of [`Coverage::targets`].
    pub present: Vec<bool>,
}

fn target_key(t: &str) -> (u8, u32, String) {
    let (kind, rest) = if let Some(r) = t.strip_prefix("sm_") {
        (0, r)
    } else if let Some(r) = t.strip_prefix("compute_") {
        (1, r)
    } else {
        (2, t)
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    (kind, digits.parse().unwrap_or(0), t.to_string())
}

pub fn of(binary: &Binary) -> Option<Coverage> {
    let dev = binary.device.as_ref()?;
    let mut by_kernel: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut targets: BTreeSet<&str> = BTreeSet::new();
    for e in &dev.entries {
        if e.kind == EntryKind::Other {
            continue;
        }
        targets.insert(&e.target);
        for k in &e.kernels {
            by_kernel.entry(k).or_default().insert(&e.target);
        }
    }
    let mut targets: Vec<&str> = targets.into_iter().collect();
    targets.sort_by_key(|t| target_key(t));
    let mut folded: BTreeMap<Vec<bool>, Vec<String>> = BTreeMap::new();
    for (k, set) in by_kernel {
        let key: Vec<bool> = targets.iter().map(|t| set.contains(t)).collect();
        folded.entry(key).or_default().push(k.to_string());
    }
    let mut rows: Vec<CoverageRow> = folded
        .into_iter()
        .map(|(present, kernels)| CoverageRow { kernels, present })
        .collect();
    // Rows with gaps first: they are what the reader is looking for.
    rows.sort_by_key(|r| {
        (
            r.present.iter().filter(|p| **p).count(),
            r.kernels.first().cloned(),
        )
    });
    Some(Coverage {
        file: binary.path.clone(),
        targets: targets.into_iter().map(String::from).collect(),
        rows,
    })
}
