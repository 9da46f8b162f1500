//! The JSON report under a size budget. The facts lists grow with the input (and with what its
//! compressed payloads inflate to: a 1 MB wheel can hold a fatbin whose PTX names millions of
//! kernels), so [`write`] stops listing items once the budget is spent and ends the report with
//! `"omitted"`: per list, how many items were left out. Counts and verdicts stay exact; plain
//! `serde_json::to_*` of a [`Report`] is unbounded and lists everything.
//!
//! The budget is checked before each list item, so the output exceeds it by at most one item's
//! scalars (its strings); every list inside an item is bounded the same way.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;

use crate::Report;

thread_local! {
    /// Bytes written so far by the [`write`] in progress on this thread.
    static WRITTEN: Cell<usize> = const { Cell::new(0) };
    /// Its budget; `usize::MAX` when no bounded write is in progress (everything is listed).
    static LIMIT: Cell<usize> = const { Cell::new(usize::MAX) };
    static OMITTED: RefCell<BTreeMap<&'static str, usize>> = const { RefCell::new(BTreeMap::new()) };
}

/// The default budget: 1 MiB, or the input's own size when that is larger (output linear in
/// the input, and big real wheels listed in full: cuDNN's 513 MB wheel gives 25 MB).
pub fn default_budget(input_bytes: u64) -> usize {
    usize::try_from(input_bytes)
        .unwrap_or(usize::MAX)
        .max(1 << 20)
}

/// What the lists leave of the budget for the closing brackets and `"omitted"` (22 lists at
/// most, each a short key and a count).
const RESERVE: usize = 8 << 10;

/// Writes `report` as pretty JSON of at most `budget` bytes (plus at most one item's strings),
/// listing items only while the budget lasts. Returns how many items were left out, per list
/// (also in the JSON).
pub fn write<W: Write>(
    out: W,
    report: &Report,
    budget: usize,
) -> io::Result<BTreeMap<&'static str, usize>> {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            LIMIT.set(usize::MAX);
            WRITTEN.set(0);
        }
    }
    let _reset = Reset;
    WRITTEN.set(0);
    LIMIT.set(budget.saturating_sub(RESERVE));
    OMITTED.with_borrow_mut(BTreeMap::clear);
    #[derive(Serialize)]
    struct Bounded<'a> {
        #[serde(flatten)]
        report: &'a Report,
        omitted: OmittedSoFar,
    }
    let mut ser = serde_json::Serializer::pretty(Counting(out));
    Bounded {
        report,
        omitted: OmittedSoFar,
    }
    .serialize(&mut ser)
    .map_err(io::Error::from)?;
    let mut out = ser.into_inner();
    writeln!(out)?;
    out.flush()?;
    Ok(OMITTED.with_borrow_mut(std::mem::take))
}

/// `kiln audit --json` as [`write`] prints it: the [`Report`] and `omitted`. Only its schema is
/// used ([`schema`]); [`write`] serializes the same two parts.
#[derive(schemars::JsonSchema)]
#[schemars(rename = "KilnAuditReport")]
#[allow(dead_code)]
struct Printed {
    #[serde(flatten)]
    report: Report,
    /// Per list (its path in the report), how many items the size budget left out.
    omitted: BTreeMap<String, usize>,
}

/// The JSON Schema (draft 2020-12) of `kiln audit --json`, derived from the report's types as
/// they serialize. Every object is closed (`additionalProperties: false`), so a field the types
/// print and the schema lacks, or the reverse, fails validation. docs/audit-json-schema.json is
/// this, written by `cargo xtask audit-schema`.
pub fn schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut value = generator.into_root_schema_for::<Printed>().to_value();
    close_objects(&mut value);
    value
}

fn close_objects(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), false.into());
            }
            map.values_mut().for_each(close_objects);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(close_objects),
        _ => {}
    }
}

/// Serialized after every list, so it holds what they left out.
struct OmittedSoFar;

impl Serialize for OmittedSoFar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        OMITTED.with_borrow(|m| m.serialize(s))
    }
}

struct Counting<W>(W);

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.0.write(buf)?;
        WRITTEN.set(WRITTEN.get().saturating_add(n));
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

fn list<T: Serialize, S: Serializer>(
    name: &'static str,
    items: &[T],
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(items.len()))?;
    for (i, item) in items.iter().enumerate() {
        if WRITTEN.get() >= LIMIT.get() {
            OMITTED.with_borrow_mut(|m| *m.entry(name).or_default() += items.len() - i);
            break;
        }
        seq.serialize_element(item)?;
    }
    seq.end()
}

/// One `serialize_with` function per growing list, named for where it sits in the report
/// (docs/audit-json-schema.md, "omitted").
macro_rules! bounded_lists {
    ($($fn_name:ident => $path:literal),* $(,)?) => {$(
        pub(crate) fn $fn_name<T: Serialize, S: Serializer>(
            items: &[T],
            s: S,
        ) -> Result<S::Ok, S::Error> {
            list($path, items, s)
        }
    )*};
}

bounded_lists! {
    findings => "findings",
    waived => "waived",
    binaries => "binaries",
    needed => "binaries[].elf.needed",
    runpath => "binaries[].elf.runpath",
    rpath => "binaries[].elf.rpath",
    dlopen => "binaries[].elf.dlopen",
    dlopen_sonames => "binaries[].elf.dlopen[].soname",
    dlopen_errors => "binaries[].elf.dlopen_errors",
    entries => "binaries[].device.entries",
    entry_kernels => "binaries[].device.entries[].kernels",
    entry_kernels_demangled => "binaries[].device.entries[].kernels_demangled",
    linkage => "linkage",
    dist_info => "wheel.dist_info",
    tags => "wheel.tags",
    requires_dist => "wheel.requires_dist",
    coverage => "coverage",
    coverage_rows => "coverage[].rows",
    coverage_kernels => "coverage[].rows[].kernels",
    coverage_present => "coverage[].rows[].present",
    reach_binaries => "reach.binaries",
    reach_cells => "reach.binaries[].cells",
    reach_whole => "reach.whole",
}

/// A target in JSON is its name ("sm_90a", "compute_120"): kiln-arch's `Display` (the
/// vocabulary crate carries no serde).
struct TargetName(crate::facts::Target);

impl Serialize for TargetName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

pub(crate) fn coverage_targets<S: Serializer>(
    items: &[crate::facts::Target],
    s: S,
) -> Result<S::Ok, S::Error> {
    let names: Vec<TargetName> = items.iter().copied().map(TargetName).collect();
    list("coverage[].targets", &names, s)
}
