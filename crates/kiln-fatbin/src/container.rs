//! Fatbin containers: the `.nv_fatbin` section of an ELF holds one or more of them back to back.
//!
//! Layout (little endian, read from real nvcc 13 / CUDA 12 output; the tests below and
//! kiln-audit's golden test, which compares against cuobjdump, hold the cases):
//! container header: u32 magic 0xBA55ED50, u16 version, u16 header size, u64 payload size;
//! then entries, each: u16 kind (1 PTX, 2 ELF), u16, u32 header size, u64 payload size,
//! u32 compressed size, u32, u16 minor, u16 major, u32 arch, u32, u32, u64 flags, u64,
//! u64 decompressed size, and possibly more header bytes. Every size and offset is checked
//! against the input before use: a hostile container yields [`Error::Container`].

use std::borrow::Cow;

use crate::{Error, Result};

/// A fatbin container's magic number (little-endian at its start).
pub const MAGIC: u32 = 0xBA55_ED50;
const CONTAINER_HEADER: usize = 16;
/// The fixed part of an entry header we read; real headers are 64..=144 bytes.
const ENTRY_HEADER_MIN: usize = 64;

/// Entry flag bits seen on real fatbins.
pub const FLAG_COMPRESSED_LEGACY: u64 = 0x2000;
/// The payload is compressed (LZ4 or zstd, told apart by the payload).
pub const FLAG_COMPRESSED: u64 = 0x8000;
/// An `a` target (sm_90a).
pub const FLAG_ARCH_SPECIFIC: u64 = 0x10_0000;
/// An `f` target (sm_100f).
pub const FLAG_FAMILY: u64 = 0x20_0000;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// No single cubin or PTX is anywhere near this (NCCL's largest are a few MiB); a header that
/// claims more is hostile.
pub const MAX_DECOMPRESSED: u64 = 256 << 20;
/// zstd cannot expand more than this: a 128 KiB block is at least 4 bytes (an RLE block).
const ZSTD_MAX_RATIO: u64 = 32 << 10;
/// LZ4 cannot expand more than ~255x.
const LZ4_MAX_RATIO: u64 = 255;

/// What an entry's header says it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    /// PTX text.
    Ptx,
    /// A cubin (CUDA ELF).
    Elf,
    /// Anything else (e.g. LTO IR); kept so the report can name it.
    Other(u16),
}

/// `a` (arch-specific, sm_90a) and `f` (family, sm_100f) targets: kiln-arch's vocabulary, the
/// same one the matrix is written in.
pub use kiln_arch::{Target, Variant};

/// How an entry's payload is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// As is.
    None,
    /// LZ4 block(s).
    Lz4,
    /// A zstd frame.
    Zstd,
}

/// One entry (a cubin, a PTX text, or other) with its payload still as stored.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// Offset of the entry header from the start of the bytes given to [`parse`].
    pub offset: usize,
    /// What the entry holds.
    pub kind: EntryKind,
    /// Compute capability number: 90 for sm_90a, 120 for compute_120.
    pub sm: u32,
    /// The `a`/`f` variant from the flags.
    pub variant: Variant,
    /// The header's flag bits (`FLAG_*`).
    pub flags: u64,
    /// (major, minor) from the header: the PTX ISA for PTX entries, the ELF ABI for cubins.
    pub version: (u16, u16),
    /// How the payload is stored.
    pub compression: Compression,
    /// Size after decompression as the header claims (the stored size when uncompressed).
    pub decompressed_size: u64,
    /// The stored bytes (compressed payload when compressed; trailing padding trimmed).
    pub payload: &'a [u8],
}

impl Entry<'_> {
    /// SASS for a cubin, PTX for PTX; None for kinds kiln does not read.
    pub fn target(&self) -> Option<Target> {
        let arch = kiln_arch::Arch::from_number(self.sm, self.variant);
        match self.kind {
            EntryKind::Elf => Some(Target::sass(arch)),
            EntryKind::Ptx => Some(Target::ptx(arch)),
            EntryKind::Other(_) => None,
        }
    }

    /// The payload as the driver sees it; PTX has its trailing NULs removed.
    pub fn decompress(&self) -> Result<Cow<'_, [u8]>> {
        let mut buf = Vec::new();
        let len = self.decompress_with(&mut buf)?.len();
        Ok(if self.compression == Compression::None {
            Cow::Borrowed(&self.payload[..len])
        } else {
            buf.truncate(len);
            Cow::Owned(buf)
        })
    }

    /// Whether the claimed decompressed size is one the payload can expand to (zstd at most
    /// 32768x, LZ4 255x): checked before anything is allocated.
    pub fn check_claim(&self) -> Result<()> {
        let (name, ratio) = match self.compression {
            Compression::None => return Ok(()),
            Compression::Zstd => ("zstd", ZSTD_MAX_RATIO),
            Compression::Lz4 => ("LZ4", LZ4_MAX_RATIO),
        };
        let ceiling = (self.payload.len() as u64).saturating_mul(ratio) + 64;
        if self.decompressed_size > ceiling {
            return Err(Error::Container(format!(
                "entry at offset {}: {name} header claims {} bytes from {} compressed bytes",
                self.offset,
                self.decompressed_size,
                self.payload.len()
            )));
        }
        Ok(())
    }

    /// Like [`Entry::decompress`], decompressing into `buf` (reused across entries to spare
    /// the allocator: a large library has thousands of entries).
    pub fn decompress_with<'s>(&'s self, buf: &'s mut Vec<u8>) -> Result<&'s [u8]> {
        let bad = |m: String| Error::Container(format!("entry at offset {}: {m}", self.offset));
        buf.clear();
        let out: &[u8] = match self.compression {
            Compression::None => self.payload,
            Compression::Zstd => {
                // One-shot into reserved (untouched) capacity: no zeroing, no intermediate copy.
                // The reservation is bounded by what the payload can possibly expand to, so a
                // lying header cannot make us allocate (fuzz: oom-d50629237f).
                let ceiling = (self.payload.len() as u64).saturating_mul(ZSTD_MAX_RATIO) + 64;
                if self.decompressed_size > ceiling {
                    return Err(bad(format!(
                        "zstd header claims {} bytes from {} compressed bytes",
                        self.decompressed_size,
                        self.payload.len()
                    )));
                }
                buf.reserve_exact(self.decompressed_size as usize);
                thread_local! {
                    // One context per thread: creating one per entry was a measurable share of
                    // a large library's audit (thousands of entries).
                    static ZSTD: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
                        const { std::cell::RefCell::new(None) };
                }
                ZSTD.with_borrow_mut(|d| {
                    if d.is_none() {
                        *d = Some(zstd::bulk::Decompressor::new()?);
                    }
                    d.as_mut()
                        .expect("set above")
                        .decompress_to_buffer(self.payload, buf)
                })
                .map_err(|e| bad(format!("zstd: {e}")))?;
                if buf.len() as u64 != self.decompressed_size {
                    return Err(bad(format!(
                        "zstd payload decompressed to {} bytes, header says {}",
                        buf.len(),
                        self.decompressed_size
                    )));
                }
                buf
            }
            Compression::Lz4 => {
                let ceiling = (self.payload.len() as u64).saturating_mul(LZ4_MAX_RATIO) + 64;
                if self.decompressed_size > ceiling {
                    return Err(bad(format!(
                        "LZ4 header claims {} bytes from {} compressed bytes",
                        self.decompressed_size,
                        self.payload.len()
                    )));
                }
                buf.resize(self.decompressed_size as usize, 0);
                let n = lz4_flex::block::decompress_into(self.payload, buf)
                    .map_err(|e| bad(format!("LZ4: {e}")))?;
                if n as u64 != self.decompressed_size {
                    return Err(bad(format!(
                        "LZ4 payload decompressed to {n} bytes, header says {}",
                        self.decompressed_size
                    )));
                }
                buf
            }
        };
        if self.kind == EntryKind::Ptx {
            let end = memchr::memchr(0, out).unwrap_or(out.len());
            return Ok(&out[..end]);
        }
        Ok(out)
    }
}

/// One fatbin container.
#[derive(Debug, Clone)]
pub struct Container<'a> {
    /// Offset of the container from the start of the bytes given to [`parse`].
    pub offset: usize,
    /// The container header's version.
    pub version: u16,
    /// Its entries, in order.
    pub entries: Vec<Entry<'a>>,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// True when `bytes` starts with a fatbin container header.
pub fn is_fatbin(bytes: &[u8]) -> bool {
    u32_at(bytes, 0) == Some(MAGIC)
}

/// Every container in `bytes` (a whole `.nv_fatbin` section or one fatbin file), in order.
/// Zero padding between containers is skipped; anything else is an error.
pub fn parse(bytes: &[u8]) -> Result<Vec<Container<'_>>> {
    let mut containers = Vec::new();
    let mut at = 0usize;
    loop {
        while at < bytes.len() && bytes[at] == 0 {
            at += 1;
        }
        if at >= bytes.len() {
            break;
        }
        let (container, end) = parse_one(bytes, at)?;
        containers.push(container);
        at = end;
    }
    if containers.is_empty() {
        return Err(Error::Container(
            "no fatbin container (empty or all-zero section)".into(),
        ));
    }
    Ok(containers)
}

/// Reads the container at `at`; returns it and the offset just past it.
pub fn parse_one(bytes: &[u8], at: usize) -> Result<(Container<'_>, usize)> {
    let bad = |m: String| Error::Container(format!("container at offset {at}: {m}"));
    let magic = u32_at(bytes, at).ok_or_else(|| bad("truncated header".into()))?;
    if magic != MAGIC {
        return Err(bad(format!(
            "bad magic {magic:#010x} (expected {MAGIC:#010x})"
        )));
    }
    let version = u16_at(bytes, at + 4).ok_or_else(|| bad("truncated header".into()))?;
    let header_size = u16_at(bytes, at + 6).ok_or_else(|| bad("truncated header".into()))? as usize;
    let payload_size = u64_at(bytes, at + 8).ok_or_else(|| bad("truncated header".into()))?;
    if header_size < CONTAINER_HEADER {
        return Err(bad(format!(
            "header size {header_size} < {CONTAINER_HEADER}"
        )));
    }
    let start = at + header_size;
    let end = usize::try_from(payload_size)
        .ok()
        .and_then(|p| start.checked_add(p))
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            bad(format!(
                "truncated: header says {payload_size} payload bytes, only {} remain",
                bytes.len().saturating_sub(start)
            ))
        })?;
    let mut entries = Vec::new();
    let mut e = start;
    while e < end {
        // Trailing zero padding inside the container is allowed.
        if bytes[e..end].iter().all(|&b| b == 0) {
            break;
        }
        let (entry, next) = parse_entry(bytes, e, end)?;
        entries.push(entry);
        e = next;
    }
    Ok((
        Container {
            offset: at,
            version,
            entries,
        },
        end,
    ))
}

fn parse_entry(bytes: &[u8], at: usize, end: usize) -> Result<(Entry<'_>, usize)> {
    let bad = |m: String| Error::Container(format!("entry at offset {at}: {m}"));
    if end - at < ENTRY_HEADER_MIN {
        return Err(bad(format!(
            "truncated header ({} bytes left in container)",
            end - at
        )));
    }
    let h = &bytes[at..end];
    let kind = match u16_at(h, 0).unwrap_or(0) {
        1 => EntryKind::Ptx,
        2 => EntryKind::Elf,
        k => EntryKind::Other(k),
    };
    let header_size = u32_at(h, 4).unwrap_or(0) as usize;
    let size = u64_at(h, 8).unwrap_or(0);
    let compressed_size = u32_at(h, 16).unwrap_or(0) as u64;
    let minor = u16_at(h, 24).unwrap_or(0);
    let major = u16_at(h, 26).unwrap_or(0);
    let sm = u32_at(h, 28).unwrap_or(0);
    let flags = u64_at(h, 40).unwrap_or(0);
    let decompressed = u64_at(h, 56).unwrap_or(0);
    if header_size < ENTRY_HEADER_MIN || header_size > h.len() {
        return Err(bad(format!(
            "header size {header_size} outside {ENTRY_HEADER_MIN}..={}",
            h.len()
        )));
    }
    let payload_start = header_size;
    let payload_end = usize::try_from(size)
        .ok()
        .and_then(|s| payload_start.checked_add(s))
        .filter(|&p| p <= h.len())
        .ok_or_else(|| {
            bad(format!(
                "payload of {size} bytes runs past the container end ({} left)",
                h.len() - payload_start
            ))
        })?;
    let stored = &h[payload_start..payload_end];
    let compressed = flags & (FLAG_COMPRESSED | FLAG_COMPRESSED_LEGACY) != 0;
    let (compression, payload, decompressed_size) = if compressed {
        let len = compressed_size.min(stored.len() as u64) as usize;
        if compressed_size > stored.len() as u64 {
            return Err(bad(format!(
                "compressed size {compressed_size} > stored payload {}",
                stored.len()
            )));
        }
        if decompressed > MAX_DECOMPRESSED {
            return Err(bad(format!(
                "decompressed size {decompressed} exceeds {MAX_DECOMPRESSED}"
            )));
        }
        let payload = &stored[..len];
        let c = if payload.starts_with(&ZSTD_MAGIC) {
            Compression::Zstd
        } else {
            Compression::Lz4
        };
        (c, payload, decompressed)
    } else {
        (Compression::None, stored, stored.len() as u64)
    };
    let variant = if flags & FLAG_FAMILY != 0 {
        Variant::Family
    } else if flags & FLAG_ARCH_SPECIFIC != 0 {
        Variant::ArchSpecific
    } else {
        Variant::Plain
    };
    let entry = Entry {
        offset: at,
        kind,
        sm,
        variant,
        flags,
        version: (major, minor),
        compression,
        decompressed_size,
        payload,
    };
    Ok((entry, at + payload_end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn entry(kind: u16, sm: u32, flags: u64, payload: &[u8], csize: u32, dsize: u64) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[0..2].copy_from_slice(&kind.to_le_bytes());
        h[4..8].copy_from_slice(&64u32.to_le_bytes());
        h[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        h[16..20].copy_from_slice(&csize.to_le_bytes());
        h[28..32].copy_from_slice(&sm.to_le_bytes());
        h[40..48].copy_from_slice(&flags.to_le_bytes());
        h[56..64].copy_from_slice(&dsize.to_le_bytes());
        h.extend_from_slice(payload);
        h
    }

    #[test]
    fn reads_entries_variants_and_compression() {
        let ptx = b".version 9.0\n.target sm_120\n";
        let lz = lz4_flex::block::compress(ptx);
        let zs = zstd::bulk::compress(ptx, 3).unwrap();
        let bytes = container(&[
            entry(2, 90, FLAG_ARCH_SPECIFIC, b"\x7fELF....", 0, 0),
            entry(
                1,
                120,
                FLAG_COMPRESSED_LEGACY,
                &lz,
                lz.len() as u32,
                ptx.len() as u64,
            ),
            entry(
                1,
                100,
                FLAG_COMPRESSED | FLAG_FAMILY,
                &zs,
                zs.len() as u32,
                ptx.len() as u64,
            ),
        ]);
        let mut two = bytes.clone();
        two.extend_from_slice(&[0; 8]);
        two.extend_from_slice(&bytes);
        let cs = parse(&two).unwrap();
        assert_eq!(cs.len(), 2);
        let e = &cs[1].entries;
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].target().unwrap().name(), "sm_90a");
        assert_eq!(e[1].compression, Compression::Lz4);
        assert_eq!(&*e[1].decompress().unwrap(), ptx);
        assert_eq!(e[2].target().unwrap().name(), "compute_100f");
        assert_eq!(&*e[2].decompress().unwrap(), ptx);
    }

    #[test]
    fn truncation_and_lies_are_errors() {
        let bytes = container(&[entry(2, 80, 0, &[1; 100], 0, 0)]);
        for cut in 1..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut} accepted");
        }
        let mut lying = bytes.clone();
        lying[16 + 8] = 0xff; // entry payload size
        assert!(parse(&lying).is_err());
        let huge = container(&[entry(1, 80, FLAG_COMPRESSED, &[0x10, 0x41], 2, 1 << 40)]);
        assert!(parse(&huge).is_err());
        let liar = container(&[entry(1, 80, FLAG_COMPRESSED, &[0x10, 0x41], 2, 1 << 20)]);
        assert!(parse(&liar).unwrap()[0].entries[0].decompress().is_err());
        assert!(parse(&[0u8; 32]).is_err());
        assert!(parse(b"garbage!").is_err());
    }
}
