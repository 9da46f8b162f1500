//! One binary's facts: an ELF read (`elf`), then its device code — `.nv_fatbin`, the data
//! sections a library loads device code from itself, `__nv_relfatbin` (`device`) — with each
//! part's pages handed back once read (`spill`); and a whole file read into memory and hashed.

use kiln_wheel::record::{Hasher, MemberDigest};

use crate::facts::Binary;
use crate::options::Options;
use crate::read::device;
use crate::read::elf;
use crate::read::source::Source;
use crate::read::spill;

/// The whole source, read (never mapped) and hashed: into memory, or past [`spill::IN_MEMORY`]
/// into a mapped temporary file as wheel members are, so a large lone ELF or directory file
/// costs no more memory than a wheel member. A file that shrinks meanwhile is an error.
pub(crate) fn read_kept(src: &Source) -> std::io::Result<(spill::Kept, MemberDigest)> {
    let len = src.len();
    let mut kept = spill::Keeper::for_size(len);
    let mut hasher = Hasher::default();
    let mut chunk = vec![0u8; 1 << 20];
    while kept.len() < len {
        let n = src.read_at(kept.len(), &mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the file shrank while it was read ({len} bytes when opened, {} read)",
                    kept.len()
                ),
            ));
        }
        let n = n.min((len - kept.len()) as usize);
        hasher.update(&chunk[..n]);
        kept.extend(&chunk[..n])?;
    }
    Ok((kept.finish()?, hasher.finish()))
}

/// ELF facts and device code of one binary held in memory.
pub fn analyse(path: &str, bytes: &[u8], opts: &Options) -> Binary {
    analyse_with(path, bytes, opts, false)
}

/// `mapped`: `bytes` is a spilled member's mapping, whose pages are handed back as each part
/// is read (spill.rs).
pub(crate) fn analyse_with(path: &str, bytes: &[u8], opts: &Options, mapped: bool) -> Binary {
    let mut b = Binary {
        path: path.to_string(),
        size: bytes.len() as u64,
        elf: None,
        device: None,
        relocatable: None,
        elf_error: None,
        device_error: None,
    };
    let read = elf::read_with(bytes, mapped);
    // The headers, symbols and read-only data elf::read touched: handed back (spill.rs).
    spill::release(bytes, mapped);
    match read {
        Ok(facts) => {
            if let Some(range) = facts.nv_fatbin.clone() {
                match device::read_with(&bytes[range.clone()], opts.list_kernels, mapped) {
                    Ok(d) => b.device = Some(d),
                    Err(e) => b.device_error = Some(e.to_string()),
                }
                spill::release(&bytes[range], mapped);
            }
            // Device code the library loads itself, from any other data section.
            for (name, range) in &facts.data_sections {
                let first = b.device.as_ref().map_or(0, |d| d.containers);
                let (images, entries) = device::scan(
                    name,
                    &bytes[range.clone()],
                    first,
                    opts.list_kernels,
                    mapped,
                );
                spill::release(&bytes[range.clone()], mapped);
                if images > 0 {
                    let d = b.device.get_or_insert_with(|| device::DeviceCode {
                        containers: 0,
                        entries: Vec::new(),
                        kernels_listed: opts.list_kernels,
                    });
                    d.containers += images;
                    d.entries.extend(entries);
                }
            }
            if let Some(range) = facts.relfatbin.clone() {
                // Relocatable device code has the .nv_fatbin layout; reported apart, from its
                // entry headers, counted for nothing.
                b.relocatable = device::read_relocatable(&bytes[range.clone()], mapped).ok();
                spill::release(&bytes[range], mapped);
            }
            b.elf = Some(facts);
        }
        Err(e) => b.elf_error = Some(e.to_string()),
    }
    b
}
