//! The kernel x target coverage matrix of one binary, with kernels that have identical target
//! sets folded into one row; in a kiln-built binary, also by their declared arch gates (a row
//! says why its kernels are absent from the targets their gate leaves out).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::facts::{Binary, Target};

/// The kernel x target matrix of one binary.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Coverage {
    /// The binary's path in the input.
    pub file: String,
    /// Column order: SASS targets by number, then PTX targets (in JSON, their names).
    #[serde(serialize_with = "crate::json::coverage_targets")]
    #[schemars(with = "Vec<String>")]
    pub targets: Vec<Target>,
    /// Kernels with the same targets folded into one row.
    #[serde(serialize_with = "crate::json::coverage_rows")]
    pub rows: Vec<CoverageRow>,
    /// Why `rows` is empty although there are kernels: more targets than [`MAX_COLUMNS`]
    /// (the matrix would grow as kernels x targets; reach and the arch rules see every entry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_tabulated: Option<String>,
}

/// Most target columns one binary's matrix gets (real wheels have under 20).
pub const MAX_COLUMNS: usize = 64;

/// Kernels and the columns they have code for.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CoverageRow {
    /// Kernels sharing exactly this target set (sorted).
    #[serde(serialize_with = "crate::json::coverage_kernels")]
    pub kernels: Vec<String>,
    /// One bool per column of [`Coverage::targets`].
    #[serde(serialize_with = "crate::json::coverage_present")]
    pub present: Vec<bool>,
    /// A kiln-built binary's declared gate of these kernels: "gated: exists for sm_89, sm_90,
    /// compute_90 (declared)". Absent: not gated (meant for every target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
}

/// SASS before PTX, then by number, then by name (variants of one number together).
fn column_order(t: &Target) -> (kiln_pins::TargetKind, u32, String) {
    (t.kind, t.arch.number(), t.name())
}

/// The matrix of a binary with device code.
pub fn of(binary: &Binary) -> Option<Coverage> {
    let dev = binary.device.as_ref()?;
    let folded = crate::kernel_fold::fold(
        dev.entries
            .iter()
            .filter_map(|e| Some((e.target.device()?, e.kernels.as_slice()))),
    );
    // Column order differs from Target's own order: map each target index to its column.
    let mut targets = folded.targets.clone();
    targets.sort_by_key(column_order);
    if targets.len() > MAX_COLUMNS {
        let not_tabulated = Some(format!(
            "{} distinct targets: over the {MAX_COLUMNS}-column limit of the coverage matrix",
            targets.len()
        ));
        return Some(Coverage {
            file: binary.path.clone(),
            targets,
            rows: Vec::new(),
            not_tabulated,
        });
    }
    let column: Vec<usize> = folded
        .targets
        .iter()
        .map(|t| targets.iter().position(|c| c == t).expect("same targets"))
        .collect();
    let manifest = crate::gates::manifest(binary);
    let mut rows: Vec<CoverageRow> = Vec::new();
    for (key, kernels) in &folded.sets {
        let mut present = vec![false; targets.len()];
        for &i in key {
            present[column[i]] = true;
        }
        // Kernels of one target set under different gates (or none) get a row each.
        let mut by_gate: BTreeMap<Option<&[crate::facts::Target]>, Vec<String>> = BTreeMap::new();
        for k in kernels {
            let gate = manifest.and_then(|m| crate::gates::of(m, k));
            by_gate.entry(gate).or_default().push(k.to_string());
        }
        for (gate, kernels) in by_gate {
            rows.push(CoverageRow {
                kernels,
                present: present.clone(),
                gate: gate.map(crate::gates::note),
            });
        }
    }
    // Rows with gaps first: they are what the reader is looking for.
    rows.sort_by(|a, b| {
        let have = |r: &CoverageRow| r.present.iter().filter(|p| **p).count();
        have(a)
            .cmp(&have(b))
            .then_with(|| a.kernels.first().cmp(&b.kernels.first()))
    });
    Some(Coverage {
        file: binary.path.clone(),
        targets,
        rows,
        not_tabulated: None,
    })
}
