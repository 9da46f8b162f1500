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

/// The target the assembler was told to compile for, from the cubin's `.note.nv.tkinfo` note:
/// the only place a cubin records its `a`/`f` variant (measured on nvcc 13.0.88: sm_90 and
/// sm_90a, sm_100/a/f, sm_120/f cubins differ in `-arch sm_90a` there and nowhere else). The
/// note is an ELF note (owner "NVIDIA Corp") whose descriptor holds NUL-separated strings: tool
/// name, version, build, then the options — ptxas writes "-arch sm_90a -m 64", cuDNN 9.22's
/// nvasm_internal cubins "-arch SM80 -novliw". None when there is no such note or no `-arch`
/// this reader understands: the driver ignores the note, so a cubin without a readable one
/// proves its SM (from `e_flags`) and not its variant.
pub fn toolkit_target<'d, R: ReadRef<'d>>(bytes: R) -> Option<(u32, kiln_arch::Variant)> {
    let file = ElfFile64::<object::Endianness, R>::parse(bytes).ok()?;
    let data = file.section_by_name(".note.nv.tkinfo")?.data().ok()?;
    let word = |at: usize| {
        let w = data.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes(w.try_into().ok()?) as usize)
    };
    let (namesz, descsz) = (word(0)?, word(4)?);
    let desc_at = 12usize.checked_add(namesz.checked_next_multiple_of(4)?)?;
    let desc = data.get(desc_at..desc_at.checked_add(descsz)?)?;
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
            let v = match v.strip_prefix("SM") {
                Some(n) => format!("sm_{n}"),
                None => v.to_string(),
            };
            return crate::ptx::target_arch(&v);
        }
    }
    None
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
}
