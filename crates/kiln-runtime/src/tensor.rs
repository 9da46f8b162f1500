//! Device memory: [`View`] borrows it (from DLPack, torch, cupy …), [`Tensor`] owns it.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::Gpu;

/// Borrowed, contiguous, row-major device memory: a `CUdeviceptr`, its element type and shape.
/// The caller keeps the memory alive (and on this GPU) while an op that reads it runs; ops
/// check that the pointer is device memory of the GPU they run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// `CUdeviceptr` of the first element.
    pub ptr: u64,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl View {
    pub fn new(ptr: u64, dtype: DType, shape: Vec<usize>) -> View {
        View { ptr, dtype, shape }
    }

    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }
}

pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Owned device memory on one GPU: what every op returns (a fresh allocation, so an output
/// never aliases an input). Freed on drop, in stream order on the legacy default stream.
pub struct Tensor {
    /// At least one byte: the driver refuses zero-byte allocations.
    /// Dropped by hand in `Drop`, between binding its context and restoring the caller's.
    buf: std::mem::ManuallyDrop<CudaSlice<u8>>,
    nbytes: usize,
    dtype: DType,
    shape: Vec<usize>,
    ordinal: usize,
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // The free is stream-ordered on the current context: make it this tensor's context even
        // when the last reference goes away on another thread (e.g. Python's garbage collector).
        let _restore = crate::ContextGuard::save();
        let _ = self.buf.stream().context().bind_to_thread();
        // SAFETY: dropped exactly once, here; `buf` is never used after.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.buf) };
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("ptr", &format_args!("{:#x}", self.ptr()))
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("gpu", &self.ordinal)
            .finish()
    }
}

impl Tensor {
    /// Uninitialised device memory for `shape` × `dtype` (every op writes all of it).
    pub(crate) fn alloc(gpu: &Gpu, dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
        let nbytes = numel(&shape)
            .checked_mul(dtype.size())
            .ok_or_else(|| Error::Shape(format!("{shape:?} × {} bytes overflows", dtype.size())))?;
        let stream: &Arc<CudaStream> = gpu.stream();
        // SAFETY: the memory is written by the op (or the copy) that asked for it before use.
        let buf = unsafe { stream.alloc::<u8>(nbytes.max(1)) }
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        Ok(Tensor {
            buf: std::mem::ManuallyDrop::new(buf),
            nbytes,
            dtype,
            shape,
            ordinal: gpu.ordinal(),
        })
    }

    /// Copies host bytes (native-endian elements of `dtype`, row-major) to a new tensor.
    pub fn from_host(gpu: &Gpu, bytes: &[u8], dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
        let want = numel(&shape).checked_mul(dtype.size());
        if want != Some(bytes.len()) {
            return Err(Error::Shape(format!(
                "{} bytes given for a {dtype} tensor of shape {shape:?} ({} bytes)",
                bytes.len(),
                want.map(|w| w.to_string())
                    .unwrap_or_else(|| "overflowing".into())
            )));
        }
        let mut t = Tensor::alloc(gpu, dtype, shape)?;
        if !bytes.is_empty() {
            gpu.bind()?;
            let mut dst = t.buf.slice_mut(0..bytes.len());
            gpu.stream()
                .memcpy_htod(bytes, &mut dst)
                .map_err(|e| Error::driver("cuMemcpyHtoD", e))?;
        }
        Ok(t)
    }

    /// Copies the tensor to the host (waits for the work that writes it).
    pub fn to_host(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.nbytes];
        if self.nbytes > 0 {
            let stream = self.buf.stream().clone();
            stream
                .context()
                .bind_to_thread()
                .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
            stream
                .memcpy_dtoh(&self.buf.slice(0..self.nbytes), &mut out)
                .map_err(|e| Error::driver("cuMemcpyDtoH", e))?;
            stream
                .synchronize()
                .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
        }
        Ok(out)
    }

    /// A borrowed view of the whole tensor.
    pub fn view(&self) -> View {
        View {
            ptr: self.ptr(),
            dtype: self.dtype,
            shape: self.shape.clone(),
        }
    }

    /// `CUdeviceptr` of the first element.
    pub fn ptr(&self) -> u64 {
        let (ptr, _sync) = self.buf.device_ptr(self.buf.stream());
        ptr
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// Ordinal of the GPU holding the memory.
    pub fn device(&self) -> usize {
        self.ordinal
    }

    /// Same memory, new shape with the same number of elements.
    pub fn reshape(mut self, shape: Vec<usize>) -> Result<Tensor> {
        if numel(&shape) != self.numel() {
            return Err(Error::Shape(format!(
                "cannot reshape {:?} to {shape:?}",
                self.shape
            )));
        }
        self.shape = shape;
        Ok(self)
    }
}
