//! Linkage as ld.so reads it: the `PT_DYNAMIC` program header, entries up to the first
//! `DT_NULL`, strings from `DT_STRTAB`/`DT_STRSZ` and version needs from `DT_VERNEED`/
//! `DT_VERNEEDNUM`, each address mapped to the file through the `PT_LOAD` segments. Section
//! headers are not used here: the loader never reads them (they can be stripped, or lie).

use object::elf;
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::Endianness;

use crate::read::error::ReadError;

type Header = elf::FileHeader64<Endianness>;

/// More DT_NEEDED entries than any real library has (libtorch_cuda: ~30); past this the file
/// is refused rather than held whole.
pub const MAX_NEEDED: usize = 4096;

/// The loader's view of one ELF's dynamic section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicView {
    pub needed: Vec<String>,
    pub soname: Option<String>,
    pub runpath: Vec<String>,
    pub rpath: Vec<String>,
    /// Version-need names (GLIBC_2.34, …) in table order.
    pub version_needs: Vec<String>,
}

/// The view from `PT_DYNAMIC`; Ok(None) when the file has no `PT_DYNAMIC` (static, or a
/// relocatable object).
pub fn read(data: &[u8]) -> Result<Option<DynamicView>, ReadError> {
    let header = Header::parse(data)?;
    let endian = header.endian()?;
    let phdrs = header
        .program_headers(endian, data)
        .map_err(ReadError::ProgramHeaders)?;
    let Some(dynamic) = phdrs.iter().find(|p| p.p_type(endian) == elf::PT_DYNAMIC) else {
        return Ok(None);
    };
    let dyns = dynamic
        .dynamic(endian, data)
        .map_err(ReadError::PtDynamic)?
        .unwrap_or(&[]);
    // The loader stops at the first DT_NULL.
    let end = dyns
        .iter()
        .position(|d| d.d_tag(endian) == elf::DT_NULL as u64)
        .unwrap_or(dyns.len());
    let table = Table {
        data,
        endian,
        dyns: &dyns[..end],
        loads: phdrs
            .iter()
            .filter(|p| p.p_type(endian) == elf::PT_LOAD)
            .map(|p| (p.p_vaddr(endian), p.p_offset(endian), p.p_filesz(endian)))
            .collect(),
    };
    let strtab = table.strtab()?;
    let string = |at: u64| string_at(strtab, at);
    let mut view = table.entries(&string)?;
    if let (Some(addr), Some(count)) = (
        table.value(elf::DT_VERNEED),
        table.value(elf::DT_VERNEEDNUM),
    ) {
        let off = table.to_offset(addr).ok_or(ReadError::LoaderTable(
            "DT_VERNEED is outside every PT_LOAD segment",
        ))?;
        view.version_needs = version_needs(data, off, count, &string)?;
    }
    Ok(Some(view))
}

/// The dynamic entries up to the first `DT_NULL`, and the `PT_LOAD` segments that map their
/// addresses to the file.
struct Table<'d> {
    data: &'d [u8],
    endian: Endianness,
    dyns: &'d [elf::Dyn64<Endianness>],
    /// (vaddr, offset, filesz) of each `PT_LOAD`.
    loads: Vec<(u64, u64, u64)>,
}

impl<'d> Table<'d> {
    /// The value of the first entry with `tag`.
    fn value(&self, tag: u32) -> Option<u64> {
        self.dyns
            .iter()
            .find(|d| d.d_tag(self.endian) == tag as u64)
            .map(|d| d.d_val(self.endian))
    }

    /// The file offset of a virtual address, through the `PT_LOAD` segments.
    fn to_offset(&self, addr: u64) -> Option<u64> {
        self.loads.iter().find_map(|&(vaddr, off, filesz)| {
            let rel = addr.checked_sub(vaddr)?;
            (rel < filesz).then(|| off + rel)
        })
    }

    /// The string table `DT_STRTAB`/`DT_STRSZ` name (empty when the dynamic section is).
    fn strtab(&self) -> Result<&'d [u8], ReadError> {
        let bad = ReadError::LoaderTable;
        match (self.value(elf::DT_STRTAB), self.value(elf::DT_STRSZ)) {
            (Some(addr), Some(size)) => {
                let off = self
                    .to_offset(addr)
                    .ok_or(bad("DT_STRTAB is outside every PT_LOAD segment"))?;
                let start = usize::try_from(off).map_err(|_| bad("DT_STRTAB offset overflows"))?;
                let end = usize::try_from(size)
                    .ok()
                    .and_then(|s| start.checked_add(s))
                    .filter(|&e| e <= self.data.len())
                    .ok_or(bad("DT_STRTAB/DT_STRSZ run past the end of the file"))?;
                Ok(&self.data[start..end])
            }
            (None, None) if self.dyns.is_empty() => Ok(&[][..]),
            _ => Err(bad("PT_DYNAMIC without both DT_STRTAB and DT_STRSZ")),
        }
    }

    /// NEEDED, SONAME, RUNPATH and RPATH, in entry order.
    fn entries(
        &self,
        string: &dyn Fn(u64) -> Result<String, ReadError>,
    ) -> Result<DynamicView, ReadError> {
        let mut view = DynamicView::default();
        for d in self.dyns {
            let val = d.d_val(self.endian);
            match u32::try_from(d.d_tag(self.endian)).unwrap_or(0) {
                elf::DT_NEEDED => {
                    if view.needed.len() == MAX_NEEDED {
                        return Err(ReadError::TooManyNeeded(MAX_NEEDED));
                    }
                    view.needed.push(string(val)?)
                }
                elf::DT_SONAME => view.soname = Some(string(val)?),
                elf::DT_RUNPATH => view.runpath.extend(split_path(&string(val)?)),
                elf::DT_RPATH => view.rpath.extend(split_path(&string(val)?)),
                _ => {}
            }
        }
        Ok(view)
    }
}

/// The NUL-terminated string at `at` of `strtab`.
fn string_at(strtab: &[u8], at: u64) -> Result<String, ReadError> {
    let bad = ReadError::LoaderTable;
    let at = usize::try_from(at).map_err(|_| bad("string offset overflows"))?;
    let rest = strtab
        .get(at..)
        .ok_or(bad("dynamic string offset past DT_STRSZ"))?;
    let len = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or(bad("dynamic string not terminated inside DT_STRSZ"))?;
    Ok(String::from_utf8_lossy(&rest[..len]).into_owned())
}

fn split_path(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(':').filter(|s| !s.is_empty()).map(String::from)
}

/// Walks `Elf64_Verneed` records (16 bytes: version, cnt, file, aux, next) and their
/// `Elf64_Vernaux` (16 bytes: hash, flags, other, name, next). The links are relative offsets a
/// hostile file can point back at records already seen; every record is visited at most once
/// per distinct offset, so the walk is bounded by the file size.
fn version_needs(
    data: &[u8],
    start: u64,
    count: u64,
    string: &dyn Fn(u64) -> Result<String, ReadError>,
) -> Result<Vec<String>, ReadError> {
    let u16_at = |at: usize| {
        data.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
    };
    let bad = || ReadError::VerneedTruncated;
    // Each record is 16 bytes: there cannot be more distinct ones than this.
    let budget = data.len() / 16 + 1;
    let mut visited = 0usize;
    let mut out = Vec::new();
    let mut at = usize::try_from(start).map_err(|_| bad())?;
    for _ in 0..count.min(budget as u64) {
        // glibc's dl-version.c refuses any record whose vn_version is not 1.
        let version = u16_at(at).ok_or_else(bad)?;
        if version != 1 {
            return Err(ReadError::VerneedVersion(version));
        }
        let cnt = u16_at(at + 2).ok_or_else(bad)?;
        let aux = u32_at(at + 8).ok_or_else(bad)? as usize;
        let next = u32_at(at + 12).ok_or_else(bad)? as usize;
        let mut a = at.checked_add(aux).ok_or_else(bad)?;
        for _ in 0..cnt {
            visited += 1;
            if visited > budget {
                return Err(ReadError::VerneedLoops("entries"));
            }
            let name = u32_at(a + 8).ok_or_else(bad)?;
            out.push(string(name as u64)?);
            let vna_next = u32_at(a + 12).ok_or_else(bad)? as usize;
            if vna_next == 0 {
                break;
            }
            a = a.checked_add(vna_next).ok_or_else(bad)?;
        }
        if next == 0 {
            break;
        }
        visited += 1;
        if visited > budget {
            return Err(ReadError::VerneedLoops("entries"));
        }
        at = at.checked_add(next).ok_or_else(bad)?;
    }
    Ok(out)
}
