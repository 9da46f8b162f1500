//! The caller's CUDA stream: which stream an op runs on, whether it is capturing a CUDA graph,
//! and the event fence that orders one stream after another.
//!
//! kiln never owns the streams it runs on: a [`Stream`] is a borrowed `CUstream` handle that
//! the caller (torch, cupy, an inference engine, cudarc) created and keeps alive for as long as
//! work or memory of kiln's is on it. See `docs/streams.md` for the rules.

use cudarc::driver::{result, sys};

use crate::error::{driver_message, Error, Result};

/// A CUDA stream handle kiln launches on (borrowed; the caller keeps it alive).
///
/// Special handles (CUDA driver API): `0` (NULL) and `1` (`CU_STREAM_LEGACY`) are the legacy
/// default stream, `2` (`CU_STREAM_PER_THREAD`) the calling thread's per-thread default stream.
/// `0` and `1` are the same stream and compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stream(u64);

// SAFETY: a CUstream handle may be used from any thread of the process.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    /// The context's legacy default (NULL) stream: ordered with every blocking stream.
    pub const LEGACY: Stream = Stream(0);
    /// The per-thread default stream of the calling thread (`CU_STREAM_PER_THREAD`).
    pub const PER_THREAD: Stream = Stream(2);

    /// A stream from its raw `CUstream` value (e.g. `torch.cuda.Stream.cuda_stream`).
    ///
    /// # Safety
    /// `handle` must be 0, 1, 2 or a live stream of the context of the GPU it is used with, and
    /// must stay alive while kiln work or kiln memory is on it.
    pub unsafe fn from_raw(handle: u64) -> Stream {
        // CU_STREAM_LEGACY is the NULL stream under another name.
        Stream(if handle == 1 { 0 } else { handle })
    }

    /// The stream of a cudarc [`cudarc::driver::CudaStream`] (borrowed: keep the `CudaStream`
    /// alive while kiln work or memory is on it).
    pub fn of(stream: &cudarc::driver::CudaStream) -> Stream {
        Stream(stream.cu_stream() as u64)
    }

    /// The raw `CUstream`.
    pub fn raw(self) -> sys::CUstream {
        self.0 as sys::CUstream
    }

    /// The handle as an integer (0 for the legacy default stream).
    pub fn handle(self) -> u64 {
        self.0
    }

    /// The value DLPack's `__dlpack__(stream=...)` uses for this stream: the legacy default
    /// stream is 1 there (0 is disallowed by the array API standard), the others their handle.
    pub fn dlpack_value(self) -> i64 {
        if self.0 == 0 {
            1
        } else {
            self.0 as i64
        }
    }

    /// Whether this stream is capturing a CUDA graph now ([`Capture`]). One driver call
    /// (`cuStreamIsCapturing`), legal during capture.
    pub fn capture(self) -> Capture {
        // SAFETY: the handle is a live stream of the current context (the caller's promise).
        match unsafe { result::stream::is_capturing(self.raw()) } {
            Ok(sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE) => Capture::None,
            Ok(sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE) => Capture::Active,
            Ok(_) => Capture::Invalidated,
            // The legacy stream while another (blocking) stream of the context captures in
            // global mode: using it would join that capture implicitly.
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT => Capture::Implicit,
            Err(_) => Capture::Invalidated,
        }
    }

    /// [`Error::Capture`] when this stream is capturing: for the operations that cannot be
    /// recorded into a CUDA graph (they wait for the GPU or read results back). Checked before
    /// anything is enqueued, so the capture stays valid.
    pub fn refuse_capture(self, op: &str, why: &str) -> Result<()> {
        match self.capture() {
            Capture::None => Ok(()),
            state => Err(Error::Capture(format!(
                "{op} cannot run while stream {:#x} is capturing a CUDA graph ({state:?}): {why}",
                self.0
            ))),
        }
    }
}

/// A stream's CUDA-graph capture state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capture {
    /// Not capturing: work runs now.
    None,
    /// Capturing: work is recorded into a graph.
    Active,
    /// Its capture was invalidated by an illegal call (it ends with an error).
    Invalidated,
    /// The legacy stream while a blocking stream of the context captures (global mode).
    Implicit,
}

/// A reusable CUDA event (timing disabled) that makes one stream wait for another's work so
/// far: `cuEventRecord(producer)` + `cuStreamWaitEvent(consumer)`. Both calls are stream
/// operations, legal during capture, and never block the host. Re-recording later does not
/// affect a wait already enqueued, so one event serves every fence (under the caller's lock).
pub(crate) struct Fence(sys::CUevent);

// SAFETY: an event handle may be used from any thread; callers serialise through a Mutex.
unsafe impl Send for Fence {}

impl Fence {
    pub(crate) fn new() -> Result<Fence> {
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(Fence)
            .map_err(|e| Error::driver("cuEventCreate", e))
    }

    /// Orders `consumer`'s later work after everything enqueued on `producer` so far. A no-op
    /// when they are the same stream.
    pub(crate) fn order(&self, producer: Stream, consumer: Stream) -> Result<()> {
        if producer == consumer {
            return Ok(());
        }
        // SAFETY: the event belongs to the current context; both streams are live (caller).
        unsafe { result::event::record(self.0, producer.raw()) }
            .map_err(|e| Error::driver("cuEventRecord", e))?;
        // SAFETY: as above.
        let r = unsafe { sys::cuStreamWaitEvent(consumer.raw(), self.0, 0) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::Driver {
                call: "cuStreamWaitEvent".into(),
                message: driver_message(result::DriverError(r)),
            });
        }
        Ok(())
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        // SAFETY: created by event::create, destroyed once.
        unsafe {
            let _ = result::event::destroy(self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_names_are_one_stream() {
        // SAFETY: special handles, never dereferenced here.
        let one = unsafe { Stream::from_raw(1) };
        assert_eq!(one, Stream::LEGACY);
        assert_eq!(Stream::LEGACY.dlpack_value(), 1);
        assert_eq!(Stream::PER_THREAD.dlpack_value(), 2);
        let s = unsafe { Stream::from_raw(0x5555_0000) };
        assert_eq!(s.dlpack_value(), 0x5555_0000);
        assert_eq!(s.handle(), 0x5555_0000);
        assert_ne!(s, Stream::LEGACY);
    }
}
