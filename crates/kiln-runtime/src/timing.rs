//! GPU-side timing with CUDA events on the handle's stream, for benchmarks: batches of
//! back-to-back calls between two events, so the figure is device time per call, not host
//! launch latency.

use cudarc::driver::{result, sys};

use crate::error::{Error, Result};
use crate::gpu::Gpu;

struct Event(sys::CUevent);
impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by event::create, destroyed once.
        unsafe {
            let _ = result::event::destroy(self.0);
        }
    }
}

impl Gpu {
    /// Runs `f` `warmup` times, then `batches` × `per_batch` times; returns milliseconds per
    /// call for each batch (sort and take the median yourself).
    pub fn time_calls(
        &self,
        warmup: usize,
        batches: usize,
        per_batch: usize,
        mut f: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        self.bind()?;
        let ev = || {
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map(Event)
                .map_err(|e| Error::driver("cuEventCreate", e))
        };
        let (start, end) = (ev()?, ev()?);
        for _ in 0..warmup {
            f()?;
        }
        self.synchronize()?;
        let stream = self.work_stream().raw();
        let per_batch = per_batch.max(1);
        let mut out = Vec::with_capacity(batches);
        for _ in 0..batches {
            // SAFETY: events and stream belong to this context.
            unsafe { result::event::record(start.0, stream) }
                .map_err(|e| Error::driver("cuEventRecord", e))?;
            for _ in 0..per_batch {
                f()?;
            }
            unsafe { result::event::record(end.0, stream) }
                .map_err(|e| Error::driver("cuEventRecord", e))?;
            unsafe { result::event::synchronize(end.0) }
                .map_err(|e| Error::driver("cuEventSynchronize", e))?;
            let ms = unsafe { result::event::elapsed(start.0, end.0) }
                .map_err(|e| Error::driver("cuEventElapsedTime", e))?;
            out.push(ms as f64 / per_batch as f64);
        }
        Ok(out)
    }
}
