//! The `.note.dlopen` ELF note (FDO "ELF dlopen metadata", <https://systemd.io/ELF_DLOPEN_METADATA/>):
//! declares every library kiln-runtime dlopens — `libcuda.so.1` and the pinned cuBLAS, cuDNN
//! and NCCL sonames — so `kiln audit` (and distribution tooling) can check they resolve.
//! build.rs writes the note bytes from the pins.

#[repr(C, align(4))]
struct Note<const N: usize>([u8; N]);

const BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/note.dlopen.bin"));

#[used]
#[link_section = ".note.dlopen"]
static NOTE: Note<{ BYTES.len() }> = Note(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/note.dlopen.bin"
)));

/// The JSON payload of the note.
pub const DLOPEN_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/dlopen.json"));

/// Referenced from `Gpu::new` so the linker keeps this object (and the note) in any binary or
/// extension that uses kiln-runtime.
#[inline(never)]
pub(crate) fn keep() {
    // SAFETY: reading one byte of a static.
    unsafe { std::ptr::read_volatile(NOTE.0.as_ptr()) };
}
