//! Device code of one ELF: every fatbin container and entry, with kernels and PTX ISA.
//! Headers are read first (cheap); payloads are then decompressed in parallel.

use kiln_fatbin::container::{self, Compression, EntryKind};
use rayon::prelude::*;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct DeviceCode {
    pub containers: usize,
    pub entries: Vec<EntryFacts>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryFacts {
    pub container: usize,
    /// Offset of the entry header inside `.nv_fatbin`.
    pub offset: usize,
    /// "cubin", "ptx" or "other"
    pub kind: &'static str,
    /// Exact target with its `a`/`f` variant: "sm_100f", "compute_120".
    pub target: String,
    /// Compute capability number (100 for sm_100f).
    pub sm: u32,
    /// "", "a" or "f"
    pub variant: &'static str,
    /// "none", "lz4" or "zstd"
    pub compression: &'static str,
    pub stored_size: usize,
    pub size: u64,
    /// Kernel entry symbols (cubin) or `.entry` names (PTX).
    pub kernels: Vec<String>,
    /// PTX `.version` as "9.0".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ptx_isa: Option<String>,
    #[serde(skip)]
    pub ptx_isa_num: Option<(u32, u32)>,
    /// Why the payload could not be read; the entry is still listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads a `.nv_fatbin` section. Err: the container structure itself is broken.
pub fn read(section: &[u8], list_kernels: bool) -> Result<DeviceCode, String> {
    let containers = container::parse(section).map_err(|e| e.to_string())?;
    let flat: Vec<(usize, &container::Entry)> = containers
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.entries.iter().map(move |e| (i, e)))
        .collect();
    let entries = flat
        .par_iter()
        .map(|(i, e)| entry_facts(*i, e, list_kernels))
        .collect();
    Ok(DeviceCode {
        containers: containers.len(),
        entries,
    })
}

fn entry_facts(container: usize, e: &container::Entry, list_kernels: bool) -> EntryFacts {
    let mut facts = EntryFacts {
        container,
        offset: e.offset,
        kind: match e.kind {
            EntryKind::Elf => "cubin",
            EntryKind::Ptx => "ptx",
            EntryKind::Other(_) => "other",
        },
        target: e.target(),
        sm: e.sm,
        variant: e.variant.suffix(),
        compression: match e.compression {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        },
        stored_size: e.payload.len(),
        size: e.decompressed_size,
        kernels: Vec::new(),
        ptx_isa: None,
        ptx_isa_num: None,
        error: None,
    };
    if e.kind == EntryKind::Ptx {
        // The header carries the ISA too; the text (below) wins when readable.
        let (major, minor) = e.version;
        facts.ptx_isa_num = Some((major as u32, minor as u32));
    }
    let needs_payload = list_kernels || e.kind == EntryKind::Ptx;
    if !needs_payload || matches!(e.kind, EntryKind::Other(_)) {
        return finish(facts);
    }
    thread_local! {
        // One decompression buffer per worker thread, reused across entries.
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        match e.decompress_with(&mut buf) {
            Ok(payload) => read_payload(e, payload, &mut facts),
            Err(err) => facts.error = Some(err.to_string()),
        }
        // Keep a typical cubin's worth of capacity, not the largest entry ever seen.
        if buf.capacity() > (64 << 20) {
            *buf = Vec::new();
        }
    });
    finish(facts)
}

fn read_payload(e: &container::Entry, payload: &[u8], facts: &mut EntryFacts) {
    match e.kind {
        EntryKind::Elf => match kiln_fatbin::cubin::kernels(payload) {
            Ok(k) => facts.kernels = k,
            Err(err) => facts.error = Some(err.to_string()),
        },
        EntryKind::Ptx => match kiln_fatbin::ptx::parse(&String::from_utf8_lossy(payload)) {
            Ok(info) => {
                facts.ptx_isa_num = Some(info.isa);
                facts.kernels = info.kernels;
            }
            Err(err) => facts.error = Some(err.to_string()),
        },
        EntryKind::Other(_) => {}
    }
}

fn finish(mut f: EntryFacts) -> EntryFacts {
    f.ptx_isa = f.ptx_isa_num.map(|(a, b)| format!("{a}.{b}"));
    f
}
