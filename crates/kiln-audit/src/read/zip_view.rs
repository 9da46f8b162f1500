//! The archive as Python's `zipfile` (and so pip) lists it, read independently of the zip crate
//! so that the two views can be compared: a wheel whose members differ between them is one the
//! audit did not see as installed.
//!
//! Followed from CPython's Lib/zipfile (3.11–3.13): `_EndRecData` takes the end-of-central-
//! directory record in the last 22 bytes when it has no comment, else the *last* signature in the
//! final 64 KiB + 22 bytes; `_EndRecData64` reads the zip64 record right before its locator;
//! `_RealGetContents` walks the central directory by its byte size (not the entry count), adds
//! `concat` (bytes prepended to the archive) to every header offset, and `ZipFile.open` refuses a
//! member whose local header name differs from the central one.

use crate::read::error::ReadError;
use crate::read::source::Source;

const EOCD_SIG: &[u8; 4] = b"PK\x05\x06";
const EOCD64_LOCATOR_SIG: &[u8; 4] = b"PK\x06\x07";
const EOCD64_SIG: &[u8; 4] = b"PK\x06\x06";
const CD_SIG: &[u8; 4] = b"PK\x01\x02";
const LOCAL_SIG: &[u8; 4] = b"PK\x03\x04";
const EOCD_LEN: u64 = 22;
const EOCD64_LEN: u64 = 56;
const LOCATOR_LEN: u64 = 20;
const CD_LEN: usize = 46;
const LOCAL_LEN: usize = 30;

/// One central-directory entry as Python reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdEntry {
    pub name: Vec<u8>,
    /// Local header offset, with `concat` applied.
    pub header_offset: u64,
    pub compressed_size: u64,
    pub size: u64,
}

impl CdEntry {
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

fn u16le(b: &[u8], at: usize) -> u64 {
    u16::from_le_bytes([b[at], b[at + 1]]) as u64
}
fn u32le(b: &[u8], at: usize) -> u64 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4])) as u64
}
fn u64le(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// Every central-directory entry in Python's order, or why `zipfile.ZipFile` refuses the file.
pub fn python_listing(src: &Source) -> Result<Vec<CdEntry>, ReadError> {
    let filesize = src.len();
    let (eocd_at, eocd) = end_record(src)?;
    let (size_cd, offset_cd, zip64) = match zip64_end_record(src, eocd_at)? {
        Some((size, offset)) => (size, offset, true),
        None => (u32le(&eocd, 12), u32le(&eocd, 16), false),
    };
    let mut concat = i128::from(eocd_at) - i128::from(size_cd) - i128::from(offset_cd);
    if zip64 {
        concat -= i128::from(EOCD64_LEN + LOCATOR_LEN);
    }
    let start_dir = i128::from(offset_cd) + concat;
    if start_dir < 0 {
        return Err(ReadError::Zipfile("bad offset for central directory"));
    }
    let start_dir = start_dir as u64;
    if size_cd > filesize {
        return Err(ReadError::Zipfile("central directory larger than the file"));
    }
    let cd = src
        .bytes_at(start_dir, size_cd as usize)
        .ok_or(ReadError::Zipfile("truncated central directory"))?;
    central_directory(&cd, concat)
}

/// `_EndRecData64`: the locator sits right before the EOCD, the zip64 record right before it;
/// its central directory size and offset, when there is a locator.
fn zip64_end_record(src: &Source, eocd_at: u64) -> Result<Option<(u64, u64)>, ReadError> {
    if eocd_at < LOCATOR_LEN {
        return Ok(None);
    }
    let Some(loc) = src.bytes_at(eocd_at - LOCATOR_LEN, LOCATOR_LEN as usize) else {
        return Ok(None);
    };
    if &loc[..4] != EOCD64_LOCATOR_SIG {
        return Ok(None);
    }
    let rec_at = eocd_at
        .checked_sub(LOCATOR_LEN + EOCD64_LEN)
        .ok_or(ReadError::Zipfile(
            "zip64 end record before the start of the file",
        ))?;
    let rec = src
        .bytes_at(rec_at, EOCD64_LEN as usize)
        .ok_or(ReadError::Zipfile("truncated zip64 end record"))?;
    if &rec[..4] != EOCD64_SIG {
        return Err(ReadError::Zipfile(
            "zip64 locator without a zip64 end record before it",
        ));
    }
    Ok(Some((u64le(&rec, 40), u64le(&rec, 48))))
}

/// `_RealGetContents`: the central directory walked by its byte size, `concat` added to every
/// header offset.
fn central_directory(cd: &[u8], concat: i128) -> Result<Vec<CdEntry>, ReadError> {
    let truncated = || ReadError::Zipfile("truncated central directory");
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < cd.len() {
        let h = cd.get(at..at + CD_LEN).ok_or_else(truncated)?;
        if &h[..4] != CD_SIG {
            return Err(ReadError::Zipfile("bad magic number for central directory"));
        }
        let (n, e, c) = (
            u16le(h, 28) as usize,
            u16le(h, 30) as usize,
            u16le(h, 32) as usize,
        );
        let name = cd
            .get(at + CD_LEN..at + CD_LEN + n)
            .ok_or_else(truncated)?
            .to_vec();
        let extra = cd
            .get(at + CD_LEN + n..at + CD_LEN + n + e)
            .ok_or_else(truncated)?;
        let (mut size, mut csize, mut offset) = (u32le(h, 24), u32le(h, 20), u32le(h, 42));
        zip64_extra(extra, &mut size, &mut csize, &mut offset)?;
        let header_offset = i128::from(offset) + concat;
        if header_offset < 0 {
            return Err(ReadError::NegativeHeaderOffset(
                String::from_utf8_lossy(&name).into_owned(),
            ));
        }
        out.push(CdEntry {
            name,
            header_offset: header_offset as u64,
            compressed_size: csize,
            size,
        });
        at += CD_LEN + n + e + c;
    }
    Ok(out)
}

/// `_EndRecData`: the EOCD offset and its 22 bytes.
fn end_record(src: &Source) -> Result<(u64, Vec<u8>), ReadError> {
    let filesize = src.len();
    if filesize < EOCD_LEN {
        return Err(ReadError::Zipfile("file is not a zip file (too short)"));
    }
    if let Some(tail) = src.bytes_at(filesize - EOCD_LEN, EOCD_LEN as usize) {
        if &tail[..4] == EOCD_SIG && tail[20..22] == [0, 0] {
            return Ok((filesize - EOCD_LEN, tail));
        }
    }
    let start = filesize.saturating_sub((1 << 16) + EOCD_LEN);
    let window = src
        .bytes_at(start, (filesize - start) as usize)
        .ok_or(ReadError::Zipfile("unreadable end of file"))?;
    let pos = window
        .windows(4)
        .rposition(|w| w == EOCD_SIG)
        .ok_or(ReadError::Zipfile(
            "file is not a zip file (no end of central directory)",
        ))?;
    let rec = window
        .get(pos..pos + EOCD_LEN as usize)
        .ok_or(ReadError::Zipfile("truncated end of central directory"))?
        .to_vec();
    Ok((start + pos as u64, rec))
}

/// `_decodeExtra`: the zip64 extra field replaces the 0xFFFFFFFF fields, in order.
fn zip64_extra(
    extra: &[u8],
    size: &mut u64,
    csize: &mut u64,
    offset: &mut u64,
) -> Result<(), ReadError> {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let id = u16le(extra, at);
        let len = u16le(extra, at + 2) as usize;
        let body = extra
            .get(at + 4..at + 4 + len)
            .ok_or(ReadError::Zipfile("corrupt extra field"))?;
        if id == 1 {
            let mut k = 0;
            for field in [size, csize, offset] {
                if *field == 0xFFFF_FFFF {
                    *field = body
                        .get(k..k + 8)
                        .map(|b| u64le(b, 0))
                        .ok_or(ReadError::Zipfile("corrupt zip64 extra field"))?;
                    k += 8;
                }
            }
            return Ok(());
        }
        at += 4 + len;
    }
    Ok(())
}

/// The local header of `e`: its name (what `ZipFile.open` compares with the central one) and
/// where its data ends.
pub fn local_header(src: &Source, e: &CdEntry) -> Result<(Vec<u8>, u64), ReadError> {
    let h = src
        .bytes_at(e.header_offset, LOCAL_LEN)
        .ok_or(ReadError::Zipfile("truncated local header"))?;
    if &h[..4] != LOCAL_SIG {
        return Err(ReadError::Zipfile("bad magic number for file header"));
    }
    let (n, x) = (u16le(&h, 26), u16le(&h, 28));
    let name = src
        .bytes_at(e.header_offset + LOCAL_LEN as u64, n as usize)
        .ok_or(ReadError::Zipfile("truncated local header name"))?;
    let end = e.header_offset + LOCAL_LEN as u64 + n + x + e.compressed_size;
    Ok((name, end))
}

/// Whether Python's `zipfile` would open `src` as an archive with at least one member whose
/// local header is where the directory says: an ELF or fatbin that is also a zip (a polyglot).
/// Requiring a real member, not just an EOCD signature, keeps a library whose code happens to
/// contain the 4 signature bytes from being called a zip.
pub fn opens_as_zip(src: &Source) -> bool {
    match python_listing(src) {
        Ok(entries) => entries
            .first()
            .is_some_and(|e| local_header(src, e).is_ok()),
        Err(_) => false,
    }
}
