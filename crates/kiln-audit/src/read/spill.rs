//! Where a member's bytes are kept while it is analysed: in memory up to [`IN_MEMORY`], past
//! that in an unlinked temporary file (O_TMPFILE under TMPDIR) mapped read-only. A 240 MB
//! library then costs page cache, not resident memory: the analysis touches its pages as it
//! goes and [`Kept::release`] hands back each range once read (device code is most of such a
//! library). The file is private to this process, so the SIGBUS concern that keeps inputs off
//! mmap (source.rs) does not arise: nobody else holds it to truncate.

use std::io::Write;

/// Members larger than this are spilled to a temporary file.
pub const IN_MEMORY: usize = 32 << 20;

/// Collects a member's bytes as they are inflated.
pub struct Keeper {
    mem: Vec<u8>,
    /// Written unbuffered: members arrive in 256 KiB chunks, and a buffer in between only
    /// copied each one once more.
    file: Option<std::fs::File>,
    len: u64,
    /// Spill from the first byte: the member is declared larger than [`IN_MEMORY`], so
    /// holding its first 32 MiB in memory only to copy them out would raise the peak.
    spill_at_once: bool,
    /// No temporary file could be made: everything stays in memory.
    no_file: bool,
}

/// Largest buffer a thread keeps for the next member: members come and go by the thousand
/// (30,000 small libraries in one hostile wheel), and one buffer per thread, reused, is one
/// allocation fewer per member. (Alone it did not bound that wheel's memory: see
/// [`MMAP_FROM`].) Larger buffers are freed (the allocator maps those and returns them).
const POOLED: usize = 1 << 20;

thread_local! {
    static POOL: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Allocations from this size up are mapped by glibc's malloc rather than carved from the heap
/// (M_MMAP_THRESHOLD), and the threshold stops adapting. Every wheel member gets its own inflater
/// (the zip crate's 32 KiB input buffer and zlib's window and state, freed after the member),
/// and the facts kept between them split the freed chunks, so each member left a hole the next
/// one's buffers did not fit: 30,000 small libraries (a 58 MB wheel) peaked at 1,100 MB, with
/// 110 MB when such buffers are mapped (measured with GLIBC_TUNABLES
/// glibc.malloc.mmap_threshold=32768, the value set here; a clean wheel of as many libraries
/// peaks at 103 MB). Mapped buffers go back to the kernel when freed.
const MMAP_FROM: i32 = 32 << 10;

/// From this many members (or files) up the heap is bounded by [`MMAP_FROM`]. Below it the
/// holes cannot add up (a few tens of KiB each), and mapping every larger buffer costs page
/// faults on fresh zeroed pages for each member: cupy-cuda13x 14.2.0 (2,438 members) took 0.61 s
/// wall, 0.40 s of it in the kernel, with the threshold fixed, and 0.45 s / 0.11 s without it
/// (2 cores, median of 3).
pub const BOUND_HEAP_FROM: usize = 4096;

/// Sets [`MMAP_FROM`] once per process for an input of `members` members or files, when there
/// are at least [`BOUND_HEAP_FROM`] of them (glibc only; other allocators are left alone).
/// glibc's mallopt takes the arena lock, so it may be called with reader threads running.
pub fn bound_heap(members: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if members >= BOUND_HEAP_FROM {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: mallopt only changes allocator parameters.
        ONCE.call_once(|| unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_FROM);
        });
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = members;
}

/// Hands a member's buffer back to this thread's pool (emptied), unless it is large.
fn recycle(mut v: Vec<u8>) {
    if v.capacity() <= POOLED {
        v.clear();
        POOL.with_borrow_mut(|p| {
            if p.capacity() < v.capacity() {
                *p = v;
            }
        });
    }
}

/// Bytes of a spilled member kept in memory for [`Keeper::head`].
const HEAD: usize = 64;

impl Keeper {
    /// A keeper for a member declared to inflate to `declared` bytes (a claim: a member that
    /// inflates to more is still spilled past [`IN_MEMORY`]).
    pub fn for_size(declared: u64) -> Keeper {
        let spill_at_once = declared > IN_MEMORY as u64;
        // The declared size, when it is to be held: growing by doubling copied every member
        // about twice over. A claim, so bounded by what memory holds anyway. Small members
        // reuse the thread's buffer (see [`POOLED`]).
        let mem = if spill_at_once {
            Vec::new()
        } else {
            let mut v = POOL.with_borrow_mut(std::mem::take);
            v.reserve(declared.min(IN_MEMORY as u64) as usize);
            v
        };
        Keeper {
            mem,
            file: None,
            len: 0,
            spill_at_once,
            no_file: false,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Stops keeping bytes (the member is not analysed); the buffer goes back to the pool.
    pub fn stop(&mut self) {
        recycle(std::mem::take(&mut self.mem));
        self.len = 0;
    }

    /// The first bytes kept (at most `n`): enough to sniff the kind.
    pub fn head(&self, n: usize) -> &[u8] {
        &self.mem[..self.mem.len().min(n)]
    }

    pub fn extend(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.len += data.len() as u64;
        if let Some(f) = &mut self.file {
            return f.write_all(data);
        }
        let fits = !self.spill_at_once && self.mem.len() + data.len() <= IN_MEMORY;
        if fits || self.no_file {
            self.mem.extend_from_slice(data);
            return Ok(());
        }
        // Past the threshold: move what is held to a temporary file, keeping the first bytes for
        // `head`. Without a file (no writable TMPDIR), keep going in memory: slower to bound,
        // never a wrong verdict.
        match tempfile::tempfile() {
            Ok(f) => {
                let mut w = f;
                w.write_all(&self.mem)?;
                w.write_all(data)?;
                let mut head = std::mem::take(&mut self.mem);
                head.extend_from_slice(&data[..data.len().min(HEAD)]);
                head.truncate(HEAD);
                self.mem = head;
                self.file = Some(w);
            }
            Err(_) => {
                self.no_file = true;
                self.mem.extend_from_slice(data);
            }
        }
        Ok(())
    }

    pub fn finish(self) -> std::io::Result<Kept> {
        match self.file {
            None => Ok(Kept::Memory(self.mem)),
            Some(f) => {
                // SAFETY: the file is an unlinked temporary only this process holds; nothing
                // writes or truncates it while it is mapped.
                let map = unsafe { memmap2::Mmap::map(&f)? };
                Ok(Kept::Mapped(map))
            }
        }
    }
}

pub enum Kept {
    Memory(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Kept {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Kept::Memory(v) => v,
            Kept::Mapped(m) => m,
        }
    }
}

impl Kept {
    /// Done with the bytes: an in-memory buffer goes back to the thread's pool.
    pub fn recycle(self) {
        if let Kept::Memory(v) = self {
            recycle(v);
        }
    }

    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Kept::Memory(v) => v,
            Kept::Mapped(m) => m.to_vec(),
        }
    }

    pub fn is_mapped(&self) -> bool {
        matches!(self, Kept::Mapped(_))
    }
}

/// Hands the whole pages inside `bytes` back to the kernel when they belong to a mapped
/// member (`mapped`); later reads fault them in again from the file, unchanged. No-op for
/// bytes in memory, whose pages would read back as zeros.
pub fn release(bytes: &[u8], mapped: bool) {
    if !mapped || bytes.is_empty() {
        return;
    }
    let page = 4096usize;
    let start = (bytes.as_ptr() as usize).next_multiple_of(page);
    let end = (bytes.as_ptr() as usize + bytes.len()) / page * page;
    if end > start {
        // SAFETY: [start, end) lies inside `bytes`, a read-only private file mapping; DONTNEED
        // drops the pages from this process, and the next access reads them from the file.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}
