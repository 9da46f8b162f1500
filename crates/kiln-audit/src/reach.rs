//! GPU reach: for every GPU generation (kiln-pins' table) and every binary with device code,
//! how each kernel gets onto that GPU — exact SASS, compatible SASS, family SASS, PTX JIT — or
//! that it cannot. Computed per kernel; a binary reaches a generation only as well as its
//! worst kernel. The compatibility rule is kiln-arch's `runs_on` (the doctor asks the same
//! one); its sources: docs/reach.md.

use std::collections::{BTreeMap, BTreeSet};

use kiln_pins::{GpuGeneration, Runs, Variant, GPU_GENERATIONS};
use serde::Serialize;

use crate::facts::{Binary, EntryKind, Target, TargetKind};

/// How kernels get onto a GPU, best first (the driver prefers SASS over a JIT).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Path {
    /// SASS for exactly this capability (any variant).
    Exact,
    /// Plain SASS of the same major and a lower minor.
    Compatible,
    /// `f` SASS of the same family (same major, lower minor).
    Family,
    /// PTX the driver JIT-compiles.
    Ptx,
    /// No way there.
    None,
}

impl Path {
    /// "exact", "compatible", "family", "ptx", "none".
    pub fn as_str(self) -> &'static str {
        match self {
            Path::Exact => "exact",
            Path::Compatible => "compatible",
            Path::Family => "family",
            Path::Ptx => "ptx",
            Path::None => "none",
        }
    }
}

/// Kernel names listed per cell; the count stays exact.
pub const KERNELS_LISTED: usize = 20;

/// Characters of one listed name: a cell repeats names the coverage matrix already holds in
/// full, so output stays bounded by the input even for hostile megabyte-long symbols.
pub const NAME_CHARS: usize = 512;

fn listed(name: &str) -> String {
    if name.chars().count() <= NAME_CHARS {
        return name.to_string();
    }
    name.chars().take(NAME_CHARS).collect::<String>() + "…"
}

/// One (generation, binary) cell, or (generation, whole input).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ReachCell {
    /// "9.0"
    pub generation: String,
    /// The generation as (major, minor).
    #[serde(skip)]
    pub capability: (u32, u32),
    /// The worst path over the kernels.
    pub path: Path,
    /// When some kernel gets there only by PTX: the oldest driver that JITs all of that PTX
    /// (null: no driver in kiln's table does, or no kernel needs the JIT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_driver: Option<u32>,
    /// Kernels with no way there (first [`KERNELS_LISTED`], sorted; for the whole input
    /// "<binary>: <kernel>").
    pub unreached: Vec<String>,
    /// Kernels with no way there, all of them.
    pub unreached_count: usize,
}

/// How one binary's kernels reach each GPU generation.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BinaryReach {
    /// The binary's path in the input.
    pub file: String,
    /// Distinct kernels it holds.
    pub kernels: usize,
    /// Lowest and highest capability among its targets, "8.0" / "12.0".
    pub lowest: String,
    /// See `lowest`.
    pub highest: String,
    /// The same range as numbers.
    #[serde(skip)]
    pub range: ((u32, u32), (u32, u32)),
    /// One cell per generation, in [`GPU_GENERATIONS`] order.
    #[serde(serialize_with = "crate::json::reach_cells")]
    pub cells: Vec<ReachCell>,
}

/// GPU generations x binaries: how the kernels get onto each (docs/reach.md).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Reach {
    /// The generations, in row order: "7.5", "8.0", …
    pub generations: Vec<String>,
    /// `--min-driver` when given: PTX that needs a newer driver is not a path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<u32>,
    /// One row per binary with device code.
    #[serde(serialize_with = "crate::json::reach_binaries")]
    pub binaries: Vec<BinaryReach>,
    /// The input as a whole: per generation the worst cell of any binary.
    #[serde(serialize_with = "crate::json::reach_whole")]
    pub whole: Vec<ReachCell>,
}

/// A target one kernel has, with the PTX ISA of a PTX target.
type KernelTarget = (Target, Option<(u32, u32)>);

/// What every kernel of a binary has, kernels with identical sets folded. A binary whose cubins
/// list no kernel names (`--no-kernels`) counts as one kernel holding every target.
fn kernel_sets(binary: &Binary) -> Option<BTreeMap<BTreeSet<KernelTarget>, Vec<&str>>> {
    let dev = binary.device.as_ref()?;
    let readable = dev.entries.iter().filter_map(|e| {
        // Unreadable or relabelled entries prove no target (as in the arch rules).
        if e.error.is_some() || e.label_mismatch.is_some() || e.kind == EntryKind::Other {
            return None;
        }
        let t = e.target.device()?;
        let isa = if t.kind == TargetKind::Ptx {
            e.ptx_isa_num
        } else {
            None
        };
        Some(((t, isa), e.kernels.as_slice()))
    });
    let folded = crate::kernel_fold::fold(readable);
    if folded.targets.is_empty() {
        return None;
    }
    let set_of = |key: &[usize]| key.iter().map(|&i| folded.targets[i]).collect();
    if folded.sets.is_empty() {
        let all: Vec<usize> = (0..folded.targets.len()).collect();
        return Some(BTreeMap::from([(set_of(&all), vec!["(all kernels)"])]));
    }
    Some(
        folded
            .sets
            .iter()
            .map(|(key, names)| (set_of(key), names.clone()))
            .collect(),
    )
}

/// The best way one target takes onto `g`, with the driver a PTX path needs (`Err` when the
/// PTX is not admitted by `driver`). None: this target does not run there.
fn path_of(
    (t, isa): &KernelTarget,
    g: &GpuGeneration,
    driver: Option<u32>,
) -> Option<(Path, Option<u32>)> {
    match kiln_pins::runs_on(*t, g.major, g.minor)? {
        Runs::Exact => Some((Path::Exact, None)),
        Runs::Compatible => Some((Path::Compatible, None)),
        Runs::Family => Some((Path::Family, None)),
        Runs::Jit => {
            let needs = isa
                .and_then(kiln_pins::oldest_driver_for_ptx_isa)
                .map(|row| row.driver);
            match (driver, needs) {
                (Some(have), Some(need)) if need > have => None,
                // ISA unknown to the table: no stated driver can be shown to JIT it.
                (Some(_), None) => None,
                _ => Some((Path::Ptx, needs)),
            }
        }
    }
}

/// One kernel's best path onto `g`; for PTX the oldest driver among the PTX entries that reach.
fn best(
    set: &BTreeSet<KernelTarget>,
    g: &GpuGeneration,
    driver: Option<u32>,
) -> (Path, Option<u32>) {
    let mut out = (Path::None, None);
    for kt in set {
        if let Some((p, d)) = path_of(kt, g, driver) {
            out = match p.cmp(&out.0) {
                std::cmp::Ordering::Less => (p, d),
                std::cmp::Ordering::Equal => (p, min_some(out.1, d)),
                std::cmp::Ordering::Greater => out,
            };
        }
    }
    out
}

fn min_some(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn max_some(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn capability(t: &Target) -> (u32, u32) {
    (t.arch.major, t.arch.minor)
}

/// The reach of one binary; None without readable device code.
pub fn of_binary(binary: &Binary, driver: Option<u32>) -> Option<BinaryReach> {
    let sets = kernel_sets(binary)?;
    let targets: BTreeSet<(u32, u32)> = sets.keys().flatten().map(|(t, _)| capability(t)).collect();
    let (lo, hi) = (targets.first()?, targets.last()?);
    let kernels = sets.values().map(Vec::len).sum();
    let cells = GPU_GENERATIONS
        .iter()
        .map(|g| {
            let mut cell = ReachCell {
                generation: g.capability(),
                capability: (g.major, g.minor),
                path: Path::Exact,
                min_driver: None,
                unreached: Vec::new(),
                unreached_count: 0,
            };
            let mut unreached: Vec<&str> = Vec::new();
            for (set, names) in &sets {
                let (p, d) = best(set, g, driver);
                cell.path = cell.path.max(p);
                if p == Path::None {
                    cell.unreached_count += names.len();
                    unreached.extend(names.iter().copied());
                } else if p == Path::Ptx {
                    cell.min_driver = max_some(cell.min_driver, d);
                }
            }
            unreached.sort_unstable();
            cell.unreached = unreached
                .iter()
                .take(KERNELS_LISTED)
                .map(|k| listed(k))
                .collect();
            if cell.path == Path::None {
                cell.min_driver = None;
            }
            cell
        })
        .collect();
    Some(BinaryReach {
        file: binary.path.clone(),
        kernels,
        lowest: format!("{}.{}", lo.0, lo.1),
        highest: format!("{}.{}", hi.0, hi.1),
        range: (*lo, *hi),
        cells,
    })
}

/// The reach of every binary with device code, and of the input as a whole.
pub fn of(binaries: &[Binary], driver: Option<u32>) -> Reach {
    let binaries: Vec<BinaryReach> = binaries
        .iter()
        .filter_map(|b| of_binary(b, driver))
        .collect();
    let whole = GPU_GENERATIONS
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut cell = ReachCell {
                generation: g.capability(),
                capability: (g.major, g.minor),
                path: if binaries.is_empty() {
                    Path::None
                } else {
                    Path::Exact
                },
                min_driver: None,
                unreached: Vec::new(),
                unreached_count: 0,
            };
            for b in &binaries {
                let c = &b.cells[i];
                cell.path = cell.path.max(c.path);
                cell.min_driver = max_some(cell.min_driver, c.min_driver);
                cell.unreached_count += c.unreached_count;
                let room = KERNELS_LISTED.saturating_sub(cell.unreached.len());
                cell.unreached.extend(
                    c.unreached
                        .iter()
                        .take(room)
                        .map(|k| format!("{}: {k}", b.file)),
                );
            }
            if cell.path == Path::None {
                cell.min_driver = None;
            }
            cell
        })
        .collect();
    Reach {
        generations: GPU_GENERATIONS
            .iter()
            .map(GpuGeneration::capability)
            .collect(),
        driver,
        binaries,
        whole,
    }
}

/// Kernels of a binary with no PTX and only `a` or `f` SASS: nothing beyond their own arch or
/// family can run them (first [`KERNELS_LISTED`], and the count).
pub fn without_forward_path(binary: &Binary) -> (Vec<String>, usize) {
    let Some(sets) = kernel_sets(binary) else {
        return (Vec::new(), 0);
    };
    let mut names: Vec<&str> = Vec::new();
    let mut count = 0;
    for (set, ks) in &sets {
        let no_ptx = set.iter().all(|(t, _)| t.kind == TargetKind::Sass);
        let only_specific = set.iter().all(|(t, _)| t.arch.variant != Variant::Plain);
        if no_ptx && only_specific {
            count += ks.len();
            names.extend(ks.iter().copied());
        }
    }
    names.sort_unstable();
    let listed = names
        .iter()
        .take(KERNELS_LISTED)
        .map(|k| listed(k))
        .collect();
    (listed, count)
}
