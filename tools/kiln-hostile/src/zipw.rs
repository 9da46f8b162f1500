//! A zip writer that can lie: every field the audit and Python's `zipfile` read is set per
//! member (local name apart from the central one, Unix mode, flags, declared sizes, a raw
//! compressed stream), so archives that standard writers refuse to produce can be built.
//! Layout per PKWARE APPNOTE 4.3.7 (local header), 4.3.12 (central directory header), 4.3.16
//! (end of central directory record).

use std::io::Write;

/// How a member's bytes are stored.
#[derive(Clone)]
pub enum Body {
    /// Method 0, the data as is.
    Stored,
    /// Method 8, deflated by flate2.
    Deflated,
    /// Method 8 with this raw deflate stream (it must inflate to the member's data).
    RawDeflate(Vec<u8>),
}

#[derive(Clone)]
pub struct Member {
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    pub body: Body,
    /// The local header's name, when it differs from the central one.
    pub local_name: Option<Vec<u8>>,
    /// Unix mode in the high 16 bits of external attributes (0o100644 for a file).
    pub unix_mode: u32,
    /// General purpose flags (bit 0: encrypted, bit 11: UTF-8 names).
    pub flags: u16,
    /// Declared uncompressed size, when it should lie.
    pub declared_size: Option<u32>,
}

impl Member {
    pub fn file(name: &str, data: &[u8]) -> Member {
        Member {
            name: name.as_bytes().to_vec(),
            data: data.to_vec(),
            body: Body::Deflated,
            local_name: None,
            unix_mode: 0o100644,
            flags: 0x800,
            declared_size: None,
        }
    }
}

/// The archive and where its parts landed.
pub struct Written {
    pub bytes: Vec<u8>,
    /// Local header offset of each member.
    pub offsets: Vec<u32>,
    pub cd_offset: u32,
    pub eocd_offset: u32,
}

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).expect("deflate to memory");
    e.finish().expect("deflate to memory")
}

pub fn crc32(data: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(data);
    c.sum()
}

/// Writes `members` as local entries, one central directory and one EOCD (no comment).
pub fn write(members: &[Member]) -> Written {
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    let mut central = Vec::new();
    for m in members {
        let (method, stored): (u16, Vec<u8>) = match &m.body {
            Body::Stored => (0, m.data.clone()),
            Body::Deflated => (8, deflate(&m.data)),
            Body::RawDeflate(raw) => (8, raw.clone()),
        };
        let crc = crc32(&m.data);
        let size = m.declared_size.unwrap_or(m.data.len() as u32);
        let local_name = m.local_name.as_ref().unwrap_or(&m.name);
        let offset = out.len() as u32;
        offsets.push(offset);
        out.extend_from_slice(b"PK\x03\x04");
        out.extend_from_slice(&20u16.to_le_bytes()); // version needed
        out.extend_from_slice(&m.flags.to_le_bytes());
        out.extend_from_slice(&method.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0x21, 0]); // time, date (1980-01-01)
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(local_name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(local_name);
        out.extend_from_slice(&stored);
        central.push(central_entry(
            m,
            method,
            crc,
            stored.len() as u32,
            size,
            offset,
        ));
    }
    let cd_offset = out.len() as u32;
    let cd: Vec<u8> = central.concat();
    out.extend_from_slice(&cd);
    let eocd_offset = out.len() as u32;
    out.extend_from_slice(&eocd(members.len() as u16, cd.len() as u32, cd_offset, b""));
    Written {
        bytes: out,
        offsets,
        cd_offset,
        eocd_offset,
    }
}

/// One central directory header for `m`.
pub fn central_entry(
    m: &Member,
    method: u16,
    crc: u32,
    csize: u32,
    size: u32,
    offset: u32,
) -> Vec<u8> {
    let mut c = Vec::new();
    c.extend_from_slice(b"PK\x01\x02");
    c.extend_from_slice(&0x031eu16.to_le_bytes()); // made by: Unix, 3.0
    c.extend_from_slice(&20u16.to_le_bytes());
    c.extend_from_slice(&m.flags.to_le_bytes());
    c.extend_from_slice(&method.to_le_bytes());
    c.extend_from_slice(&[0, 0, 0x21, 0]);
    c.extend_from_slice(&crc.to_le_bytes());
    c.extend_from_slice(&csize.to_le_bytes());
    c.extend_from_slice(&size.to_le_bytes());
    c.extend_from_slice(&(m.name.len() as u16).to_le_bytes());
    c.extend_from_slice(&[0; 8]); // extra len, comment len, disk, internal attrs
    c.extend_from_slice(&(m.unix_mode << 16).to_le_bytes());
    c.extend_from_slice(&offset.to_le_bytes());
    c.extend_from_slice(&m.name);
    c
}

/// An end-of-central-directory record.
pub fn eocd(entries: u16, cd_size: u32, cd_offset: u32, comment: &[u8]) -> Vec<u8> {
    let mut e = Vec::new();
    e.extend_from_slice(b"PK\x05\x06");
    e.extend_from_slice(&[0; 4]); // disk numbers
    e.extend_from_slice(&entries.to_le_bytes());
    e.extend_from_slice(&entries.to_le_bytes());
    e.extend_from_slice(&cd_size.to_le_bytes());
    e.extend_from_slice(&cd_offset.to_le_bytes());
    e.extend_from_slice(&(comment.len() as u16).to_le_bytes());
    e.extend_from_slice(comment);
    e
}

/// A raw deflate stream whose first block is a stored block of `first` bytes (non-final), then
/// the rest deflated: a reader's first `read()` returns only `first` bytes.
pub fn deflate_split(data: &[u8], first: usize) -> Vec<u8> {
    let first = first.min(data.len());
    let mut out = vec![0u8]; // BFINAL=0, BTYPE=00 (stored); the rest of the byte is padding
    out.extend_from_slice(&(first as u16).to_le_bytes());
    out.extend_from_slice(&(!(first as u16)).to_le_bytes());
    out.extend_from_slice(&data[..first]);
    out.extend_from_slice(&deflate(&data[first..]));
    out
}
