//! A cubin is an ELF file whose kernel entry points are FUNC symbols marked STO_CUDA_ENTRY.

use object::read::elf::{ElfFile64, FileHeader, Sym};
use object::{Object, ObjectSection, ObjectSymbol, ReadRef};

use crate::{Error, Result};

/// `st_other` flag that marks a `__global__` function (a launchable kernel).
const STO_CUDA_ENTRY: u8 = 0x10;
const EM_CUDA: u16 = 190;

/// The SM number a cubin was compiled for, from its own ELF header (what the driver checks),
/// never from the fatbin entry that carries it. `e_flags` layout, measured on nvcc 13.0.88
/// output (EI_ABIVERSION 8): sm_80 0x06005004, sm_90 0x06005a04, sm_100 0x06006402, sm_120
/// 0x06007802 — the SM in bits 8..16. Older cubins (ABI version < 8, CUDA <= 12) keep it in
/// bits 0..8 (LLVM's `EF_CUDA_SM` mask 0xff; sm_80 is 0x500550). The `a`/`f` variant is not in
/// `e_flags` (sm_90 and sm_90a cubins carry the same value).
pub fn sm<'d, R: ReadRef<'d>>(bytes: R) -> Result<u32> {
    let header = bytes
        .read_bytes_at(0, 64)
        .map_err(|()| Error::Cubin("shorter than an ELF header".into()))?;
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Err(Error::Cubin("not a 64-bit little-endian ELF".into()));
    }
    let machine = u16::from_le_bytes([header[18], header[19]]);
    if machine != EM_CUDA {
        return Err(Error::Cubin(format!(
            "not a CUDA ELF (e_machine {machine}, expected {EM_CUDA})"
        )));
    }
    let flags = u32::from_le_bytes([header[48], header[49], header[50], header[51]]);
    Ok(if header[8] >= 8 {
        (flags >> 8) & 0xff
    } else {
        flags & 0xff
    })
}

/// Kernel entry symbols (mangled names as the driver looks them up), sorted. `bytes` is the
/// cubin, whole or as a [`crate::sparse::SparseCubin`].
pub fn kernels<'d, R: ReadRef<'d>>(bytes: R) -> Result<Vec<String>> {
    let size = bytes.len().unwrap_or(0);
    let file = ElfFile64::<object::Endianness, R>::parse(bytes)
        .map_err(|e| Error::Cubin(e.to_string()))?;
    let endian = file.endian();
    if file.elf_header().e_machine(endian) != EM_CUDA {
        return Err(Error::Cubin(format!(
            "not a CUDA ELF (e_machine {}, expected {EM_CUDA})",
            file.elf_header().e_machine(endian)
        )));
    }
    // Borrowed and deduplicated first: symbols may all point at one string-table entry, or at
    // suffixes of one long string, so owned names are made only for distinct ones, and only
    // while they fit in the cubin's own size (real names are each stored once).
    let mut names = std::collections::BTreeSet::new();
    for sym in file.symbols() {
        let raw = sym.elf_symbol();
        let is_func = raw.st_type() == object::elf::STT_FUNC;
        if is_func && raw.st_other() & STO_CUDA_ENTRY != 0 {
            let name = sym.name().map_err(|e| Error::Cubin(e.to_string()))?;
            names.insert(name);
        }
    }
    let total: u64 = names.iter().map(|n| n.len() as u64).sum();
    if total > size {
        return Err(Error::Cubin(format!(
            "{} kernel names of {total} bytes together, more than the cubin's {size} bytes (names sharing string-table bytes)",
            names.len(),
        )));
    }
    Ok(names.into_iter().map(str::to_string).collect())
}

/// The target the assembler was told to compile for, from the cubin's `.note.nv.tkinfo` notes:
/// the only place a CUDA 13 cubin records its `a`/`f` variant (measured on nvcc 13.0.88: sm_90
/// and sm_90a, sm_100/a/f, sm_120/f cubins differ in `-arch sm_90a` there and nowhere else). Each
/// note (owner "NVIDIA Corp") holds NUL-separated strings: tool name, version, build, then the
/// options — ptxas writes "-arch sm_90a -m 64", cuDNN 9.22's nvasm_internal cubins "-arch SM80
/// -novliw". A device-linked cubin holds one note per tool (nvlink, then each ptxas run): every
/// note is read and the first `-arch` any of them states wins. None when there is no such
/// note or no `-arch` this reader understands.
pub fn toolkit_target<'d, R: ReadRef<'d>>(bytes: R) -> Option<(u32, kiln_arch::Variant)> {
    let file = ElfFile64::<object::Endianness, R>::parse(bytes).ok()?;
    let data = file.section_by_name(".note.nv.tkinfo")?.data().ok()?;
    let word = |at: usize| {
        let w = data.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes(w.try_into().ok()?) as usize)
    };
    let mut at = 0usize;
    // Each note: namesz, descsz, type, name (padded to 4), descriptor (padded to 4).
    while let (Some(namesz), Some(descsz)) = (word(at), word(at + 4)) {
        let desc_at = at
            .checked_add(12)?
            .checked_add(namesz.checked_next_multiple_of(4)?)?;
        let end = desc_at.checked_add(descsz)?;
        // A descriptor running past the section still says what it holds up to its end.
        let desc = data.get(desc_at..end.min(data.len()))?;
        if let Some(t) = arch_option(desc) {
            return Some(t);
        }
        at = end.checked_next_multiple_of(4)?;
    }
    None
}

/// The `-arch` of one tkinfo descriptor's option strings.
fn arch_option(desc: &[u8]) -> Option<(u32, kiln_arch::Variant)> {
    let mut words = desc
        .split(|b| *b == 0 || b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    while let Some(w) = words.next() {
        let value = match w {
            b"-arch" | b"--gpu-name" => words.next(),
            _ => w
                .strip_prefix(b"-arch=")
                .or_else(|| w.strip_prefix(b"--gpu-name=")),
        };
        if let Some(v) = value {
            let v = std::str::from_utf8(v).ok()?;
            // nvasm writes "SM90A"; ptxas "sm_90a".
            let v = match v.strip_prefix("SM") {
                Some(n) => format!("sm_{}", n.to_ascii_lowercase()),
                None => v.to_string(),
            };
            return crate::ptx::target_arch(&v);
        }
    }
    None
}

/// `EF_CUDA_ACCELERATORS_V1` (bit 11 of `e_flags`, EI_ABIVERSION < 8): ptxas 12.x marks an
/// sm_90a cubin with it (LLVM `llvm/include/llvm/BinaryFormat/ELF.h`: "Set when using the
/// sm_90a processor"; cuobjdump prints it as EF_CUDA_ACCELERATORS). nvcc 13.0.88 (ABI version 8)
/// sets no variant bit at all (measured: sm_90 and sm_90a, sm_100/a/f share `e_flags`), so for
/// those only the note says.
const EF_CUDA_ACCELERATORS_V1: u32 = 0x800;

/// A cubin's `a`/`f` variant from its own bytes: the toolkit note when it names this SM, else
/// the old-ABI accelerator bit of `e_flags`; Plain when neither says more.
pub fn variant<'d, R: ReadRef<'d>>(bytes: R) -> kiln_arch::Variant {
    let Ok(sm) = sm(bytes) else {
        return kiln_arch::Variant::Plain;
    };
    if let Some((n, v)) = toolkit_target(bytes) {
        if n == sm {
            return v;
        }
    }
    match bytes.read_bytes_at(0, 64) {
        Ok(h) if h[8] < 8 => {
            let flags = u32::from_le_bytes([h[48], h[49], h[50], h[51]]);
            if flags & EF_CUDA_ACCELERATORS_V1 != 0 {
                return kiln_arch::Variant::ArchSpecific;
            }
            kiln_arch::Variant::Plain
        }
        _ => kiln_arch::Variant::Plain,
    }
}

/// The bytes an ELF image occupies from its start: the furthest of its section header table,
/// program header table and section contents (NOBITS sections hold none). What a cubin found
/// inside a larger blob (a library's `.rodata`) really is; None when the header is not a
/// 64-bit little-endian ELF header or a table's extent overflows.
pub fn extent<'d, R: ReadRef<'d>>(bytes: R) -> Option<u64> {
    let h = bytes.read_bytes_at(0, 64).ok()?;
    if &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]) as u64;
    let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8 bytes"));
    let (phoff, shoff) = (u64_at(0x20), u64_at(0x28));
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    let (shentsize, shnum) = (u16_at(0x3a), u16_at(0x3c));
    let mut end = 64u64;
    if phnum > 0 {
        end = end.max(phoff.checked_add(phentsize.checked_mul(phnum)?)?);
    }
    if shnum > 0 {
        end = end.max(shoff.checked_add(shentsize.checked_mul(shnum)?)?);
        if shentsize >= 64 {
            for i in 0..shnum {
                let at = shoff.checked_add(i * shentsize)?;
                let Ok(s) = bytes.read_bytes_at(at, 64) else {
                    break;
                };
                let ty = u32::from_le_bytes(s[4..8].try_into().expect("4 bytes"));
                let off = u64::from_le_bytes(s[24..32].try_into().expect("8 bytes"));
                let size = u64::from_le_bytes(s[32..40].try_into().expect("8 bytes"));
                if ty != object::elf::SHT_NOBITS && ty != object::elf::SHT_NULL {
                    end = end.max(off.checked_add(size)?);
                }
            }
        }
    }
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF64 little-endian header with EM_CUDA, the given EI_ABIVERSION and e_flags.
    fn header(abi: u8, flags: u32) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[7] = 0x41; // ELFOSABI_CUDA, as nvcc writes it
        h[8] = abi;
        h[18..20].copy_from_slice(&EM_CUDA.to_le_bytes());
        h[48..52].copy_from_slice(&flags.to_le_bytes());
        h
    }

    #[test]
    fn sm_from_e_flags_at_both_abi_versions() {
        // nvcc 13.0.88 (ABI version 8), measured: sm_80, sm_86, sm_90(a), sm_100(a/f), sm_120.
        for (flags, sm) in [
            (0x0600_5004, 80),
            (0x0600_5604, 86),
            (0x0600_5a04, 90),
            (0x0600_6402, 100),
            (0x0600_7802, 120),
        ] {
            assert_eq!(
                super::sm(header(8, flags).as_slice()).unwrap(),
                sm,
                "{flags:#x}"
            );
        }
        // CUDA <= 12 (ABI version 7): EF_CUDA_SM in the low byte; sm_80 is 0x500550.
        assert_eq!(super::sm(header(7, 0x0050_0550).as_slice()).unwrap(), 80);
        let mut not_cuda = header(8, 0x0600_5004);
        not_cuda[18] = 62;
        assert!(super::sm(not_cuda.as_slice()).is_err());
        assert!(super::sm(&header(8, 0)[..40]).is_err());
    }

    /// A cubin whose note section holds `notes` (each: options string), and e_flags at `abi`.
    fn with_notes(abi: u8, flags: u32, notes: &[&str]) -> Vec<u8> {
        let mut desc_all = Vec::new();
        for opts in notes {
            let mut desc = b"\x02\0\0\0ptxas\0Cuda compilation tools\0Build x\0".to_vec();
            desc.extend_from_slice(opts.as_bytes());
            desc.push(0);
            desc_all.extend_from_slice(&12u32.to_le_bytes());
            desc_all.extend_from_slice(&(desc.len() as u32).to_le_bytes());
            desc_all.extend_from_slice(&2000u32.to_le_bytes());
            desc_all.extend_from_slice(b"NVIDIA Corp\0");
            desc_all.extend_from_slice(&desc);
            while desc_all.len() % 4 != 0 {
                desc_all.push(0);
            }
        }
        // Hand-built ELF: header, the note, .shstrtab, then the section headers.
        let shstrtab = b"\0.note.nv.tkinfo\0.shstrtab\0";
        let note_off = 64u64;
        let str_off = note_off + desc_all.len() as u64;
        let sh_off = (str_off + shstrtab.len() as u64).next_multiple_of(8);
        let mut out = header(abi, flags);
        out[0x28..0x30].copy_from_slice(&sh_off.to_le_bytes());
        out[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        out[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        out[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
        out[6] = 1; // EI_VERSION
        out[16] = 1; // ET_REL
        out[20..24].copy_from_slice(&1u32.to_le_bytes());
        out[0x34..0x36].copy_from_slice(&64u16.to_le_bytes());
        out.extend_from_slice(&desc_all);
        out.extend_from_slice(shstrtab);
        out.resize(sh_off as usize, 0);
        let mut sh = |name: u32, ty: u32, off: u64, size: u64| {
            let mut s = vec![0u8; 64];
            s[0..4].copy_from_slice(&name.to_le_bytes());
            s[4..8].copy_from_slice(&ty.to_le_bytes());
            s[24..32].copy_from_slice(&off.to_le_bytes());
            s[32..40].copy_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&s);
        };
        sh(0, 0, 0, 0);
        sh(1, object::elf::SHT_NOTE, note_off, desc_all.len() as u64);
        sh(17, object::elf::SHT_STRTAB, str_off, shstrtab.len() as u64);
        out
    }

    #[test]
    fn variant_from_any_note_or_the_old_accelerator_bit() {
        use kiln_arch::Variant;
        // nvcc 13 layout: one ptxas note.
        let c = with_notes(8, 0x0600_5a04, &["-arch sm_90a -m 64"]);
        assert_eq!(
            toolkit_target(c.as_slice()),
            Some((90, Variant::ArchSpecific))
        );
        assert_eq!(variant(c.as_slice()), Variant::ArchSpecific);
        // A device-linked cubin: the first note (nvlink's) names no -arch, a later one does.
        let c = with_notes(
            8,
            0x0600_6402,
            &["-m 64 -l cudadevrt", "-arch sm_100f -m 64"],
        );
        assert_eq!(variant(c.as_slice()), Variant::Family);
        // nvasm spelling.
        let c = with_notes(8, 0x0600_5a04, &["-arch SM90A -novliw"]);
        assert_eq!(variant(c.as_slice()), Variant::ArchSpecific);
        // No note that says: the ABI-7 accelerator bit (ptxas 12.x, sm_90a) decides.
        let c = with_notes(7, 0x005a_0d5a, &["-m 64"]);
        assert_eq!(super::sm(c.as_slice()).unwrap(), 90);
        assert_eq!(variant(c.as_slice()), Variant::ArchSpecific);
        let c = with_notes(7, 0x005a_055a, &["-m 64"]);
        assert_eq!(variant(c.as_slice()), Variant::Plain);
        // ABI 8 has no such bit: 0x800 there is part of the SM field.
        let c = with_notes(8, 0x0600_5a04, &["-m 64"]);
        assert_eq!(variant(c.as_slice()), Variant::Plain);
    }

    #[test]
    fn extent_is_the_furthest_table_or_section() {
        let c = with_notes(8, 0x0600_5a04, &["-arch sm_90a -m 64"]);
        let mut blob = c.clone();
        blob.extend_from_slice(&[0u8; 100_000]);
        assert_eq!(extent(blob.as_slice()), Some(c.len() as u64));
        // A section whose data lies past the headers counts.
        let mut far = c.clone();
        let sh_off = u64::from_le_bytes(far[0x28..0x30].try_into().unwrap()) as usize;
        let note = sh_off + 64;
        let size = u64::from_le_bytes(far[note + 32..note + 40].try_into().unwrap());
        far[note + 24..note + 32].copy_from_slice(&50_000u64.to_le_bytes());
        assert_eq!(extent(far.as_slice()), Some(50_000 + size));
        // Overflowing tables are no extent.
        let mut bad = c.clone();
        bad[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(extent(bad.as_slice()), None);
        assert_eq!(extent(&b"not an elf"[..]), None);
    }
}
