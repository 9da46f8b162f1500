//! A large compressed cubin decoded as a stream, keeping only the bytes its ELF structure is
//! read from: the header, the section and program header tables, the string and symbol tables
//! and the notes. NCCL 2.30.7's sm_100 cubin is 136 MB, of which kernel listing reads about
//! 4 MB; decoding it whole held 136 MB for the length of the read, so the audit had to decode
//! such cubins one at a time. Kept here: a prefix (where ptxas writes its string and symbol
//! tables, before the code) plus every range the headers point at once they have streamed by
//! (cuDNN's nvasm cubins put the section headers first and the symbol table last).
//!
//! The image answers reads through object's [`ReadRef`] with the true length; a read of bytes
//! that were not kept is recorded as a miss, and the caller decodes the whole cubin instead.
//! So a result read from a sparse image without a miss is the one the whole cubin gives.

use std::cell::Cell;
use std::ops::Range;

use object::elf::{
    FileHeader64, SectionHeader64, SHN_LORESERVE, SHT_DYNSYM, SHT_NOTE, SHT_STRTAB, SHT_SYMTAB,
    SHT_SYMTAB_SHNDX,
};
use object::read::elf::{FileHeader, SectionHeader};
use object::{Endianness, ReadRef};
use zstd::stream::raw::{DParameter, Decoder, InBuffer, Operation, OutBuffer};

/// Bytes kept from the start of the cubin, whatever the headers say.
pub const PREFIX: usize = 8 << 20;
/// Bytes kept in all, prefix included; a cubin whose tables need more is decoded whole.
pub const MAX_KEPT: usize = 24 << 20;
/// Largest zstd window accepted (2^23 = 8 MiB: NCCL's and cuDNN's large entries use 2^21 and
/// 2^23). A frame that needs more, such as a single-segment frame the size of its content, is
/// refused and the cubin decoded whole.
pub const WINDOW_LOG_MAX: u32 = 23;
/// Memory one sparse decode holds at most: what is kept plus the decoder's window and buffers.
pub const FOOTPRINT: u64 = (MAX_KEPT as u64) + (1 << WINDOW_LOG_MAX) + (1 << 20);

/// The kept parts of one cubin.
#[derive(Debug)]
pub struct SparseCubin {
    len: u64,
    /// Sorted, non-overlapping (start, bytes).
    pieces: Vec<(u64, Vec<u8>)>,
    missed: Cell<bool>,
}

impl SparseCubin {
    /// Decodes a zstd payload claimed to inflate to `len` bytes. None when the payload is not
    /// exactly one well-formed stream of `len` bytes, needs a larger window, or its tables lie
    /// outside what may be kept: the caller then decodes it whole, which gives the exact error.
    pub fn from_zstd(payload: &[u8], len: u64) -> Option<SparseCubin> {
        Self::from_zstd_keeping(payload, len, PREFIX)
    }

    /// [`SparseCubin::from_zstd`] keeping the first `prefix` bytes (at least the ELF header).
    pub fn from_zstd_keeping(payload: &[u8], len: u64, prefix: usize) -> Option<SparseCubin> {
        thread_local! {
            // One streaming context per thread, as for the one-shot decoder.
            static DECODER: std::cell::RefCell<Option<Decoder<'static>>> =
                const { std::cell::RefCell::new(None) };
        }
        DECODER.with_borrow_mut(|slot| {
            if slot.is_none() {
                let mut d = Decoder::new().ok()?;
                d.set_parameter(DParameter::WindowLogMax(WINDOW_LOG_MAX))
                    .ok()?;
                *slot = Some(d);
            }
            let decoder = slot.as_mut()?;
            let result = decode(decoder, payload, len, prefix.max(64));
            // A failed stream leaves the context mid-frame; the next entry starts clean.
            if decoder.reinit().is_err() {
                *slot = None;
            }
            result
        })
    }

    /// True when a read asked for bytes that were not kept: what was read is incomplete.
    pub fn missed(&self) -> bool {
        self.missed.get()
    }

    /// Bytes held.
    pub fn kept(&self) -> usize {
        self.pieces.iter().map(|(_, b)| b.len()).sum()
    }

    fn piece(&self, offset: u64) -> Option<(u64, &[u8])> {
        let i = self.pieces.partition_point(|(s, _)| *s <= offset);
        let (start, bytes) = self.pieces.get(i.checked_sub(1)?)?;
        (offset < start + bytes.len() as u64).then_some((*start, bytes.as_slice()))
    }
}

fn decode(decoder: &mut Decoder, payload: &[u8], len: u64, prefix: usize) -> Option<SparseCubin> {
    let mut collector = Collector::new(len, prefix);
    let mut input = InBuffer::around(payload);
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        let mut output = OutBuffer::around(chunk.as_mut_slice());
        let hint = decoder.run(&mut input, &mut output).ok()?;
        let n = output.pos();
        if !collector.take(&chunk[..n]) {
            return None;
        }
        if hint == 0 {
            // One frame, ending with the payload: anything else goes the whole way.
            break;
        }
        if n == 0 && input.pos() == payload.len() {
            return None; // truncated frame
        }
    }
    (input.pos() == payload.len() && collector.pos == len).then(|| collector.finish())
}

/// Follows the stream, keeping what the ELF structure needs.
struct Collector {
    len: u64,
    pos: u64,
    /// Ranges to keep, sorted by start; each is filled as the stream passes it.
    wanted: Vec<(Range<u64>, Vec<u8>)>,
    kept: usize,
    header_read: bool,
    sections_read: Option<Range<u64>>,
    /// The byte order the ELF header declares.
    endian: Endianness,
}

impl Collector {
    fn new(len: u64, prefix: usize) -> Collector {
        let prefix = 0..len.min(prefix as u64);
        Collector {
            len,
            pos: 0,
            kept: prefix.end as usize,
            wanted: vec![(prefix, Vec::new())],
            header_read: false,
            sections_read: None,
            endian: Endianness::Little,
        }
    }

    /// Takes the next decoded bytes; false when the stream overruns the claimed length or the
    /// tables need more than [`MAX_KEPT`]. The bytes are taken up to each point where the
    /// headers read so far name more to keep (the ELF header's end, the section table's end),
    /// so that what they name is kept even when it follows in the same chunk.
    fn take(&mut self, mut data: &[u8]) -> bool {
        if self
            .pos
            .checked_add(data.len() as u64)
            .is_none_or(|e| e > self.len)
        {
            return false;
        }
        while !data.is_empty() {
            let next_event = if !self.header_read {
                64
            } else {
                self.sections_read.as_ref().map_or(u64::MAX, |t| t.end)
            };
            let n = (next_event.saturating_sub(self.pos) as usize).clamp(1, data.len());
            self.capture(&data[..n]);
            data = &data[n..];
            if !self.header_read && self.pos >= 64 {
                self.header_read = true;
                if !self.want_header_tables() {
                    return false;
                }
            }
            if self
                .sections_read
                .as_ref()
                .is_some_and(|t| t.end <= self.pos)
            {
                let wanted = self.want_sections();
                self.sections_read = None;
                if !wanted {
                    return false;
                }
            }
        }
        true
    }

    fn capture(&mut self, data: &[u8]) {
        let start = self.pos;
        let end = start + data.len() as u64;
        for (range, bytes) in &mut self.wanted {
            // The range holds [range.start, range.start + len) so far: continue from there.
            let from = (range.start + bytes.len() as u64).max(start);
            let to = range.end.min(end);
            if from < to {
                bytes.extend_from_slice(&data[(from - start) as usize..(to - start) as usize]);
            }
        }
        self.pos = end;
    }

    fn prefix(&self) -> &[u8] {
        &self.wanted[0].1
    }

    /// The section and program header tables, from the ELF header (read by object, as the
    /// cubin reader will read it).
    fn want_header_tables(&mut self) -> bool {
        let Ok(h) = FileHeader64::<Endianness>::parse(self.prefix()) else {
            return false; // not an ELF64 header: the whole decode reports it
        };
        let Ok(endian) = h.endian() else {
            return false;
        };
        let (phoff, phentsize, phnum) =
            (h.e_phoff(endian), h.e_phentsize(endian), h.e_phnum(endian));
        let (shoff, shentsize, shnum) =
            (h.e_shoff(endian), h.e_shentsize(endian), h.e_shnum(endian));
        // Extended numbering (counts in section 0) is rare enough to go the whole way.
        if shnum == 0
            || usize::from(shentsize) != std::mem::size_of::<SectionHeader64<Endianness>>()
            || h.e_shstrndx(endian) >= SHN_LORESERVE
        {
            return false;
        }
        self.endian = endian;
        let table =
            |off: u64, n: u16, size: u16| off..off.saturating_add(u64::from(n) * u64::from(size));
        let sections = table(shoff, shnum, shentsize);
        self.want(table(phoff, phnum, phentsize)) && {
            self.sections_read = Some(sections.clone());
            self.want(sections)
        }
    }

    /// Every string table, symbol table and note the section headers name.
    fn want_sections(&mut self) -> bool {
        let endian = self.endian;
        let Some(headers) = self
            .section_table()
            .and_then(|t| object::pod::slice_from_all_bytes::<SectionHeader64<Endianness>>(t).ok())
        else {
            return true; // the table itself was not kept whole: reads of it will miss
        };
        let ranges: Vec<Range<u64>> = headers
            .iter()
            .filter(|s| {
                matches!(
                    s.sh_type(endian),
                    SHT_SYMTAB | SHT_STRTAB | SHT_NOTE | SHT_DYNSYM | SHT_SYMTAB_SHNDX
                )
            })
            .map(|s| {
                let offset = s.sh_offset(endian);
                offset..offset.saturating_add(s.sh_size(endian))
            })
            .collect();
        ranges.into_iter().all(|r| self.want(r))
    }

    fn section_table(&self) -> Option<&[u8]> {
        let table = self.sections_read.as_ref()?;
        self.wanted
            .iter()
            .find(|(r, b)| {
                r.start == table.start && r.end == table.end && b.len() as u64 == r.end - r.start
            })
            .map(|(_, b)| b.as_slice())
            .or_else(|| {
                let p = self.prefix();
                p.get(table.start as usize..usize::try_from(table.end).ok()?)
            })
    }

    /// Adds a range to keep (clipped to the cubin; bytes already passed are not recovered, and
    /// a read of them is a miss). False when the total would exceed [`MAX_KEPT`].
    fn want(&mut self, range: Range<u64>) -> bool {
        let range = range.start.min(self.len)..range.end.min(self.len);
        let prefix_end = self.wanted[0].0.end;
        if range.end <= prefix_end || range.end <= self.pos {
            return true; // in the prefix, or already passed
        }
        let range = range.start.max(prefix_end).max(self.pos)..range.end;
        self.kept += (range.end - range.start) as usize;
        if self.kept > MAX_KEPT {
            return false;
        }
        self.wanted.push((range, Vec::new()));
        true
    }

    fn finish(self) -> SparseCubin {
        let mut pieces: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut wanted = self.wanted;
        wanted.sort_by_key(|(r, _)| r.start);
        for (range, bytes) in wanted {
            let start = range.start;
            match pieces.last_mut() {
                // Overlapping or touching pieces become one, so reads across them succeed.
                Some((s, b)) if *s + b.len() as u64 >= start => {
                    let skip = (*s + b.len() as u64 - start) as usize;
                    if skip < bytes.len() {
                        b.extend_from_slice(&bytes[skip..]);
                    }
                }
                _ => pieces.push((start, bytes)),
            }
        }
        SparseCubin {
            len: self.len,
            pieces,
            missed: Cell::new(false),
        }
    }
}

impl<'a> ReadRef<'a> for &'a SparseCubin {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    // Both reads answer exactly as object's impl for a whole `&[u8]` does (empty reads succeed
    // anywhere; a range past the end or inverted is an error); only bytes not kept are a miss.
    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        let end = offset.checked_add(size).ok_or(())?;
        if end > self.len {
            return Err(());
        }
        match self.piece(offset) {
            Some((start, bytes)) if end - start <= bytes.len() as u64 => {
                Ok(&bytes[(offset - start) as usize..(end - start) as usize])
            }
            _ => {
                self.missed.set(true);
                Err(())
            }
        }
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        if range.start > range.end || range.end > self.len {
            return Err(());
        }
        if range.start == range.end {
            return Err(()); // nothing to search: no delimiter
        }
        let Some((start, bytes)) = self.piece(range.start) else {
            self.missed.set(true);
            return Err(());
        };
        let from = (range.start - start) as usize;
        let to = ((range.end - start) as usize).min(bytes.len());
        match memchr::memchr(delimiter, &bytes[from..to]) {
            Some(n) => Ok(&bytes[from..from + n]),
            None => {
                // Not found in what was kept: an answer only if that covered the whole range.
                if start + (to as u64) < range.end {
                    self.missed.set(true);
                }
                Err(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic ELF64 layout: header, then `body` bytes, then the section table at the end
    /// (as ptxas writes it), one SHT_STRTAB section at `body_at`.
    fn elf(body: usize, strtab_at: u64, strtab: &[u8]) -> Vec<u8> {
        let shoff = 64 + body as u64;
        let mut v = vec![0u8; 64 + body];
        v[..4].copy_from_slice(b"\x7fELF");
        v[4] = 2;
        v[5] = 1;
        v[6] = 1; // EI_VERSION: EV_CURRENT, as every ELF writer sets it
        v[40..48].copy_from_slice(&shoff.to_le_bytes());
        v[58..60].copy_from_slice(&64u16.to_le_bytes());
        v[60..62].copy_from_slice(&2u16.to_le_bytes());
        v[62..64].copy_from_slice(&1u16.to_le_bytes());
        v[strtab_at as usize..strtab_at as usize + strtab.len()].copy_from_slice(strtab);
        let mut sh = vec![0u8; 128];
        sh[64 + 4..64 + 8].copy_from_slice(&SHT_STRTAB.to_le_bytes());
        sh[64 + 24..64 + 32].copy_from_slice(&strtab_at.to_le_bytes());
        sh[64 + 32..64 + 40].copy_from_slice(&(strtab.len() as u64).to_le_bytes());
        v.extend_from_slice(&sh);
        v
    }

    fn sparse(bytes: &[u8]) -> Option<SparseCubin> {
        let z = zstd::bulk::compress(bytes, 3).unwrap();
        SparseCubin::from_zstd(&z, bytes.len() as u64)
    }

    #[test]
    fn keeps_the_tables_and_drops_the_code() {
        // A string table past the prefix and before the section headers: wanted only once
        // the headers (at the end) are read, so it is a miss; one in the prefix is kept.
        let deep = PREFIX as u64 + 1000;
        let big = elf(PREFIX + (4 << 20), deep, b"\0.text\0");
        let s = sparse(&big).unwrap();
        assert!(s.kept() < PREFIX + 4096, "kept {}", s.kept());
        assert_eq!((&s).read_bytes_at(0, 4).unwrap(), b"\x7fELF");
        let shoff = big.len() as u64 - 128;
        assert_eq!(
            (&s).read_bytes_at(shoff, 128).unwrap(),
            &big[shoff as usize..]
        );
        assert!(!s.missed());
        assert!((&s).read_bytes_at(deep, 7).is_err());
        assert!(
            s.missed(),
            "a read of dropped bytes is a miss, not an answer"
        );

        let near = elf(PREFIX + (4 << 20), 100, b"\0.text\0");
        let s = sparse(&near).unwrap();
        assert_eq!((&s).read_bytes_at_until(101..200, 0).unwrap(), b".text");
        assert!((&s).read_bytes_at(near.len() as u64, 1).is_err());
        assert!(!s.missed(), "out of bounds is an answer");
    }

    #[test]
    fn tables_named_by_early_headers_are_kept_where_they_lie() {
        // Section headers right after the ELF header, string table near the end (nvasm).
        let body = PREFIX + (4 << 20);
        let mut v = vec![0u8; 64 + 128 + body];
        v[..4].copy_from_slice(b"\x7fELF");
        v[4] = 2;
        v[5] = 1;
        v[6] = 1; // EI_VERSION: EV_CURRENT, as every ELF writer sets it
        v[40..48].copy_from_slice(&64u64.to_le_bytes());
        v[58..60].copy_from_slice(&64u16.to_le_bytes());
        v[60..62].copy_from_slice(&2u16.to_le_bytes());
        v[62..64].copy_from_slice(&1u16.to_le_bytes());
        let at = (v.len() - 100) as u64;
        v[at as usize..at as usize + 7].copy_from_slice(b"\0.text\0");
        v[128 + 4..128 + 8].copy_from_slice(&SHT_STRTAB.to_le_bytes());
        v[128 + 24..128 + 32].copy_from_slice(&at.to_le_bytes());
        v[128 + 32..128 + 40].copy_from_slice(&7u64.to_le_bytes());
        let s = sparse(&v).unwrap();
        assert_eq!(
            (&s).read_bytes_at_until(at + 1..at + 7, 0).unwrap(),
            b".text"
        );
        assert!(!s.missed());
    }

    /// Reads answer as object's `&[u8]` does, edge cases included (fuzz, sparse target: a
    /// string-table range that ends before it starts panicked here).
    #[test]
    fn reads_answer_as_a_whole_slice_does() {
        let v = elf(1 << 12, 100, b"\0.text\0");
        let s = sparse(&v).unwrap();
        let n = v.len() as u64;
        let whole = v.as_slice();
        for (offset, size) in [
            (0, 0),
            (n, 0),
            (n + 5, 0),
            (n - 1, 1),
            (n, 1),
            (n - 1, 2),
            (u64::MAX, 2),
        ] {
            assert_eq!(
                (&s).read_bytes_at(offset, size),
                whole.read_bytes_at(offset, size),
                "{offset}+{size}"
            );
        }
        for range in [
            101..200,
            101..104,
            // Inverted, as a hostile string table's bounds can be (what the fuzzer found).
            Range {
                start: 200,
                end: 101,
            },
            107..107,
            n - 1..n,
            n - 1..n + 1,
            n + 1..n + 2,
        ] {
            assert_eq!(
                (&s).read_bytes_at_until(range.clone(), 0),
                whole.read_bytes_at_until(range.clone(), 0),
                "{range:?}"
            );
        }
        assert!(!s.missed(), "the whole small cubin is kept");
    }

    #[test]
    fn a_stream_that_disagrees_with_its_claim_is_refused() {
        let v = elf(1 << 20, 100, b"\0x\0");
        let z = zstd::bulk::compress(&v, 3).unwrap();
        assert!(SparseCubin::from_zstd(&z, v.len() as u64 - 1).is_none());
        assert!(SparseCubin::from_zstd(&z, v.len() as u64 + 1).is_none());
        assert!(SparseCubin::from_zstd(&z[..z.len() / 2], v.len() as u64).is_none());
        let mut two = z.clone();
        two.extend_from_slice(&z);
        assert!(SparseCubin::from_zstd(&two, v.len() as u64).is_none());
        // The context is usable again after each failure.
        assert!(SparseCubin::from_zstd(&z, v.len() as u64).is_some());
    }
}
