//! A cubin is an ELF file whose kernel entry points are FUNC symbols marked STO_CUDA_ENTRY.

use object::read::elf::{ElfFile64, FileHeader, Sym};
use object::{Object, ObjectSymbol};

use crate::{Error, Result};

/// `st_other` flag that marks a `__global__` function (a launchable kernel).
const STO_CUDA_ENTRY: u8 = 0x10;
const EM_CUDA: u16 = 190;

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
