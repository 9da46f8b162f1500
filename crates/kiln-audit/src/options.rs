//! How an input is read: limits, what to decompress, and a progress callback. Shared by the
//! readers and the entry points; holds no findings and no policy.

#[derive(Debug, Clone)]
pub struct Options {
    /// Decompress every cubin to list its kernels (the coverage matrix and per-kernel rule).
    pub list_kernels: bool,
    pub max_member_size: u64,
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
    fn begin(&self, total: u64, what: &str);
    fn advance(&self, bytes: u64);
    fn end(&self);
}

pub struct NoProgress;
impl Progress for NoProgress {
    fn begin(&self, _: u64, _: &str) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}
