//! Device code of one ELF: every fatbin container and entry, with kernels and PTX ISA.
//! Headers are read first (cheap); payloads are then decompressed in parallel.

use kiln_fatbin::container;
use kiln_pins::{Target, Variant};
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::read::error::ReadError;

/// The device code found in one binary.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DeviceCode {
    /// Fatbin containers read.
    pub containers: usize,
    /// Every entry of every container, in file order.
    #[serde(serialize_with = "crate::json::entries")]
    pub entries: Vec<EntryFacts>,
    /// Whether cubins' kernel lists were read (false under `--no-kernels`: then which kernel
    /// has which target is unknown, and reach is per binary only).
    #[serde(skip)]
    pub kernels_listed: bool,
}

/// What a fatbin entry holds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// Machine code (SASS) for one GPU.
    Cubin,
    /// PTX, JIT-compiled by the driver.
    Ptx,
    /// Anything else (e.g. LTO IR).
    Other,
}

impl EntryKind {
    /// The JSON spelling: "cubin", "ptx", "other".
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Cubin => "cubin",
            EntryKind::Ptx => "ptx",
            EntryKind::Other => "other",
        }
    }
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an entry's payload is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Stored as is.
    None,
    /// LZ4-compressed (nvcc's default).
    Lz4,
    /// Zstandard-compressed (`-compress-mode`).
    Zstd,
}

impl Compression {
    /// The JSON spelling: "none", "lz4", "zstd".
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// What an entry is for: a SASS or PTX target, or an entry kind kiln does not read (named
/// `kind<K>_<sm><variant>` in text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryTarget {
    /// A SASS or PTX target.
    Device(Target),
    /// An entry kind kiln does not read.
    Other {
        /// The entry header's kind field.
        kind: u16,
        /// The header's architecture number.
        sm: u32,
        /// The header's `a`/`f` flags.
        variant: Variant,
    },
}

impl EntryTarget {
    /// The SASS or PTX target, when the entry is one.
    pub fn device(&self) -> Option<Target> {
        match self {
            EntryTarget::Device(t) => Some(*t),
            EntryTarget::Other { .. } => None,
        }
    }
}

impl std::fmt::Display for EntryTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntryTarget::Device(t) => t.fmt(f),
            EntryTarget::Other { kind, sm, variant } => {
                write!(f, "kind{kind}_{sm}{}", variant.suffix())
            }
        }
    }
}

impl Serialize for EntryTarget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

fn variant_suffix<S: serde::Serializer>(v: &Variant, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.suffix())
}

/// One fatbin entry: what it is for, how it is stored, which kernels it holds.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EntryFacts {
    /// Index of its container in [`DeviceCode::containers`] order.
    pub container: usize,
    /// Offset of the entry header inside `.nv_fatbin`.
    pub offset: usize,
    /// Cubin, PTX or other.
    pub kind: EntryKind,
    /// Exact target with its `a`/`f` variant; in JSON "sm_100f", "compute_120".
    #[schemars(with = "String")]
    pub target: EntryTarget,
    /// Compute capability number (100 for sm_100f).
    pub sm: u32,
    /// In JSON "", "a" or "f".
    #[serde(serialize_with = "variant_suffix")]
    #[schemars(with = "String")]
    pub variant: Variant,
    /// How the payload is stored.
    pub compression: Compression,
    /// Payload bytes as stored.
    pub stored_size: usize,
    /// Payload bytes once decompressed.
    pub size: u64,
    /// Kernel entry symbols (cubin) or `.entry` names (PTX).
    #[serde(serialize_with = "crate::json::entry_kernels")]
    pub kernels: Vec<String>,
    /// The data section this entry was found in, when not `.nv_fatbin`: device code the
    /// library loads itself, which the CUDA runtime does not register.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// `kernels[i]` demangled (C++ or Rust), null where the name is not mangled; absent when
    /// no name is.
    #[serde(
        skip_serializing_if = "no_mangled_name",
        serialize_with = "crate::json::entry_kernels_demangled"
    )]
    pub kernels_demangled: Vec<Option<String>>,
    /// PTX `.version` as "9.0".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ptx_isa: Option<String>,
    /// `ptx_isa` as numbers.
    #[serde(skip)]
    pub ptx_isa_num: Option<(u32, u32)>,
    /// The entry header names one target, the payload itself another (a cubin's ELF `e_flags`,
    /// PTX `.target`): how. The driver goes by the payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_mismatch: Option<String>,
    /// Why the payload could not be read; the entry is still listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Bytes all compressed entries of one section may inflate to together: a fixed allowance plus
/// 64x the section. Real CUDA 13 `--compress-mode=size` fatbins inflate a few times; zstd can
/// claim 32768x, so without a budget 1 MB of hostile entries would inflate to ~32 GB.
fn decompression_budget(section_len: usize) -> u64 {
    (128u64 << 20).saturating_add((section_len as u64).saturating_mul(64))
}

/// Inflated bytes held at once by all threads together: past it, a thread waits for others to
/// finish their entries (one entry alone always proceeds). NCCL 2.30.7's four 98–130 MB cubins
/// inflating two at a time were most of its 238 MB peak; decoded one at a time it peaks at
/// ~165 MB and takes ~0.3 s longer. This keeps the audit's memory independent of the core
/// count.
const IN_FLIGHT_LIMIT: u64 = 96 << 20;

static IN_FLIGHT: InFlight = InFlight {
    held: std::sync::Mutex::new(0),
    freed: std::sync::Condvar::new(),
};

struct InFlight {
    held: std::sync::Mutex<u64>,
    freed: std::sync::Condvar,
}

struct Room(u64);

impl InFlight {
    fn reserve(&'static self, n: u64) -> Room {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while *held > 0 && *held + n > IN_FLIGHT_LIMIT {
            held = self.freed.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        *held += n;
        Room(n)
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        let mut held = IN_FLIGHT.held.lock().unwrap_or_else(|p| p.into_inner());
        *held -= self.0;
        IN_FLIGHT.freed.notify_all();
    }
}

/// Compressed cubins larger than this are read sparse (kiln_fatbin::sparse); smaller ones are
/// decoded whole into the thread's reused buffer, which is cheaper.
const SPARSE_FROM: u64 = 8 << 20;

/// Takes `n` bytes from the budget; false (nothing taken) when fewer are left.
fn take(budget: &AtomicU64, n: u64) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            left.checked_sub(n)
        })
        .is_ok()
}

/// Reads a `.nv_fatbin` section. Err: the container structure itself is broken.
pub fn read(section: &[u8], list_kernels: bool) -> Result<DeviceCode, ReadError> {
    read_with(section, list_kernels, false)
}

/// [`read`]; `mapped`: the section lies in a spilled member's mapping, and each entry's pages
/// are handed back once it is read.
pub fn read_with(
    section: &[u8],
    list_kernels: bool,
    mapped: bool,
) -> Result<DeviceCode, ReadError> {
    read_to(section, Depth::listing(list_kernels), mapped)
}

/// Reads `__nv_relfatbin`: each entry's header only. Relocatable device code is input for a
/// device link that the driver never loads, so its payloads prove nothing; decoding them was
/// NCCL 2.30.7's second-largest cost (a 127 MB section).
pub fn read_relocatable(section: &[u8], mapped: bool) -> Result<DeviceCode, ReadError> {
    read_to(section, Depth::Headers, mapped)
}

/// How far each entry is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    /// The entry header: kind, target, sizes, the PTX ISA the header states.
    Headers,
    /// PTX text too (its ISA and `.target` are checked against the header); cubins by header.
    Ptx,
    /// Every payload: cubins' own ELF headers, notes and kernels, PTX `.entry` names.
    Kernels,
}

impl Depth {
    fn listing(list_kernels: bool) -> Depth {
        if list_kernels {
            Depth::Kernels
        } else {
            Depth::Ptx
        }
    }
}

fn read_to(section: &[u8], depth: Depth, mapped: bool) -> Result<DeviceCode, ReadError> {
    let containers = container::parse(section)?;
    // Parsing touched a page (and the kernel maps its neighbours) per entry header across the
    // whole section: hand them back before the payloads are read (most of the 115 MB that stayed
    // resident on cuDNN); each entry's own pages go back once it is read.
    crate::read::spill::release(section, mapped);
    let budget = AtomicU64::new(decompression_budget(section.len()));
    Ok(DeviceCode {
        containers: containers.len(),
        entries: entries_of(&containers, 0, depth, &budget, mapped),
        kernels_listed: matches!(depth, Depth::Kernels),
    })
}

fn entries_of(
    containers: &[container::Container],
    first_index: usize,
    depth: Depth,
    budget: &AtomicU64,
    mapped: bool,
) -> Vec<EntryFacts> {
    let flat: Vec<(usize, &container::Entry)> = containers
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.entries.iter().map(move |e| (first_index + i, e)))
        .collect();
    flat.par_iter()
        .map(|(i, e)| {
            let facts = entry_facts(*i, e, depth, budget);
            crate::read::spill::release(e.payload, mapped);
            facts
        })
        .collect()
}

/// Bytes a scan of a mapped section covers before handing the pages behind it back.
const RELEASE_SPAN: usize = 16 << 20;

/// Most device-code images taken from one data section (a hostile section could hold a
/// magic number every few bytes).
const MAX_IMAGES_PER_SECTION: usize = 4096;

/// Device code outside `.nv_fatbin`: fatbin containers and raw cubins (ELF `EM_CUDA` images)
/// anywhere in a data section, which the library loads itself (cuModuleLoadData). Candidates
/// are found by their magic bytes and kept only when they parse whole; `first_index` numbers
/// their containers after the ones already seen. Entries name `section`.
pub fn scan(
    name: &str,
    section: &[u8],
    first_index: usize,
    list_kernels: bool,
    mapped: bool,
) -> (usize, Vec<EntryFacts>) {
    let budget = AtomicU64::new(decompression_budget(section.len()));
    let containers = find_containers(section, mapped);
    crate::read::spill::release(section, mapped);
    let cubins = find_raw_cubins(section, &containers, mapped);
    crate::read::spill::release(section, mapped);
    let mut entries = entries_of(
        &containers,
        first_index,
        Depth::listing(list_kernels),
        &budget,
        mapped,
    );
    let raw_index = first_index + containers.len();
    entries.extend(cubins.iter().enumerate().map(|(i, (o, image))| {
        let facts = raw_cubin_facts(raw_index + i, *o, image, list_kernels);
        crate::read::spill::release(&image[..facts.stored_size.min(image.len())], mapped);
        facts
    }));
    for e in &mut entries {
        e.section = Some(name.to_string());
    }
    (containers.len() + cubins.len(), entries)
}

/// Behind a search cursor, a mapped section's pages handed back every [`RELEASE_SPAN`].
struct ReleaseBehind<'a> {
    section: &'a [u8],
    mapped: bool,
    released: usize,
}

impl<'a> ReleaseBehind<'a> {
    fn new(section: &'a [u8], mapped: bool) -> ReleaseBehind<'a> {
        ReleaseBehind {
            section,
            mapped,
            released: 0,
        }
    }

    fn at(&mut self, at: usize) {
        if self.mapped && at >= self.released + RELEASE_SPAN {
            crate::read::spill::release(&self.section[self.released..at], true);
            self.released = at;
        }
    }
}

/// Fatbin containers anywhere in `section`, each kept when it parses whole with entries (at
/// most [`MAX_IMAGES_PER_SECTION`]).
fn find_containers(section: &[u8], mapped: bool) -> Vec<container::Container<'_>> {
    let mut release = ReleaseBehind::new(section, mapped);
    let mut containers = Vec::new();
    let magic = container::MAGIC.to_le_bytes();
    let mut at = 0;
    let magic_finder = memchr::memmem::Finder::new(&magic);
    while let Some(hit) = find_within(&magic_finder, &section[at..], mapped) {
        let o = at + hit;
        release.at(o);
        if containers.len() >= MAX_IMAGES_PER_SECTION {
            break;
        }
        match container::parse_one(section, o) {
            Ok((c, end)) if !c.entries.is_empty() => {
                containers.push(c);
                at = end;
            }
            _ => at = o + 1,
        }
    }
    containers
}

/// Free-standing cubins (ELF `EM_CUDA` images outside every container found) in `section`:
/// (offset, bytes from there on), at most [`MAX_IMAGES_PER_SECTION`].
fn find_raw_cubins<'s>(
    section: &'s [u8],
    containers: &[container::Container],
    mapped: bool,
) -> Vec<(usize, &'s [u8])> {
    let mut release = ReleaseBehind::new(section, mapped);
    let mut cubins: Vec<(usize, &[u8])> = Vec::new();
    let mut at = 0;
    let elf_finder = memchr::memmem::Finder::new(b"\x7fELF");
    while let Some(hit) = find_within(&elf_finder, &section[at..], mapped) {
        let o = at + hit;
        at = o + 1;
        release.at(o);
        if cubins.len() >= MAX_IMAGES_PER_SECTION {
            break;
        }
        // A cubin inside a container was found above; only free-standing ones here.
        if containers.iter().any(|c| {
            c.offset <= o
                && c.entries
                    .last()
                    .is_some_and(|e| o <= e.offset + 64 + e.payload.len())
        }) {
            continue;
        }
        let image = &section[o..];
        if kiln_fatbin::cubin::sm(image).is_ok() {
            cubins.push((o, image));
        }
    }
    cubins
}

/// The next match in `hay`, searched a RELEASE_SPAN at a time (with an overlap for a match
/// across the seam); each window searched without a match is handed back when `mapped`. (Handing
/// back only at matches left a section without one resident whole: 256 MiB of `.rodata` with
/// raw cubins and no fatbin container peaked past 256 MiB.)
fn find_within(finder: &memchr::memmem::Finder, hay: &[u8], mapped: bool) -> Option<usize> {
    let n = finder.needle().len();
    let mut at = 0;
    while at < hay.len() {
        let end = (at + RELEASE_SPAN).min(hay.len());
        if let Some(i) = finder.find(&hay[at..end]) {
            return Some(at + i);
        }
        if end == hay.len() {
            return None;
        }
        crate::read::spill::release(&hay[at..end + 1 - n], mapped);
        at = end + 1 - n;
    }
    None
}

/// A cubin standing alone in a data section: its target from its own header and note, its size
/// from its own ELF extent (`image` runs to the end of the section, past the cubin).
fn raw_cubin_facts(index: usize, offset: usize, image: &[u8], list_kernels: bool) -> EntryFacts {
    let len = kiln_fatbin::cubin::extent(image)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= image.len());
    let (image, error) = match len {
        Some(n) => (&image[..n], None),
        None => (
            image,
            Some("the cubin's ELF tables reach past the section that holds it".to_string()),
        ),
    };
    let sm = kiln_fatbin::cubin::sm(image).unwrap_or(0);
    let variant = kiln_fatbin::cubin::variant(image);
    let target = Target::sass(kiln_pins::Arch::from_number(sm, variant));
    let mut facts = EntryFacts {
        container: index,
        offset,
        kind: EntryKind::Cubin,
        target: EntryTarget::Device(target),
        sm,
        variant,
        compression: Compression::None,
        stored_size: image.len(),
        size: image.len() as u64,
        kernels: Vec::new(),
        kernels_demangled: Vec::new(),
        ptx_isa: None,
        ptx_isa_num: None,
        label_mismatch: None,
        error,
        section: None,
    };
    if list_kernels && facts.error.is_none() {
        match kiln_fatbin::cubin::kernels(image) {
            Ok(k) => facts.kernels = k,
            Err(err) => facts.error = Some(err.to_string()),
        }
    }
    finish(facts)
}

fn entry_facts(
    container: usize,
    e: &container::Entry,
    depth: Depth,
    budget: &AtomicU64,
) -> EntryFacts {
    let mut facts = header_facts(container, e);
    let needs_payload = match depth {
        Depth::Headers => false,
        Depth::Ptx => e.kind == container::EntryKind::Ptx,
        Depth::Kernels => true,
    };
    if !needs_payload || matches!(e.kind, container::EntryKind::Other(_)) {
        return finish(facts);
    }
    if let Err(err) = e.check_claim() {
        facts.error = Some(err.to_string());
        return finish(facts);
    }
    if e.compression != container::Compression::None && !take(budget, e.decompressed_size) {
        facts.error = Some(
            "not decompressed: the section's compressed entries claim more inflated bytes together than its budget (128 MiB + 64x the section size)".into(),
        );
        return finish(facts);
    }
    if e.kind == container::EntryKind::Elf
        && e.compression == container::Compression::Zstd
        && e.decompressed_size > SPARSE_FROM
    {
        if let Some(sparse) = sparse_cubin_facts(e, &facts) {
            return finish(sparse);
        }
    }
    decompress_and_read(e, &mut facts);
    finish(facts)
}

/// What an entry's header says: kind, target, sizes, compression, and a PTX entry's ISA (the
/// text wins when it is read and readable).
fn header_facts(container: usize, e: &container::Entry) -> EntryFacts {
    EntryFacts {
        container,
        offset: e.offset,
        kind: match e.kind {
            container::EntryKind::Elf => EntryKind::Cubin,
            container::EntryKind::Ptx => EntryKind::Ptx,
            container::EntryKind::Other(_) => EntryKind::Other,
        },
        target: match e.target() {
            Some(t) => EntryTarget::Device(t),
            None => EntryTarget::Other {
                // The header's kind field (1 PTX, 2 ELF, anything else kept as read).
                kind: match e.kind {
                    container::EntryKind::Ptx => 1,
                    container::EntryKind::Elf => 2,
                    container::EntryKind::Other(k) => k,
                },
                sm: e.sm,
                variant: e.variant,
            },
        },
        sm: e.sm,
        variant: e.variant,
        compression: match e.compression {
            container::Compression::None => Compression::None,
            container::Compression::Lz4 => Compression::Lz4,
            container::Compression::Zstd => Compression::Zstd,
        },
        stored_size: e.payload.len(),
        size: e.decompressed_size,
        kernels: Vec::new(),
        kernels_demangled: Vec::new(),
        ptx_isa: None,
        ptx_isa_num: (e.kind == container::EntryKind::Ptx)
            .then_some((e.version.0 as u32, e.version.1 as u32)),
        label_mismatch: None,
        error: None,
        section: None,
    }
}

/// The payload decompressed into the thread's reused buffer and read into `facts`.
fn decompress_and_read(e: &container::Entry, facts: &mut EntryFacts) {
    thread_local! {
        // One decompression buffer per worker thread, reused across entries.
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let _room = (e.compression != container::Compression::None)
        .then(|| IN_FLIGHT.reserve(e.decompressed_size));
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        match e.decompress_with(&mut buf) {
            Ok(payload) => read_payload(e, payload, facts),
            Err(err) => facts.error = Some(err.to_string()),
        }
        // Keep a typical cubin's worth of capacity, not the largest entry ever seen.
        if buf.capacity() > (8 << 20) {
            *buf = Vec::new();
        }
    });
}

fn read_payload(e: &container::Entry, payload: &[u8], facts: &mut EntryFacts) {
    match e.kind {
        container::EntryKind::Elf => read_cubin(e, payload, facts),
        container::EntryKind::Ptx => match kiln_fatbin::ptx::parse_bytes(payload) {
            Ok(info) => {
                facts.ptx_isa_num = Some(info.isa);
                facts.kernels = info.kernels;
                match kiln_fatbin::ptx::target_arch(&info.target) {
                    Some((sm, variant)) if (sm, variant) == (e.sm, e.variant) => {}
                    _ => {
                        facts.label_mismatch = Some(format!(
                            "the entry header says compute_{}{}, the PTX says `.target {}`",
                            e.sm,
                            e.variant.suffix(),
                            info.target
                        ))
                    }
                }
            }
            Err(err) => facts.error = Some(err.to_string()),
        },
        container::EntryKind::Other(_) => {}
    }
}

/// A cubin's own target and kernels, from the whole cubin or a sparse one.
fn read_cubin<'d, R: object::ReadRef<'d>>(e: &container::Entry, cubin: R, facts: &mut EntryFacts) {
    match kiln_fatbin::cubin::sm(cubin) {
        Ok(sm) if sm != e.sm => {
            facts.label_mismatch = Some(format!(
                "the entry header says sm_{}, the cubin's own ELF header says sm_{sm}",
                e.sm
            ))
        }
        Ok(_) => {}
        Err(err) => facts.error = Some(err.to_string()),
    }
    // The variant is only in the toolkit note; a cubin without one proves its SM alone.
    if let Some((sm, variant)) = kiln_fatbin::cubin::toolkit_target(cubin) {
        if facts.label_mismatch.is_none() && (sm, variant) != (e.sm, e.variant) {
            facts.label_mismatch = Some(format!(
                "the entry header says sm_{}{}, the cubin's toolkit note says it was compiled for sm_{sm}{}",
                e.sm,
                e.variant.suffix(),
                variant.suffix()
            ))
        }
    }
    match kiln_fatbin::cubin::kernels(cubin) {
        Ok(k) => facts.kernels = k,
        Err(err) => facts.error = Some(err.to_string()),
    }
}

/// A large zstd cubin read from a stream that keeps only its ELF tables (kiln_fatbin::sparse),
/// so that several decode side by side in bounded memory. None when the stream is not one clean
/// frame or a read needed bytes that were not kept: the whole decode then gives the answer.
fn sparse_cubin_facts(e: &container::Entry, facts: &EntryFacts) -> Option<EntryFacts> {
    let _room = IN_FLIGHT.reserve(kiln_fatbin::sparse::FOOTPRINT);
    let cubin = kiln_fatbin::sparse::SparseCubin::from_zstd(e.payload, e.decompressed_size)?;
    let mut sparse = facts.clone();
    read_cubin(e, &cubin, &mut sparse);
    (!cubin.missed()).then_some(sparse)
}

fn finish(mut f: EntryFacts) -> EntryFacts {
    f.ptx_isa = f.ptx_isa_num.map(|(a, b)| format!("{a}.{b}"));
    if f.kernels
        .iter()
        .any(|k| k.starts_with("_Z") || k.starts_with("_R"))
    {
        f.kernels_demangled = f
            .kernels
            .iter()
            .map(|k| crate::read::demangle::demangle_cached(k))
            .collect();
    }
    f
}

fn no_mangled_name(names: &[Option<String>]) -> bool {
    names.iter().all(Option::is_none)
}
