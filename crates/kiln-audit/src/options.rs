//! How an input is read: limits, what to decompress, and a progress callback. Shared by the
//! readers and the entry points; holds no findings and no policy.

/// What to read and how much: the limits that keep a hostile input bounded.
#[derive(Debug, Clone)]
pub struct Options {
    /// Decompress every cubin to list its kernels (the coverage matrix and per-kernel rule).
    pub list_kernels: bool,
    /// Largest wheel member inflated, in bytes (zip-bomb guard).
    pub max_member_size: u64,
    /// Largest input, in bytes: the file, the members' declared or inflated sizes, or a
    /// directory's files together.
    pub max_total_size: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            list_kernels: true,
            max_member_size: 4 << 30,
            max_total_size: 32 << 30,
        }
    }
}

/// Progress of long reads, in bytes; called from worker threads.
pub trait Progress: Sync {
    /// A read of `total` bytes, described by `what`, starts.
    fn begin(&self, total: u64, what: &str);
    /// `bytes` more were read.
    fn advance(&self, bytes: u64);
    /// The read is over.
    fn end(&self);
}

/// Progress nobody watches.
pub struct NoProgress;
impl Progress for NoProgress {
    fn begin(&self, _: u64, _: &str) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}
