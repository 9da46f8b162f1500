//! A cubin is an ELF file whose kernel entry points are FUNC symbols marked STO_CUDA_ENTRY.

use object::read::elf::{ElfFile64, FileHeader, Sym};
use object::{Object, ObjectSymbol};

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
pub fn sm(bytes: &[u8]) -> Result<u32> {
    let header = bytes
        .get(..64)
        .ok_or_else(|| Error::Cubin("shorter than an ELF header".into()))?;
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

/// Kernel entry symbols (mangled names as the driver looks them up), sorted.
pub fn kernels(bytes: &[u8]) -> Result<Vec<String>> {
    let file =
        ElfFile64::<object::Endianness>::parse(bytes).map_err(|e| Error::Cubin(e.to_string()))?;
    let endian = file.endian();
    if file.elf_header().e_machine(endian) != EM_CUDA {
        return Err(Error::Cubin(format!(
            "not a CUDA ELF (e_machine {}, expected {EM_CUDA})",
            file.elf_header().e_machine(endian)
        )));
    }
    let mut names = Vec::new();
    for sym in file.symbols() {
        let raw = sym.elf_symbol();
        let is_func = raw.st_type() == object::elf::STT_FUNC;
        if is_func && raw.st_other() & STO_CUDA_ENTRY != 0 {
            let name = sym.name().map_err(|e| Error::Cubin(e.to_string()))?;
            names.push(name.to_string());
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
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
            assert_eq!(super::sm(&header(8, flags)).unwrap(), sm, "{flags:#x}");
        }
        // CUDA <= 12 (ABI version 7): EF_CUDA_SM in the low byte; sm_80 is 0x500550.
        assert_eq!(super::sm(&header(7, 0x0050_0550)).unwrap(), 80);
        let mut not_cuda = header(8, 0x0600_5004);
        not_cuda[18] = 62;
        assert!(super::sm(&not_cuda).is_err());
        assert!(super::sm(&header(8, 0)[..40]).is_err());
    }
}
