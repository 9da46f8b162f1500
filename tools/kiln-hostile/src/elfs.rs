//! Real shared libraries built with the host's gcc in a temp dir, and byte patches that turn
//! them hostile. Offsets are the ELF64 gABI's: e_machine at 18, e_shoff at 40, e_shnum at 60,
//! e_shstrndx at 62; section headers are 64 bytes with sh_type at +4, sh_offset at +24,
//! sh_size at +32, sh_info at +44; `Elf64_Dyn` is 16 bytes (tag, value).

use std::path::Path;
use std::process::Command;

/// The libraries every ELF case starts from.
pub struct Elfs {
    /// NEEDs only libc.
    pub plain: Vec<u8>,
    /// NEEDs `libkilnmissing.so.1` (the soname of `missing`), RUNPATH `$ORIGIN`.
    pub needs_missing: Vec<u8>,
    /// The library `needs_missing` names (soname `libkilnmissing.so.1`).
    pub missing: Vec<u8>,
    /// NEEDs a library by the absolute path it had at link time (no soname on it).
    pub needs_path: Vec<u8>,
    /// Where they were built (scratch for [`with_section`]).
    pub dir: std::path::PathBuf,
}

/// `elf` with a read-only data section `name` holding `data`, added by binutils' objcopy.
pub fn with_section(dir: &Path, elf: &[u8], name: &str, data: &[u8]) -> Result<Vec<u8>, String> {
    let (input, blob, output) = (dir.join("in.so"), dir.join("blob.bin"), dir.join("out.so"));
    std::fs::write(&input, elf).map_err(|e| e.to_string())?;
    std::fs::write(&blob, data).map_err(|e| e.to_string())?;
    let out = Command::new("objcopy")
        .arg("--add-section")
        .arg(format!("{name}={}", blob.display()))
        .arg("--set-section-flags")
        .arg(format!("{name}=alloc,readonly,data"))
        .arg(&input)
        .arg(&output)
        .output()
        .map_err(|e| format!("objcopy: {e} (binutils builds the large-section case)"))?;
    if !out.status.success() {
        return Err(format!("objcopy: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let bytes = std::fs::read(&output).map_err(|e| e.to_string());
    for p in [input, blob, output] {
        let _ = std::fs::remove_file(p);
    }
    bytes
}

pub const MISSING_SONAME: &str = "libkilnmissing.so.1";

fn gcc(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("gcc")
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(|e| format!("gcc: {e} (the hostile cases build real ELFs with gcc)"))?;
    if !out.status.success() {
        return Err(format!(
            "gcc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

pub fn build(dir: &Path) -> Result<Elfs, String> {
    std::fs::write(dir.join("a.c"), "int kiln_a(void) { return 1; }\n")
        .map_err(|e| e.to_string())?;
    std::fs::write(
        dir.join("b.c"),
        // puts: a versioned libc symbol, so the library has a version-needs table.
        "#include <stdio.h>\nint kiln_a(void); int kiln_b(void) { return kiln_a() + puts(\"b\"); }\n",
    )
    .map_err(|e| e.to_string())?;
    gcc(
        dir,
        &[
            "-shared",
            "-fPIC",
            "-o",
            "libplain.so",
            "-Wl,-soname,libplain.so",
            "a.c",
        ],
    )?;
    gcc(
        dir,
        &[
            "-shared",
            "-fPIC",
            "-o",
            MISSING_SONAME,
            &format!("-Wl,-soname,{MISSING_SONAME}"),
            "a.c",
        ],
    )?;
    gcc(
        dir,
        &[
            "-shared",
            "-fPIC",
            "-o",
            "libneeds.so",
            "-Wl,-soname,libneeds.so",
            "-Wl,--enable-new-dtags,-rpath,$ORIGIN",
            "b.c",
            &format!("-l:{MISSING_SONAME}"),
            "-L.",
        ],
    )?;
    gcc(dir, &["-shared", "-fPIC", "-o", "libnosoname.so", "a.c"])?;
    let abs = dir.join("libnosoname.so");
    gcc(
        dir,
        &[
            "-shared",
            "-fPIC",
            "-o",
            "libpath.so",
            "b.c",
            &abs.to_string_lossy(),
        ],
    )?;
    let read = |n: &str| std::fs::read(dir.join(n)).map_err(|e| format!("{n}: {e}"));
    Ok(Elfs {
        dir: dir.to_path_buf(),
        plain: read("libplain.so")?,
        needs_missing: read("libneeds.so")?,
        missing: read(MISSING_SONAME)?,
        needs_path: read("libpath.so")?,
    })
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Section header offsets of every section of `sh_type`.
fn sections_of(elf: &[u8], sh_type: u32) -> Vec<usize> {
    let shoff = u64_at(elf, 40) as usize;
    let shnum = u16_at(elf, 60) as usize;
    (0..shnum)
        .map(|i| shoff + i * 64)
        .filter(|&h| u32_at(elf, h + 4) == sh_type)
        .collect()
}

/// The section table removed (e_shoff, e_shnum, e_shstrndx = 0): ld.so never reads it.
pub fn strip_section_table(elf: &[u8]) -> Vec<u8> {
    let mut e = elf.to_vec();
    e[40..48].fill(0);
    e[60..64].fill(0);
    e
}

/// The `.dynamic` section header pointed at a decoy copy (appended) whose DT_NEEDED entries
/// are DT_DEBUG: tools reading sections see no NEEDED, the loader still loads them.
pub fn decoy_dynamic(elf: &[u8]) -> Vec<u8> {
    const SHT_DYNAMIC: u32 = 6;
    let mut e = elf.to_vec();
    let Some(&h) = sections_of(elf, SHT_DYNAMIC).first() else {
        return e;
    };
    let (off, size) = (u64_at(elf, h + 24) as usize, u64_at(elf, h + 32) as usize);
    let mut copy = elf[off..off + size].to_vec();
    for d in copy.chunks_mut(16) {
        if u64_at(d, 0) == 1 {
            d[..8].copy_from_slice(&21u64.to_le_bytes()); // DT_NEEDED -> DT_DEBUG
        }
    }
    while !e.len().is_multiple_of(8) {
        e.push(0);
    }
    let at = e.len() as u64;
    e.extend_from_slice(&copy);
    e[h + 24..h + 32].copy_from_slice(&at.to_le_bytes());
    e
}

pub fn set_machine(elf: &[u8], machine: u16) -> Vec<u8> {
    let mut e = elf.to_vec();
    e[18..20].copy_from_slice(&machine.to_le_bytes());
    e
}

/// `.gnu.version_r` claims `count` records (sh_info and DT_VERNEEDNUM) and its first record
/// links `next` bytes on, into itself, so a reader that trusts the count walks overlapping
/// garbage (panics if the library has no version needs: the case would test nothing).
pub fn verneed_loop(elf: &[u8], count: u32, next: u32) -> Vec<u8> {
    const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;
    const SHT_DYNAMIC: u32 = 6;
    const DT_VERNEEDNUM: u64 = 0x6fff_ffff;
    let mut e = elf.to_vec();
    let h = *sections_of(elf, SHT_GNU_VERNEED)
        .first()
        .expect("the library has a .gnu.version_r");
    e[h + 44..h + 48].copy_from_slice(&count.to_le_bytes());
    let off = u64_at(elf, h + 24) as usize;
    e[off + 12..off + 16].copy_from_slice(&next.to_le_bytes());
    let d = sections_of(elf, SHT_DYNAMIC)[0];
    let (doff, dsize) = (u64_at(elf, d + 24) as usize, u64_at(elf, d + 32) as usize);
    for at in (doff..doff + dsize).step_by(16) {
        if u64_at(&e, at) == DT_VERNEEDNUM {
            e[at + 8..at + 16].copy_from_slice(&(count as u64).to_le_bytes());
        }
    }
    e
}
