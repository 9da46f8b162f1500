//! Recycling of op outputs, per stream (the scheme of torch's caching allocator).
//!
//! Measured on an H200 (GPU bundle, decode sizes): a `cuMemAllocAsync` + `cuMemFreeAsync` pair
//! per call costs about 1.1 µs of *GPU* time per op on the stream's timeline — more than a
//! decode-sized kernel's own difference to torch. So a dropped output's block goes to a free
//! list keyed by (stream, size class) instead of back to the driver, and the next output of
//! that size on that stream takes it with no driver call at all. Reuse on the same stream is
//! safe without events: the block was handed back (on the host) after every use of it was
//! enqueued on that stream, so any later use is ordered after them by the stream itself.
//! Readers on *other* streams must be ordered by the caller, exactly as for torch's allocator.
//!
//! Not used under CUDA-graph capture: there, outputs are the graph's own allocations
//! (`cuMemAllocAsync` on the capturing stream), so that replays never write into memory that
//! eager work has been given since.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::stream::Stream;

/// Blocks above this size are not kept (a fresh allocation costs little next to their use).
const MAX_BLOCK: usize = 64 << 20;
/// At most this many bytes wait in the free lists of one GPU; beyond it blocks are freed.
const MAX_CACHED: usize = 2 << 30;
/// Smallest size class.
const MIN_CLASS: usize = 512;

/// The size class a request of `nbytes` is served from (None: not cached).
pub(crate) fn class(nbytes: usize) -> Option<usize> {
    (nbytes <= MAX_BLOCK).then(|| nbytes.max(MIN_CLASS).next_power_of_two())
}

#[derive(Default)]
pub(crate) struct BlockCache {
    inner: Mutex<Lists>,
}

#[derive(Default)]
struct Lists {
    free: HashMap<(Stream, usize), Vec<u64>>,
    bytes: usize,
}

impl BlockCache {
    /// A free block of `class` bytes last used on `stream`, if any.
    pub(crate) fn take(&self, stream: Stream, class: usize) -> Option<u64> {
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let ptr = l.free.get_mut(&(stream, class))?.pop()?;
        l.bytes -= class;
        Some(ptr)
    }

    /// Keeps a block for reuse on `stream`; false when the cache is full (free it instead).
    pub(crate) fn give(&self, stream: Stream, class: usize, ptr: u64) -> bool {
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if l.bytes + class > MAX_CACHED {
            return false;
        }
        l.bytes += class;
        l.free.entry((stream, class)).or_default().push(ptr);
        true
    }

    /// Every cached block, emptying the cache.
    pub(crate) fn drain(&self) -> Vec<(u64, Stream)> {
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        l.bytes = 0;
        l.free
            .drain()
            .flat_map(|((s, _), v)| v.into_iter().map(move |p| (p, s)))
            .collect()
    }

    /// Bytes waiting in the free lists.
    pub(crate) fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_powers_of_two_from_512() {
        assert_eq!(class(1), Some(512));
        assert_eq!(class(512), Some(512));
        assert_eq!(class(513), Some(1024));
        assert_eq!(class(8192), Some(8192));
        assert_eq!(class(MAX_BLOCK), Some(MAX_BLOCK));
        assert_eq!(class(MAX_BLOCK + 1), None);
    }

    #[test]
    fn blocks_come_back_per_stream_and_class() {
        let c = BlockCache::default();
        // SAFETY: handles are only compared here, never used.
        let (s1, s2) = unsafe { (Stream::from_raw(0x10), Stream::from_raw(0x20)) };
        assert!(c.give(s1, 512, 0xa000));
        assert!(c.give(s1, 1024, 0xb000));
        assert_eq!(
            c.take(s2, 512),
            None,
            "a block never moves to another stream"
        );
        assert_eq!(c.take(s1, 1024), Some(0xb000));
        assert_eq!(c.bytes(), 512);
        assert_eq!(c.take(s1, 512), Some(0xa000));
        assert_eq!(c.take(s1, 512), None);
        assert!(c.give(s2, MAX_BLOCK, 1));
        assert_eq!(c.drain(), vec![(1, s2)]);
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn a_full_cache_refuses() {
        let c = BlockCache::default();
        let n = MAX_CACHED / MAX_BLOCK;
        for i in 0..n {
            assert!(c.give(Stream::LEGACY, MAX_BLOCK, i as u64));
        }
        assert!(!c.give(Stream::LEGACY, MAX_BLOCK, 99));
    }
}
