//! GPU reach: for every GPU generation (kiln-pins' table) and every binary with device code,
//! how its kernels get onto that GPU — exact SASS, compatible SASS, family SASS, PTX JIT — or
//! that they cannot. Two views of the same facts (docs/reach.md):
//! - per library (`path`): does the library run there — some code runs there, and every kernel
//!   meant for that GPU has a way there. Kernels specialised for other GPUs (built only for `a`
//!   or `f` targets, or named for an arch: `sm90_xmma_*`, `cutlass3x_sm100_*`) are run-time
//!   dispatch, not holes; in such a dispatching library so are kernels built for exactly one
//!   SASS target. Any other kernel is meant for every GPU from its lowest target up. A
//!   kiln-built binary (build manifest present) gets no such allowance: every kernel counts
//!   everywhere, except where the manifest declares an arch gate — a gated kernel is meant for
//!   the GPUs its gate's targets run on (crate::gates).
//! - per kernel (`kernel_path`): the worst kernel, every kernel counted.
//!
//! Generations whose GPUs only come with an Arm CPU (Jetson, DGX Spark) get no row when every
//! binary is built for x86_64. The compatibility rule is kiln-arch's `runs_on` (the doctor asks
//! the same one); its sources: docs/reach.md.

use std::collections::{BTreeMap, BTreeSet};

use kiln_pins::{CpuArch, GpuGeneration, Runs, Variant, GPU_GENERATIONS};
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

pub(crate) fn listed(name: &str) -> String {
    if name.chars().count() <= NAME_CHARS {
        return name.to_string();
    }
    name.chars().take(NAME_CHARS).collect::<String>() + "…"
}

/// The pseudo-kernel of a binary whose cubins' kernel lists were not read (`--no-kernels`).
pub const KERNELS_NOT_LISTED: &str = "(kernels not listed)";

/// One (generation, binary) cell, or (generation, whole input).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ReachCell {
    /// "9.0"
    pub generation: String,
    /// The generation as (major, minor).
    #[serde(skip)]
    pub capability: (u32, u32),
    /// Per library: the worst path over the kernels meant for this GPU; `none` when nothing
    /// runs here or some kernel meant for it has no way here (a hole).
    pub path: Path,
    /// When `path` relies on PTX: the oldest driver that JITs all of that PTX (absent: no driver
    /// in kiln's table does, or nothing needs the JIT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_driver: Option<u32>,
    /// Kernels with some way here.
    pub reached_count: usize,
    /// Holes: kernels meant for this GPU with no way here while other kernels of the binary do
    /// run here (first [`KERNELS_LISTED`], sorted; for the whole input "<binary>: <kernel>").
    pub holes: Vec<String>,
    /// Holes, all of them.
    pub holes_count: usize,
    /// Kernels specialised for other GPUs that have no code here: dispatch, not holes.
    pub dispatched_count: usize,
    /// Per kernel: the worst path over every kernel.
    pub kernel_path: Path,
    /// `min_driver` of the per-kernel view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_min_driver: Option<u32>,
    /// Kernels with no way there, whatever they are meant for (first [`KERNELS_LISTED`],
    /// sorted; for the whole input "<binary>: <kernel>").
    pub unreached: Vec<String>,
    /// Kernels with no way there, all of them.
    pub unreached_count: usize,
}

impl ReachCell {
    fn new(g: &GpuGeneration) -> ReachCell {
        ReachCell {
            generation: g.capability(),
            capability: (g.major, g.minor),
            path: Path::Exact,
            min_driver: None,
            reached_count: 0,
            holes: Vec::new(),
            holes_count: 0,
            dispatched_count: 0,
            kernel_path: Path::Exact,
            kernel_min_driver: None,
            unreached: Vec::new(),
            unreached_count: 0,
        }
    }
}

/// How one binary's kernels reach each GPU generation.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BinaryReach {
    /// The binary's path in the input.
    pub file: String,
    /// Distinct kernels it holds.
    pub kernels: usize,
    /// Kernels specialised for some GPUs (by their targets or their names; in a kiln-built
    /// binary only by a declared arch gate): dispatched at run time, holes only on the GPUs they
    /// are meant for.
    pub specialised: usize,
    /// Judged by kiln's own rule (its build manifest is present): every kernel everywhere, a
    /// gated kernel wherever its declared targets run.
    pub strict: bool,
    /// Lowest and highest capability among its targets, "8.0" / "12.0".
    pub lowest: String,
    /// See `lowest`.
    pub highest: String,
    /// The same range as numbers.
    #[serde(skip)]
    pub range: ((u32, u32), (u32, u32)),
    /// One cell per generation, in [`Reach::generations`] order.
    #[serde(serialize_with = "crate::json::reach_cells")]
    pub cells: Vec<ReachCell>,
}

/// A generation left out of the grid, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct OmittedGeneration {
    /// "11.0"
    pub generation: String,
    /// Why: its GPUs only come with another CPU than the binaries are built for.
    pub why: String,
}

/// GPU generations x binaries: how the kernels get onto each (docs/reach.md).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Reach {
    /// The generations, in row order: "7.5", "8.0", …
    pub generations: Vec<String>,
    /// The CPU architectures of the input's ELF binaries ("x86_64", "aarch64"); empty when none
    /// is known (a bare fatbin): then every generation has a row.
    pub cpu: Vec<String>,
    /// Generations with no row: their GPUs never sit next to a CPU the binaries run on.
    pub omitted: Vec<OmittedGeneration>,
    /// `--min-driver` when given: PTX that needs a newer driver is not a path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<u32>,
    /// False under `--no-kernels`: which kernel has which target was not read, so holes are
    /// unknown; the cells say only where some code of each binary runs.
    pub kernels_listed: bool,
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
/// list no kernel names (`--no-kernels`, or none named) counts as one kernel holding every
/// target.
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
        // Without cubins' lists, PTX names alone would make every cubin target kernel-less.
        let kernels: &[String] = if dev.kernels_listed {
            e.kernels.as_slice()
        } else {
            &[]
        };
        Some(((t, isa), kernels))
    });
    let folded = crate::kernel_fold::fold(readable);
    if folded.targets.is_empty() {
        return None;
    }
    let set_of = |key: &[usize]| key.iter().map(|&i| folded.targets[i]).collect();
    if folded.sets.is_empty() {
        let all: Vec<usize> = (0..folded.targets.len()).collect();
        let name = if dev.kernels_listed {
            "(all kernels)"
        } else {
            KERNELS_NOT_LISTED
        };
        return Some(BTreeMap::from([(set_of(&all), vec![name])]));
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

/// Bit `i` set: the kernel is meant for `GPU_GENERATIONS[i]`.
type Mask = u64;
const _: () = assert!(GPU_GENERATIONS.len() <= Mask::BITS as usize);

/// Arch tokens in a kernel name: "sm90" in `sm90_xmma_gemm_…`, "sm100" in `cutlass3x_sm100_…`,
/// "sm_89", "sm90a", "sm100f" — an `sm`, an optional `_`, two or three digits of a capability
/// nvcc knows and an optional `a`/`f`, not glued to a letter before or a letter or digit after
/// (a mangled name's length prefix, `13sm80_…`, may precede it).
pub fn arch_tokens(name: &str) -> Vec<(u32, Variant)> {
    let b = name.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = name[i..].find("sm").map(|x| x + i) {
        i = at + 2;
        if at > 0 && b[at - 1].is_ascii_alphabetic() {
            continue;
        }
        let mut j = at + 2;
        if b.get(j) == Some(&b'_') {
            j += 1;
        }
        let digits = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(2..=3).contains(&digits) {
            continue;
        }
        let Ok(number) = name[j..j + digits].parse::<u32>() else {
            continue;
        };
        let mut k = j + digits;
        let variant = match b.get(k) {
            Some(b'a') => Variant::ArchSpecific,
            Some(b'f') => Variant::Family,
            _ => Variant::Plain,
        };
        if variant != Variant::Plain {
            k += 1;
        }
        if b.get(k).is_some_and(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        // "sm12" is no arch: only capabilities nvcc knows count.
        if kiln_pins::KNOWN_CAPABILITIES.contains(&(number / 10, number % 10)) {
            out.push((number, variant));
        }
    }
    out
}

/// Architecture words in a kernel name, not glued to a letter on either side, as the GPUs they
/// name (NVIDIA's architecture names, kiln-arch's table): turing 7.5; ampere 8.0, 8.6, 8.7;
/// ada 8.9; hopper 9.0; blackwell 10.x, 11.0, 12.x; volta (7.0) has no row. None: no word.
fn arch_words(name: &str) -> Option<Mask> {
    const WORDS: &[(&str, &[(u32, u32)])] = &[
        ("volta", &[(7, 0)]),
        ("turing", &[(7, 5)]),
        ("ampere", &[(8, 0), (8, 6), (8, 7)]),
        ("ada", &[(8, 9)]),
        ("hopper", &[(9, 0)]),
        ("blackwell", &[(10, 0), (10, 3), (11, 0), (12, 0), (12, 1)]),
    ];
    let lower = name.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut mask = None;
    for (word, caps) in WORDS {
        let mut from = 0;
        while let Some(at) = lower[from..].find(word).map(|x| x + from) {
            from = at + word.len();
            let before = at > 0 && b[at - 1].is_ascii_alphabetic();
            let after = b.get(from).is_some_and(|c| c.is_ascii_alphabetic());
            if before || after {
                continue;
            }
            let m = mask.get_or_insert(0);
            for (i, g) in GPU_GENERATIONS.iter().enumerate() {
                if caps.contains(&(g.major, g.minor)) {
                    *m |= 1 << i;
                }
            }
        }
    }
    mask
}

/// The generations a specialised kernel is meant for: where its `a`/`f`-only targets run, and
/// the GPUs its name's arch tokens and words denote (an `f` token: the family). A name that
/// denotes only GPUs none of the kernel's targets runs on names the kernel's instruction style,
/// not its GPU: cuDNN 9.28.1.4 builds 657 `sm80_xmma_*` kernels only for sm_90a, sm_100f or
/// sm_120f (Ampere-style mma tiles for newer GPUs, beside other `sm80_xmma_*` built for sm_80);
/// such a kernel is meant for where its targets run. None: a general kernel.
fn specialised(set: &BTreeSet<KernelTarget>, name: &str) -> Option<Mask> {
    let runs = runs_mask(set);
    let only_specific =
        !set.is_empty() && set.iter().all(|(t, _)| t.arch.variant != Variant::Plain);
    // cuDNN names some kernels by architecture word: `_5x_cudnn_turing_fp16_…`, `…_ampere_…`.
    let mut named = arch_words(name);
    for (number, variant) in arch_tokens(name) {
        let (major, minor) = (number / 10, number % 10);
        let m = GPU_GENERATIONS
            .iter()
            .enumerate()
            .filter(|(_, g)| {
                g.major == major
                    && match variant {
                        Variant::Family => g.minor >= minor,
                        _ => g.minor == minor,
                    }
            })
            .fold(0, |m, (i, _)| m | 1 << i);
        named = Some(named.unwrap_or(0) | m);
    }
    match named {
        Some(n) if n & runs == 0 => Some(runs),
        Some(n) if only_specific => Some(n | runs),
        Some(n) => Some(n),
        None => only_specific.then_some(runs),
    }
}

/// The generations some target of `set` runs on.
fn runs_mask(set: &BTreeSet<KernelTarget>) -> Mask {
    GPU_GENERATIONS
        .iter()
        .enumerate()
        .filter(|(_, g)| {
            set.iter()
                .any(|(t, _)| kiln_pins::runs_on(*t, g.major, g.minor).is_some())
        })
        .fold(0, |m, (i, _)| m | 1 << i)
}

/// The generations a gated kernel of a kiln-built binary is meant for: where the targets its
/// gate declares run (the same `runs_on` as its code's paths), whatever the bytes hold — a
/// declared target without the kernel's code stays a hole. None: not gated.
fn gate_mask(manifest: &kiln_manifest::Manifest, kernel: &str) -> Option<Mask> {
    let declared: BTreeSet<KernelTarget> =
        crate::gates::targets(crate::gates::of(manifest, kernel)?)
            .map(|t| (t, None))
            .collect();
    Some(runs_mask(&declared))
}

/// Where a kernel built for exactly one SASS target (and no PTX) runs: the GPUs that target
/// is meant for when its library dispatches per GPU. None for any other set.
fn single_sass(set: &BTreeSet<KernelTarget>) -> Option<Mask> {
    match set.first() {
        Some((t, _)) if set.len() == 1 && t.kind != TargetKind::Ptx => Some(runs_mask(set)),
        _ => None,
    }
}

/// The reach of one binary over `gens` (indices into [`GPU_GENERATIONS`]); None without
/// readable device code.
fn of_binary(binary: &Binary, gens: &[usize], driver: Option<u32>) -> Option<BinaryReach> {
    let sets = kernel_sets(binary)?;
    let manifest = crate::gates::manifest(binary);
    let strict = manifest.is_some();
    let targets: BTreeSet<(u32, u32)> = sets.keys().flatten().map(|(t, _)| capability(t)).collect();
    let (lo, hi) = (targets.first()?, targets.last()?);
    let kernels = sets.values().map(Vec::len).sum();
    // A library that dispatches per GPU (some kernel specialised by its targets or its name)
    // also specialises kernels it compiles for exactly one of its SASS targets: cuDNN 9.28's
    // sm_75-only `dgrad_1d<9>`/`dgrad_2d<11>` are Turing's, not missing on 8.0 and up. A
    // library with no sign of dispatch keeps the general rule, so a kernel compiled out of
    // every target but one is still a hole there; the per-kernel view counts it either way.
    let dispatching = !strict
        && targets.len() > 1
        && sets
            .iter()
            .any(|(set, names)| names.iter().any(|n| specialised(set, n).is_some()));
    let (groups, specialised_count) = meant_groups(&sets, manifest, dispatching);
    let cells = gens
        .iter()
        .map(|&gi| binary_cell(&groups, gi, driver))
        .collect();
    Some(BinaryReach {
        file: binary.path.clone(),
        kernels,
        specialised: specialised_count,
        strict,
        lowest: format!("{}.{}", lo.0, lo.1),
        highest: format!("{}.{}", hi.0, hi.1),
        range: (*lo, *hi),
        cells,
    })
}

/// Kernels with the same target set and the same GPUs they are meant for (None: every GPU).
type Group<'a> = (&'a BTreeSet<KernelTarget>, Option<Mask>, Vec<&'a str>);

/// Per set, per kernel: what it is meant for (strict, a kiln-built binary: everything, or its
/// declared gate); with how many kernels are specialised.
fn meant_groups<'a>(
    sets: &'a BTreeMap<BTreeSet<KernelTarget>, Vec<&'a str>>,
    manifest: Option<&kiln_manifest::Manifest>,
    dispatching: bool,
) -> (Vec<Group<'a>>, usize) {
    let strict = manifest.is_some();
    let mut groups: Vec<Group> = Vec::new();
    let mut specialised_count = 0;
    for (set, names) in sets {
        let mut by_mask: BTreeMap<Option<Mask>, Vec<&str>> = BTreeMap::new();
        // A general kernel is meant for every GPU from its lowest target up: one built only
        // from sm_90 on (NCCL's fp8 reductions) is gated by arch, not missing below it.
        let from = set.iter().map(|(t, _)| capability(t)).min();
        let from_lowest: Option<Mask> = from.map(|lo| {
            GPU_GENERATIONS
                .iter()
                .enumerate()
                .filter(|(_, g)| (g.major, g.minor) >= lo)
                .fold(0, |m, (i, _)| m | 1 << i)
        });
        let single_sass = single_sass(set).filter(|_| dispatching);
        for name in names {
            let m = match manifest {
                // kiln's rule: no guessing from names or targets, only what the build declared.
                Some(manifest) => gate_mask(manifest, name),
                None => specialised(set, name).or(single_sass),
            };
            if m.is_some() {
                specialised_count += 1;
            }
            let meant = if strict { m } else { m.or(from_lowest) };
            by_mask.entry(meant).or_default().push(name);
        }
        for (m, names) in by_mask {
            groups.push((set, m, names));
        }
    }
    (groups, specialised_count)
}

/// One binary's cell for generation `gi`: how its kernels reach it, and which are holes.
fn binary_cell(groups: &[Group], gi: usize, driver: Option<u32>) -> ReachCell {
    let g = &GPU_GENERATIONS[gi];
    let mut cell = ReachCell::new(g);
    let mut unreached: Vec<&str> = Vec::new();
    let mut holes: Vec<&str> = Vec::new();
    let (mut meant_reaching, mut other) = (false, (Path::Exact, None, false));
    for (set, mask, names) in groups {
        let (p, d) = best(set, g, driver);
        let meant = mask.is_none_or(|m| m & (1 << gi) != 0);
        cell.kernel_path = cell.kernel_path.max(p);
        if p == Path::None {
            cell.unreached_count += names.len();
            unreached.extend(names.iter().copied());
            if meant {
                cell.holes_count += names.len();
                holes.extend(names.iter().copied());
            } else {
                cell.dispatched_count += names.len();
            }
            continue;
        }
        cell.reached_count += names.len();
        let d = if p == Path::Ptx { d } else { None };
        cell.kernel_min_driver = max_some(cell.kernel_min_driver, d);
        if meant {
            meant_reaching = true;
            cell.path = cell.path.max(p);
            cell.min_driver = max_some(cell.min_driver, d);
        } else {
            other = (other.0.max(p), max_some(other.1, d), true);
        }
    }
    if cell.reached_count == 0 {
        // Nothing runs here: the library does not cover this GPU; holes are kernels
        // missing where the rest of the library runs.
        cell.path = Path::None;
        cell.holes_count = 0;
        holes.clear();
    } else if cell.holes_count > 0 {
        cell.path = Path::None;
    } else if !meant_reaching && other.2 {
        // Only kernels specialised for other GPUs run here: that code is what runs.
        (cell.path, cell.min_driver) = (other.0, other.1);
    }
    clear_drivers_without_path(&mut cell);
    for (list, names) in [
        (&mut cell.unreached, &mut unreached),
        (&mut cell.holes, &mut holes),
    ] {
        names.sort_unstable();
        *list = names
            .iter()
            .take(KERNELS_LISTED)
            .map(|k| listed(k))
            .collect();
    }
    cell
}

/// No driver minimum where nothing runs.
fn clear_drivers_without_path(cell: &mut ReachCell) {
    if cell.path == Path::None {
        cell.min_driver = None;
    }
    if cell.kernel_path == Path::None {
        cell.kernel_min_driver = None;
    }
}

/// The CPU architectures of the input's ELF binaries.
fn cpus(binaries: &[Binary]) -> BTreeSet<CpuArch> {
    binaries
        .iter()
        .filter_map(|b| b.elf.as_ref())
        .filter_map(|e| CpuArch::from_elf_machine(e.machine))
        .collect()
}

/// The reach of every binary with device code, and of the input as a whole.
pub fn of(binaries: &[Binary], driver: Option<u32>) -> Reach {
    let cpu = cpus(binaries);
    let (gens, omitted) = generations(&cpu);
    let kernels_listed = binaries
        .iter()
        .filter_map(|b| b.device.as_ref())
        .all(|d| d.kernels_listed);
    let binaries: Vec<BinaryReach> = binaries
        .iter()
        .filter_map(|b| of_binary(b, &gens, driver))
        .collect();
    let whole = gens
        .iter()
        .enumerate()
        .map(|(row, &gi)| whole_cell(&binaries, row, gi))
        .collect();
    Reach {
        generations: gens
            .iter()
            .map(|&i| GPU_GENERATIONS[i].capability())
            .collect(),
        cpu: cpu.iter().map(|c| c.as_str().to_string()).collect(),
        omitted,
        driver,
        kernels_listed,
        binaries,
        whole,
    }
}

/// The generations (indices into [`GPU_GENERATIONS`]) that come with one of the binaries' CPU
/// architectures (all, when no binary names one), and why each other one is left out.
fn generations(cpu: &BTreeSet<CpuArch>) -> (Vec<usize>, Vec<OmittedGeneration>) {
    let mut gens = Vec::new();
    let mut omitted = Vec::new();
    for (i, g) in GPU_GENERATIONS.iter().enumerate() {
        if cpu.is_empty() || cpu.iter().any(|c| g.host.admits(*c)) {
            gens.push(i);
        } else {
            let names: Vec<&str> = cpu.iter().map(|c| c.as_str()).collect();
            omitted.push(OmittedGeneration {
                generation: g.capability(),
                why: format!(
                    "{} ({}) only comes with an Arm (aarch64) CPU; the binaries are {}",
                    g.capability(),
                    g.products,
                    names.join(", ")
                ),
            });
        }
    }
    (gens, omitted)
}

/// The input's cell for generation `gi` (row `row` of every binary's cells): the best path,
/// the counts summed, the first [`KERNELS_LISTED`] kernels named with their file.
fn whole_cell(binaries: &[BinaryReach], row: usize, gi: usize) -> ReachCell {
    let mut cell = ReachCell::new(&GPU_GENERATIONS[gi]);
    if binaries.is_empty() {
        cell.path = Path::None;
        cell.kernel_path = Path::None;
    }
    for b in binaries {
        let c = &b.cells[row];
        cell.path = cell.path.max(c.path);
        cell.kernel_path = cell.kernel_path.max(c.kernel_path);
        cell.min_driver = max_some(cell.min_driver, c.min_driver);
        cell.kernel_min_driver = max_some(cell.kernel_min_driver, c.kernel_min_driver);
        cell.reached_count += c.reached_count;
        cell.dispatched_count += c.dispatched_count;
        cell.unreached_count += c.unreached_count;
        cell.holes_count += c.holes_count;
        for (list, from) in [
            (&mut cell.unreached, &c.unreached),
            (&mut cell.holes, &c.holes),
        ] {
            let room = KERNELS_LISTED.saturating_sub(list.len());
            list.extend(from.iter().take(room).map(|k| format!("{}: {k}", b.file)));
        }
    }
    clear_drivers_without_path(&mut cell);
    cell
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
