//! Facts from one ELF file: dynamic linkage, symbol versions, dlopen notes, device code sections.

use object::elf;
use object::read::elf::{Dyn, FileHeader, SectionHeader, SectionTable, Sym};
use object::read::StringTable;
use object::Endianness;
use serde::Serialize;

use crate::read::elf_dynamic::{self, DynamicView};
use crate::read::error::ReadError;

type Header = elf::FileHeader64<Endianness>;

/// `.note.dlopen` (FDO "ELF dlopen metadata"): owner "FDO", type 0x407c0c0a, JSON payload.
const FDO_DLOPEN_NOTE: u32 = 0x407c_0c0a;

/// What one ELF declares to the loader, and where its device code sits.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct ElfFacts {
    /// `e_machine` (62: x86-64, 183: AArch64).
    pub machine: u16,
    /// DT_SONAME.
    pub soname: Option<String>,
    /// DT_NEEDED, in order.
    #[serde(serialize_with = "crate::json::needed")]
    pub needed: Vec<String>,
    /// DT_RUNPATH, split at `:`.
    #[serde(serialize_with = "crate::json::runpath")]
    pub runpath: Vec<String>,
    /// DT_RPATH, split at `:`.
    #[serde(serialize_with = "crate::json::rpath")]
    pub rpath: Vec<String>,
    /// Highest GLIBC_x.y required, as (x, y).
    pub max_glibc: Option<(u32, u32)>,
    /// Highest GLIBCXX_x.y.z required.
    pub max_glibcxx: Option<String>,
    /// Highest CXXABI_x.y.z required (numeric ones; CXXABI_TM_1 and the like are not ordered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cxxabi: Option<String>,
    /// Undefined dynamic symbols.
    pub undefined_symbols: usize,
    /// One entry per feature in `.note.dlopen`.
    #[serde(serialize_with = "crate::json::dlopen")]
    pub dlopen: Vec<DlopenFeature>,
    /// Problems reading `.note.dlopen` (bad JSON etc.).
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "crate::json::dlopen_errors"
    )]
    pub dlopen_errors: Vec<String>,
    /// `.nv_fatbin` contents (file offset and bytes are resolved by the caller).
    #[serde(skip)]
    pub nv_fatbin: Option<std::ops::Range<usize>>,
    /// The section headers' `.dynamic` differs from what the loader reads through `PT_DYNAMIC`
    /// (the facts above are the loader's): how.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_mismatch: Option<String>,
    /// `__nv_relfatbin` present: relocatable device code, never loaded by the driver.
    pub has_relfatbin: bool,
    /// `__nv_relfatbin` contents, when it has a file range.
    #[serde(skip)]
    pub relfatbin: Option<std::ops::Range<usize>>,
    /// Sonames named as strings in read-only data (`.rodata*`): what the binary may `dlopen`
    /// without declaring it (sorted, at most [`MAX_RODATA_SONAMES`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rodata_sonames: Vec<String>,
    /// Other allocated data sections (name, file range), where vendors put device code that
    /// the library loads itself; scanned by the caller.
    #[serde(skip)]
    pub data_sections: Vec<(String, std::ops::Range<usize>)>,
    /// kiln's build manifest, from the `.kiln_manifest` section (kiln-kernels puts it there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_manifest: Option<kiln_manifest::Manifest>,
    /// `.kiln_manifest` present but not a manifest this audit can read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_manifest_error: Option<String>,
}

/// One feature of a `.note.dlopen` note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct DlopenFeature {
    /// The feature's name.
    #[serde(default)]
    pub feature: Option<String>,
    /// What the feature is for.
    #[serde(default)]
    pub description: Option<String>,
    /// "required", "recommended" or "suggested" (default "recommended").
    #[serde(default)]
    pub priority: Option<String>,
    /// Alternatives: any one of them satisfies the feature.
    #[serde(serialize_with = "crate::json::dlopen_sonames")]
    pub soname: Vec<String>,
}

/// Distinct soname strings kept from read-only data.
pub const MAX_RODATA_SONAMES: usize = 256;

/// Strings shaped like a soname (`libname.so` or `libname.so.N[.M…]`) in `data`, each
/// starting after a NUL or a non-name byte.
#[cfg(test)]
fn soname_strings(data: &[u8], out: &mut std::collections::BTreeSet<String>) {
    soname_strings_from(data, 0, data.len(), out)
}

/// [`soname_strings`] for the matches starting in `from..to` of `data` (the bytes before and
/// after are context).
fn soname_strings_from(
    data: &[u8],
    from: usize,
    to: usize,
    out: &mut std::collections::BTreeSet<String>,
) {
    let name_byte = |b: u8| b.is_ascii_alphanumeric() || b"_+-".contains(&b);
    // A match starting before `to` may run past it: search two bytes further.
    let starts = memchr::memmem::find_iter(&data[from..(to + 2).min(data.len())], b"lib")
        .map(|i| i + from)
        .filter(|&i| i < to);
    for at in starts {
        if out.len() >= MAX_RODATA_SONAMES {
            return;
        }
        if at > 0 && (name_byte(data[at - 1]) || data[at - 1] == b'.' || data[at - 1] == b'/') {
            continue;
        }
        let rest = &data[at..data.len().min(at + 256)];
        let stem = rest.iter().skip(3).take_while(|&&b| name_byte(b)).count() + 3;
        if stem == 3 || !rest[stem..].starts_with(b".so") {
            continue;
        }
        let mut end = stem + 3;
        while end < rest.len() && rest[end] == b'.' {
            let digits = rest[end + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if digits == 0 {
                break;
            }
            end += 1 + digits;
        }
        if end < rest.len() && (name_byte(rest[end]) || rest[end] == b'.') {
            continue;
        }
        out.insert(String::from_utf8_lossy(&rest[..end]).into_owned());
    }
}

/// Data sections scanned for device code per ELF (real libraries have a few dozen sections).
const MAX_DATA_SECTIONS: usize = 4096;

/// A section's bytes as a range of the file, when they lie inside it.
fn file_range(
    endian: object::Endianness,
    section: &object::elf::SectionHeader64<object::Endianness>,
    len: usize,
) -> Option<std::ops::Range<usize>> {
    let (off, size) = section.file_range(endian)?;
    let start = usize::try_from(off).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    (end <= len).then_some(start..end)
}

pub fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// Reads an ELF; an error says which structure could not be read (the caller keeps its text).
#[cfg(test)]
pub fn read(data: &[u8]) -> Result<ElfFacts, ReadError> {
    read_with(data, false)
}

/// Bytes of read-only data searched for sonames before the pages behind are handed back.
const SCAN_SPAN: usize = 16 << 20;

/// [`read`]; `mapped`: `data` is a spilled member's mapping, whose `.rodata` pages are handed
/// back as the soname search passes them. A library with 240 MB of raw cubins in `.rodata`
/// otherwise had all of them resident at once (the search touches every page).
///
/// One step per table: the section headers' `.dynamic` and version needs, then the loader's
/// view (`PT_DYNAMIC`, which the facts come from), the symbol versions, the dynamic symbols,
/// the `.rodata` soname search, and each section by its kind.
pub fn read_with(data: &[u8], mapped: bool) -> Result<ElfFacts, ReadError> {
    if data.get(4) == Some(&elf::ELFCLASS32) {
        return Err(ReadError::Elf32);
    }
    let header = Header::parse(data)?;
    let endian = header.endian()?;
    let sections = header.sections(endian, data)?;
    let mut facts = ElfFacts {
        machine: header.e_machine(endian),
        ..Default::default()
    };
    let elf = Elf {
        data,
        endian,
        sections,
    };
    let section_view = elf.section_dynamic()?;
    let section_needs = elf.section_version_needs()?;
    let version_needs = loader_view(data, section_view, section_needs, &mut facts)?;
    newest_versions(&version_needs, &mut facts);
    facts.undefined_symbols = elf.undefined_symbols();
    facts.rodata_sonames = elf.rodata_sonames(mapped);
    for section in elf.sections.iter() {
        elf.read_section(section, &mut facts)?;
    }
    Ok(facts)
}

/// One parsed ELF: its bytes, byte order and section table.
struct Elf<'d> {
    data: &'d [u8],
    endian: Endianness,
    sections: SectionTable<'d, Header>,
}

type Section = elf::SectionHeader64<Endianness>;

impl<'d> Elf<'d> {
    /// The section headers' `.dynamic` (what readelf -d shows): None when no `SHT_DYNAMIC`
    /// section has entries.
    fn section_dynamic(&self) -> Result<Option<DynamicView>, ReadError> {
        let (endian, data) = (self.endian, self.data);
        let mut view = None;
        for section in self.sections.iter() {
            if section.sh_type(endian) != elf::SHT_DYNAMIC {
                continue;
            }
            let Some((dyns, link)) = section.dynamic(endian, data)? else {
                continue;
            };
            let strings = self.sections.strings(endian, data, link)?;
            let sec: &mut DynamicView = view.get_or_insert_with(DynamicView::default);
            for d in dyns {
                if d.d_tag(endian) == elf::DT_NULL as u64 {
                    break;
                }
                self.dynamic_entry(d, strings, sec)?;
            }
        }
        Ok(view)
    }

    /// One `.dynamic` entry into `sec`: NEEDED, SONAME, RUNPATH, RPATH.
    fn dynamic_entry(
        &self,
        d: &elf::Dyn64<Endianness>,
        strings: StringTable<'d>,
        sec: &mut DynamicView,
    ) -> Result<(), ReadError> {
        let endian = self.endian;
        let text = || -> Result<String, ReadError> {
            let s = d
                .string(endian, strings)
                .map_err(ReadError::DynamicString)?;
            Ok(String::from_utf8_lossy(s).into_owned())
        };
        let split = |t: String| -> Vec<String> {
            t.split(':')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        };
        match u32::try_from(d.d_tag(endian)).unwrap_or(0) {
            elf::DT_NEEDED => {
                if sec.needed.len() == elf_dynamic::MAX_NEEDED {
                    return Err(ReadError::TooManyNeeded(elf_dynamic::MAX_NEEDED));
                }
                sec.needed.push(text()?)
            }
            elf::DT_SONAME => sec.soname = Some(text()?),
            elf::DT_RUNPATH => sec.runpath.extend(split(text()?)),
            elf::DT_RPATH => sec.rpath.extend(split(text()?)),
            _ => {}
        }
        Ok(())
    }

    /// The version-need names of the section headers' `.gnu.version_r`, in table order.
    fn section_version_needs(&self) -> Result<Vec<String>, ReadError> {
        let (endian, data) = (self.endian, self.data);
        let mut out = Vec::new();
        let Some((mut verneed, link)) = self.sections.gnu_verneed(endian, data)? else {
            return Ok(out);
        };
        let strings = self.sections.strings(endian, data, link)?;
        // Each record is 16 bytes; more iterations than that means the links loop.
        let budget = data.len() / 16 + 1;
        let mut records = 0usize;
        while let Some((record, mut aux)) = verneed.next()? {
            let version = record.vn_version.get(endian);
            if version != 1 {
                return Err(ReadError::VerneedVersion(version));
            }
            records += 1;
            if records > budget {
                return Err(ReadError::VerneedLoops("records"));
            }
            while let Some(vernaux) = aux.next()? {
                records += 1;
                if records > budget {
                    return Err(ReadError::VerneedLoops("entries"));
                }
                let name = vernaux.name(endian, strings)?;
                out.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        Ok(out)
    }

    /// Undefined dynamic symbols (0 when `.dynsym` cannot be read).
    fn undefined_symbols(&self) -> usize {
        let endian = self.endian;
        let Ok(symbols) = self.sections.symbols(endian, self.data, elf::SHT_DYNSYM) else {
            return 0;
        };
        symbols
            .iter()
            .skip(1)
            .filter(|s| s.st_shndx(endian) == elf::SHN_UNDEF && s.st_name(endian) != 0)
            .count()
    }

    /// Sonames named as strings in every `.rodata*` section, sorted.
    fn rodata_sonames(&self, mapped: bool) -> Vec<String> {
        let (endian, data) = (self.endian, self.data);
        let mut found = std::collections::BTreeSet::new();
        for section in self.sections.iter() {
            let name = self.sections.section_name(endian, section).unwrap_or(b"");
            if !name.starts_with(b".rodata") || section.sh_type(endian) != elf::SHT_PROGBITS {
                continue;
            }
            if let Some(r) = file_range(endian, section, data.len()) {
                search_rodata(&data[r], mapped, &mut found);
            }
        }
        found.into_iter().collect()
    }

    /// One section into `facts`, by its name and kind: `.nv_fatbin`, `__nv_relfatbin`, another
    /// data section (device code a library may load itself), `.kiln_manifest`, notes.
    fn read_section(&self, section: &Section, facts: &mut ElfFacts) -> Result<(), ReadError> {
        let (endian, data) = (self.endian, self.data);
        let name = self.sections.section_name(endian, section).unwrap_or(b"");
        let kind = section.sh_type(endian);
        match name {
            b".nv_fatbin" if kind != elf::SHT_NOBITS => {
                facts.nv_fatbin = Some(nv_fatbin_range(endian, section, data.len())?);
            }
            b"__nv_relfatbin" => {
                facts.has_relfatbin = true;
                facts.relfatbin = file_range(endian, section, data.len());
            }
            _ if kind == elf::SHT_PROGBITS
                && section.sh_flags(endian) & u64::from(elf::SHF_EXECINSTR) == 0
                && name != b".kiln_manifest"
                && !name.starts_with(b".debug")
                && facts.data_sections.len() < MAX_DATA_SECTIONS =>
            {
                if let Some(r) = file_range(endian, section, data.len()).filter(|r| r.len() >= 64) {
                    facts
                        .data_sections
                        .push((String::from_utf8_lossy(name).into_owned(), r));
                }
            }
            b".kiln_manifest" if kind != elf::SHT_NOBITS => {
                read_build_manifest(section.data(endian, data).ok(), facts)
            }
            _ if kind == elf::SHT_NOTE => self.read_notes(section, facts),
            _ => {}
        }
        Ok(())
    }

    /// The `.note.dlopen` notes of a note section; a note list that breaks off is a
    /// `dlopen_errors` entry.
    fn read_notes(&self, section: &Section, facts: &mut ElfFacts) {
        let endian = self.endian;
        let Ok(Some(mut notes)) = section.notes(endian, self.data) else {
            return;
        };
        loop {
            match notes.next() {
                Ok(Some(note)) => {
                    if note.name() == b"FDO" && note.n_type(endian) == FDO_DLOPEN_NOTE {
                        read_dlopen_note(note.desc(), facts);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    facts.dlopen_errors.push(format!("note section: {e}"));
                    break;
                }
            }
        }
    }
}

/// The loader's view (`PT_DYNAMIC`) into `facts`, with how the section headers' view differs
/// from it; returns the version needs to judge (the loader's, else the sections').
fn loader_view(
    data: &[u8],
    section_view: Option<DynamicView>,
    section_needs: Vec<String>,
    facts: &mut ElfFacts,
) -> Result<Vec<String>, ReadError> {
    let Some(view) = elf_dynamic::read(data)? else {
        if section_view.is_some_and(|sec| sec != DynamicView::default()) {
            facts.dynamic_mismatch = Some(
                "section headers carry a .dynamic with entries, but there is no PT_DYNAMIC program header: the loader sees none of them".into(),
            );
        }
        return Ok(section_needs);
    };
    if let Some(sec) = &section_view {
        facts.dynamic_mismatch = differ(sec, &view);
    }
    facts.needed = view.needed;
    facts.soname = view.soname;
    facts.runpath = view.runpath;
    facts.rpath = view.rpath;
    Ok(if view.version_needs.is_empty() {
        section_needs
    } else {
        view.version_needs
    })
}

/// The newest GLIBC_, GLIBCXX_ and CXXABI_ versions among `version_needs`, into `facts`.
fn newest_versions(version_needs: &[String], facts: &mut ElfFacts) {
    for name in version_needs {
        if let Some(v) = name.strip_prefix("GLIBC_") {
            if let Some(v) = parse_major_minor(v) {
                facts.max_glibc = facts.max_glibc.max(Some(v));
            }
        } else if let Some(v) = name.strip_prefix("GLIBCXX_") {
            keep_newest(&mut facts.max_glibcxx, v);
        } else if let Some(v) = name.strip_prefix("CXXABI_") {
            keep_newest(&mut facts.max_cxxabi, v);
        }
    }
}

/// Sonames in one `.rodata*` section's bytes, searched in windows overlapping by a soname's
/// longest match (256 bytes), each handed back once searched; a soname across a seam is found
/// in the next window.
fn search_rodata(rodata: &[u8], mapped: bool, found: &mut std::collections::BTreeSet<String>) {
    let mut at = 0;
    while at < rodata.len() {
        let end = (at + SCAN_SPAN).min(rodata.len());
        let window_end = (end + 256).min(rodata.len());
        soname_strings_from(&rodata[..window_end], at, end, found);
        crate::read::spill::release(&rodata[at..end], mapped);
        at = end;
    }
}

/// `.nv_fatbin`'s bytes as a range of the file; an error when they do not lie inside it.
fn nv_fatbin_range(
    endian: Endianness,
    section: &Section,
    len: usize,
) -> Result<std::ops::Range<usize>, ReadError> {
    let (offset, size) = section.file_range(endian).ok_or(ReadError::FatbinNoRange)?;
    let start = usize::try_from(offset).map_err(|_| ReadError::FatbinOffset)?;
    usize::try_from(size)
        .ok()
        .and_then(|s| start.checked_add(s))
        .filter(|&e| e <= len)
        .map(|end| start..end)
        .ok_or(ReadError::FatbinPastEnd { size, offset, len })
}

/// `.kiln_manifest`'s bytes (None: they run past the end of the file) into
/// `build_manifest`, or why not into `build_manifest_error`.
fn read_build_manifest(bytes: Option<&[u8]>, facts: &mut ElfFacts) {
    let Some(bytes) = bytes else {
        facts.build_manifest_error = Some("`.kiln_manifest` runs past the end of the file".into());
        return;
    };
    match std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())
        .and_then(|t| {
            kiln_manifest::Manifest::from_json(t.trim_end_matches('\0')).map_err(|e| e.to_string())
        }) {
        Ok(m) => facts.build_manifest = Some(m),
        Err(e) => facts.build_manifest_error = Some(format!("not a kiln build manifest: {e}")),
    }
}

fn read_dlopen_note(desc: &[u8], facts: &mut ElfFacts) {
    let end = desc.iter().position(|&b| b == 0).unwrap_or(desc.len());
    match serde_json::from_slice::<Vec<DlopenFeature>>(&desc[..end]) {
        Ok(features) => facts.dlopen.extend(features),
        Err(e) => facts
            .dlopen_errors
            .push(format!("`.note.dlopen` JSON: {e}")),
    }
}

/// How the section view differs from the loader's, if it does.
fn differ(sec: &DynamicView, ld: &DynamicView) -> Option<String> {
    let mut parts = Vec::new();
    if sec.needed != ld.needed {
        parts.push(format!("NEEDED {:?} vs {:?}", sec.needed, ld.needed));
    }
    if sec.soname != ld.soname {
        parts.push(format!("SONAME {:?} vs {:?}", sec.soname, ld.soname));
    }
    if sec.runpath != ld.runpath || sec.rpath != ld.rpath {
        parts.push(format!(
            "RUNPATH/RPATH {:?} vs {:?}",
            [&sec.runpath, &sec.rpath],
            [&ld.runpath, &ld.rpath]
        ));
    }
    (!parts.is_empty()).then(|| {
        let mut text = format!(
            "section headers say / PT_DYNAMIC says: {}",
            parts.join("; ")
        );
        if text.len() > 1000 {
            text.truncate(text.floor_char_boundary(1000));
            text.push('…');
        }
        text
    })
}

fn parse_major_minor(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map(|m| m.parse().ok()).unwrap_or(Some(0))?;
    Some((major, minor))
}

/// `v` into `cur` when it is a dotted number newer than `cur`.
fn keep_newest(cur: &mut Option<String>, v: &str) {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return;
    }
    if cur
        .as_deref()
        .is_none_or(|c| version_key(v) > version_key(c))
    {
        *cur = Some(v.to_string());
    }
}

pub fn version_key(v: &str) -> Vec<u32> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_test_binary() {
        // The test executable itself is a real dynamically linked ELF.
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let facts = read(&exe).unwrap();
        assert!(
            facts.needed.iter().any(|n| n.starts_with("libc.so")),
            "{:?}",
            facts.needed
        );
        assert!(facts.max_glibc.unwrap() >= (2, 2));
        assert!(facts.undefined_symbols > 0);
    }

    /// The windowed search finds what one pass over the whole data finds, including a soname
    /// that straddles a window's end.
    #[test]
    fn soname_search_in_windows_misses_nothing_at_the_seams() {
        let mut data = vec![b'x'; 100];
        for (at, s) in [
            (0, "libz.so.1\0"),
            (30, "\0libcublasLt.so.13\0"),
            (60, "\0libnvrtc.so.13\0"),
        ] {
            data[at..at + s.len()].copy_from_slice(s.as_bytes());
        }
        let mut whole = std::collections::BTreeSet::new();
        soname_strings(&data, &mut whole);
        assert_eq!(whole.len(), 3, "{whole:?}");
        for span in 1..40 {
            let mut windows = std::collections::BTreeSet::new();
            let mut at = 0;
            while at < data.len() {
                let end = (at + span).min(data.len());
                soname_strings_from(&data[..(end + 256).min(data.len())], at, end, &mut windows);
                at = end;
            }
            assert_eq!(windows, whole, "span {span}");
        }
    }

    #[test]
    fn garbage_and_truncation_are_errors_not_panics() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        for cut in [0, 4, 16, 63, 64, 100, 4096] {
            let _ = read(&exe[..cut.min(exe.len())]);
        }
        assert!(read(b"\x7fELF").is_err());
    }
}
