//! Device memory: [`View`] borrows it (from DLPack, torch, cupy …), [`Tensor`] owns it.

use cudarc::driver::result;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::stream::Stream;

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
/// never aliases an input).
///
/// Allocated stream-ordered on the stream of the [`Gpu`] handle that made it (a block that
/// stream dropped earlier, else `cuMemAllocAsync` from the device's default pool; see
/// [`crate::cache`]) and given back in that stream's order when dropped — so it may be dropped
/// as soon as the last op using it is enqueued on that stream. Allocated while the stream
/// captures a CUDA graph, it is a graph allocation (the graph's memory node). Work on
/// other streams that reads it must be ordered first (DLPack export does this) and must not
/// outlive it, as with torch's allocator.
pub struct Tensor {
    /// At least one byte: the driver refuses zero-byte allocations.
    ptr: u64,
    nbytes: usize,
    dtype: DType,
    shape: Vec<usize>,
    /// The GPU and the stream the memory was allocated (and its producer ran) on.
    gpu: Gpu,
    /// Allocated while the stream was capturing (a graph allocation).
    graph: bool,
    /// Its size class in the GPU's block cache (None: not recycled).
    class: Option<usize>,
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // The free is enqueued on the tensor's stream, in its context: bind it even when the
        // last reference goes away on another thread (e.g. Python's garbage collector).
        let _restore = crate::ContextGuard::save();
        if self.gpu.bind().is_ok() {
            self.gpu
                .release(self.ptr, self.gpu.work_stream(), self.class, self.graph);
        }
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("gpu", &self.gpu.ordinal())
            .field(
                "stream",
                &format_args!("{:#x}", self.gpu.work_stream().handle()),
            )
            .finish()
    }
}

impl Tensor {
    /// Uninitialised device memory for `shape` × `dtype` (every op writes all of it), on
    /// `gpu`'s stream. Capture-safe: under capture it becomes the graph's allocation.
    pub(crate) fn alloc(gpu: &Gpu, dtype: DType, shape: Vec<usize>) -> Result<Tensor> {
        let nbytes = numel(&shape)
            .checked_mul(dtype.size())
            .ok_or_else(|| Error::Shape(format!("{shape:?} × {} bytes overflows", dtype.size())))?;
        gpu.bind()?;
        let (ptr, class, graph) = gpu.alloc_output(nbytes)?;
        Ok(Tensor {
            ptr,
            nbytes,
            dtype,
            shape,
            gpu: gpu.clone(),
            graph,
            class,
        })
    }

    /// Copies host bytes (native-endian elements of `dtype`, row-major) to a new tensor on
    /// `gpu`'s stream. Not capturable (a copy from pageable host memory): refused with
    /// [`Error::Capture`] while the stream captures.
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
        gpu.bind()?;
        gpu.work_stream().refuse_capture(
            "copying host data to the GPU",
            "a copy from pageable host memory cannot be recorded; copy before capturing",
        )?;
        let t = Tensor::alloc(gpu, dtype, shape)?;
        if !bytes.is_empty() {
            // SAFETY: `bytes.len()` bytes at t.ptr; for pageable memory the call returns once
            // the source has been read (staged), so `bytes` may go away after it.
            unsafe { result::memcpy_htod_async(t.ptr, bytes, gpu.work_stream().raw()) }
                .map_err(|e| Error::driver("cuMemcpyHtoDAsync", e))?;
        }
        Ok(t)
    }

    /// Copies the tensor to the host: waits for the work on its stream that writes it.
    /// Refused with [`Error::Capture`] while that stream captures a graph.
    pub fn to_host(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.nbytes];
        if self.nbytes > 0 {
            self.gpu.bind()?;
            let stream = self.gpu.work_stream();
            stream.refuse_capture(
                "reading a tensor back to the host",
                "it waits for the GPU; read results after the graph has run",
            )?;
            // SAFETY: nbytes at self.ptr, on this tensor's stream; synchronised below before
            // `out` is read.
            unsafe { result::memcpy_dtoh_async(&mut out, self.ptr, stream.raw()) }
                .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))?;
            // SAFETY: a live stream of this context.
            unsafe { result::stream::synchronize(stream.raw()) }
                .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
        }
        Ok(out)
    }

    /// A borrowed view of the whole tensor.
    pub fn view(&self) -> View {
        View {
            ptr: self.ptr,
            dtype: self.dtype,
            shape: self.shape.clone(),
        }
    }

    /// `CUdeviceptr` of the first element.
    pub fn ptr(&self) -> u64 {
        self.ptr
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
        self.gpu.ordinal()
    }

    /// The stream the tensor was allocated and produced on; work on other streams must be
    /// ordered after it ([`Gpu::order_after`]) before reading it.
    pub fn stream(&self) -> Stream {
        self.gpu.work_stream()
    }

    /// Whether the memory is a CUDA graph's allocation (made while its stream was capturing).
    pub fn is_graph_allocation(&self) -> bool {
        self.graph
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
