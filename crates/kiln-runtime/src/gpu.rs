//! [`Gpu`]: one device's primary context, kiln's kernel module loaded once from the embedded
//! fatbin, and the stream this handle launches on (the caller's; the legacy default stream
//! unless [`Gpu::on`] says otherwise). Every kernel launch goes through [`Gpu::launch`].

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys, CudaContext, CudaStream};

use crate::cache::BlockCache;
use crate::error::{driver_message, Error, Result};
use crate::handles::Handles;
use crate::loader;
use crate::stream::{Capture, Fence, Stream};
use crate::tensor::View;

/// A handle to one GPU and the stream its ops run on. Cheap to clone (shared); `Send + Sync`.
///
/// [`Gpu::new`] gives a handle on the context's legacy default (NULL) stream, ordered with
/// work that torch, cupy or jax put on their default streams. [`Gpu::on`] gives a handle to
/// the same GPU that launches on the caller's stream instead (no copy of anything, no driver
/// call): kernels, output allocations (stream-ordered) and frees all go there, so ops can be
/// overlapped across streams and captured into CUDA graphs (see `docs/streams.md`).
#[derive(Clone)]
pub struct Gpu {
    inner: Arc<Inner>,
    /// Where this handle's ops run.
    stream: Stream,
    /// Whether ops ask the driver that each input pointer is device memory of this GPU
    /// (`cuPointerGetAttributes`); off only for views whose producer declared that already.
    check_pointers: bool,
}

struct Inner {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: Module,
    sm_count: u32,
    name: String,
    /// cuBLAS / cuDNN handles, owned by their modules' types.
    handles: Handles,
    /// The event [`Gpu::order_after`] records and waits on (created on first use).
    fence: Mutex<Option<Fence>>,
    /// Frees that could not be enqueued when their tensor was dropped (its stream was
    /// capturing a graph the memory is not part of), retried once the stream is free.
    deferred_frees: Mutex<Vec<(u64, Stream)>>,
    has_deferred: AtomicBool,
    /// Dropped outputs kept for reuse on their stream ([`crate::cache`]).
    cache: BlockCache,
}

/// Driver handles are usable from any thread once the context is current there.
struct Module {
    raw: sys::CUmodule,
    functions: Mutex<HashMap<&'static str, Function>>,
    /// Resident blocks per SM for (kernel, block size, dynamic shared memory).
    occupancy: Mutex<HashMap<(&'static str, u32, u32), u32>>,
}
/// A kernel and the most threads per block it can launch with (its register use decides).
#[derive(Clone, Copy)]
struct Function(sys::CUfunction, u32);
unsafe impl Send for Module {}
unsafe impl Sync for Module {}
unsafe impl Send for Function {}

impl Drop for Inner {
    fn drop(&mut self) {
        let _restore = crate::ContextGuard::save();
        let _ = self.ctx.bind_to_thread();
        let _ = self.ctx.synchronize();
        let deferred = self
            .deferred_frees
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default();
        for (ptr, _) in deferred.into_iter().chain(self.cache.drain()) {
            // SAFETY: the context is idle; the memory is kiln's and freed once, here.
            unsafe {
                let _ = result::free_async(ptr, std::ptr::null_mut());
            }
        }
        self.fence.lock().map(|mut f| f.take()).ok();
        self.handles.clear();
        // SAFETY: every function of the module belongs to this Inner, which is going away.
        unsafe {
            let _ = result::module::unload(self.module.raw);
        }
    }
}

impl Gpu {
    /// Opens GPU `ordinal`: loads the driver (`libcuda.so.1`, see [`crate::loader`]), retains
    /// the device's primary context (the one the CUDA runtime, torch and cupy use) and loads
    /// kiln's fatbin into it. Errors, never panics: [`Error::NoDriver`] without a driver,
    /// [`Error::NoDevice`] for an ordinal that does not exist.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        crate::note::keep();
        loader::driver()?;
        guard("opening the GPU", || Gpu::open(ordinal))
    }

    fn open(ordinal: usize) -> Result<Gpu> {
        let count = Gpu::device_count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let ctx =
            CudaContext::new(ordinal).map_err(|e| Error::driver("cuDevicePrimaryCtxRetain", e))?;
        // One stream only (the legacy default stream): no cross-stream event bookkeeping.
        // SAFETY: kiln-runtime never uses a second stream for its allocations.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        if ctx.has_async_alloc() {
            keep_pool_memory(&ctx)?;
        }
        let fatbin = kiln_kernels::fatbin();
        // SAFETY: the fatbin is a valid, 8-byte aligned image that lives for the program.
        let raw = unsafe { result::module::load_data(fatbin.as_ptr() as *const c_void) }.map_err(
            |e| Error::Driver {
                call: "cuModuleLoadData".into(),
                message: format!(
                    "{} — kiln's fatbin has no code this GPU can run (its targets: {})",
                    driver_message(e),
                    kiln_kernels::manifest()
                        .targets
                        .iter()
                        .map(|t| t.target.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
        )?;
        let sm_count = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| Error::driver("cuDeviceGetAttribute", e))? as u32;
        let name = ctx.name().unwrap_or_else(|_| "unknown".into());
        Ok(Gpu {
            inner: Arc::new(Inner {
                ordinal,
                ctx,
                stream,
                module: Module {
                    raw,
                    functions: Mutex::new(HashMap::new()),
                    occupancy: Mutex::new(HashMap::new()),
                },
                sm_count,
                name,
                handles: Handles::default(),
                fence: Mutex::new(None),
                deferred_frees: Mutex::new(Vec::new()),
                has_deferred: AtomicBool::new(false),
                cache: BlockCache::default(),
            }),
            stream: Stream::LEGACY,
            check_pointers: true,
        })
    }

    /// Number of visible CUDA devices ([`Error::NoDriver`] without a driver).
    pub fn device_count() -> Result<usize> {
        loader::driver()?;
        guard("counting devices", || {
            result::init().map_err(|e| Error::driver("cuInit", e))?;
            let n =
                result::device::get_count().map_err(|e| Error::driver("cuDeviceGetCount", e))?;
            Ok(n.max(0) as usize)
        })
    }

    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// The device's name as the driver reports it.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn sm_count(&self) -> u32 {
        self.inner.sm_count
    }

    /// (major, minor) compute capability.
    pub fn compute_capability(&self) -> Result<(u32, u32)> {
        use sys::CUdevice_attribute::*;
        let a = |k| {
            self.inner
                .ctx
                .attribute(k)
                .map_err(|e| Error::driver("cuDeviceGetAttribute", e))
        };
        Ok((
            a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
            a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
        ))
    }

    /// The driver's CUDA version (e.g. 13000 for 13.0), from `cuDriverGetVersion`.
    pub fn driver_version() -> Result<i32> {
        loader::driver()?;
        let mut v = 0i32;
        // SAFETY: writes one int.
        let r = unsafe { sys::cuDriverGetVersion(&mut v) };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(Error::driver("cuDriverGetVersion", result::DriverError(r)));
        }
        Ok(v)
    }

    /// Waits for all work on this GPU's context.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.inner
            .ctx
            .synchronize()
            .map_err(|e| Error::driver("cuCtxSynchronize", e))
    }

    /// This GPU on `stream`: the returned handle's ops (kernels, output allocations, copies)
    /// are enqueued there. The stream must belong to this GPU's context (torch's and cupy's
    /// streams of this device do: they use the primary context) and outlive the work and the
    /// memory kiln puts on it.
    pub fn on(&self, stream: Stream) -> Gpu {
        Gpu {
            inner: self.inner.clone(),
            stream,
            check_pointers: self.check_pointers,
        }
    }

    /// The stream this handle's ops run on.
    pub fn work_stream(&self) -> Stream {
        self.stream
    }

    /// This handle without the per-input `cuPointerGetAttributes` query: for views whose
    /// producer already declared them device memory of this GPU (a DLPack `kDLCUDA` tensor of
    /// this device). Shapes, dtypes and alignment are still checked.
    pub fn trusting_pointers(&self) -> Gpu {
        Gpu {
            inner: self.inner.clone(),
            stream: self.stream,
            check_pointers: false,
        }
    }

    /// The device's primary context (cudarc), e.g. to create streams and capture graphs with
    /// cudarc's API and hand them to [`Gpu::on`] through [`Stream::of`].
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    /// Makes this handle's stream wait (on the GPU, never the host) for everything enqueued
    /// on `producer` so far: an event record + stream wait, legal during graph capture. A
    /// no-op when `producer` is this handle's stream. This is what DLPack's
    /// `__dlpack__(stream=...)` asks of a producer.
    pub fn order_after(&self, producer: Stream) -> Result<()> {
        if producer == self.stream {
            return Ok(());
        }
        self.bind()?;
        let mut slot = self.inner.fence.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(Fence::new()?);
        }
        slot.as_ref().expect("fence").order(producer, self.stream)
    }

    /// The legacy default stream as a cudarc stream (cuBLAS/cuDNN/NCCL handles use it).
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// This GPU's handle of type `H` (see [`Handles`]), created by `create` on first use.
    pub(crate) fn handle<H: Send + 'static>(
        &self,
        create: impl FnOnce() -> Result<H>,
    ) -> Result<Arc<Mutex<H>>> {
        self.inner.handles.get_or_create(create)
    }

    /// Output memory of `nbytes` on this handle's stream, and its cache class (None: a graph
    /// allocation, or too large to cache). Outside capture a recycled block of the stream is
    /// taken when there is one (no driver call); else `cuMemAllocAsync`.
    pub(crate) fn alloc_output(&self, nbytes: usize) -> Result<(u64, Option<usize>, bool)> {
        let stream = self.stream;
        let graph = stream.capture() == Capture::Active;
        let class = if graph {
            None
        } else {
            crate::cache::class(nbytes.max(1))
        };
        if let Some(c) = class {
            if let Some(ptr) = self.inner.cache.take(stream, c) {
                return Ok((ptr, class, graph));
            }
        }
        self.retry_deferred_frees();
        // SAFETY: a stream of this context (the handle's promise); the caller writes the
        // memory before reading it.
        let ptr = unsafe { result::malloc_async(stream.raw(), class.unwrap_or(nbytes.max(1))) }
            .map_err(|e| Error::driver("cuMemAllocAsync", e))?;
        Ok((ptr, class, graph))
    }

    /// Gives back kiln memory allocated on `stream` by [`Gpu::alloc_output`]: into the
    /// stream's free list when it has a cache class, else an async free. Memory allocated
    /// outside a capture cannot be freed into one, so such a free waits in a list until the
    /// stream is no longer capturing (retried at the next allocation, or when the GPU is
    /// dropped). `graph`: allocated while the stream was capturing (a graph allocation).
    pub(crate) fn release(&self, ptr: u64, stream: Stream, class: Option<usize>, graph: bool) {
        if let Some(c) = class {
            if self.inner.cache.give(stream, c, ptr) {
                return;
            }
        }
        let state = stream.capture();
        if state == Capture::None || (state == Capture::Active && graph) {
            // SAFETY: kiln's allocation on `stream`, freed once, in stream order.
            if unsafe { result::free_async(ptr, stream.raw()) }.is_ok() {
                return;
            }
        }
        self.inner
            .deferred_frees
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((ptr, stream));
        self.inner.has_deferred.store(true, Ordering::Release);
    }

    /// Bytes of dropped outputs kept for reuse ([`crate::cache`]).
    pub fn cached_bytes(&self) -> usize {
        self.inner.cache.bytes()
    }

    /// Frees what [`Gpu::release`] had to defer, where the stream is free of capture now.
    pub(crate) fn retry_deferred_frees(&self) {
        if !self.inner.has_deferred.load(Ordering::Acquire) {
            return;
        }
        let mut list = self
            .inner
            .deferred_frees
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        list.retain(|&(ptr, stream)| {
            if stream.capture() != Capture::None {
                return true;
            }
            // SAFETY: as in release. A free that fails (the stream is gone) is not retried.
            let _ = unsafe { result::free_async(ptr, stream.raw()) };
            false
        });
        self.inner
            .has_deferred
            .store(!list.is_empty(), Ordering::Release);
    }

    /// Makes this GPU's context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))
    }

    /// Checks that `view` is device memory of this GPU, aligned for its dtype.
    pub(crate) fn check_view(&self, what: &str, view: &View) -> Result<()> {
        if view.numel() == 0 {
            return Ok(());
        }
        if !view.ptr.is_multiple_of(view.dtype.size() as u64) {
            return Err(Error::Memory(format!(
                "{what}: pointer {:#x} is not aligned to its {} elements",
                view.ptr, view.dtype
            )));
        }
        if !self.check_pointers {
            return Ok(());
        }
        // Device (or managed) memory of this GPU; host memory — even where the GPU could reach
        // it (pinned, or HMM) — is refused: the caller meant a copy. One driver call for both
        // attributes; a pointer CUDA does not know gets memory type 0.
        let mut attrs = [
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        ];
        let (mut kind, mut ordinal): (u32, i32) = (0, -1);
        let mut data = [
            &mut kind as *mut u32 as *mut c_void,
            &mut ordinal as *mut i32 as *mut c_void,
        ];
        // SAFETY: two attributes, each written as a 32-bit int into its slot.
        let r = unsafe {
            sys::cuPointerGetAttributes(2, attrs.as_mut_ptr(), data.as_mut_ptr(), view.ptr)
        };
        let not_device = |why: String| {
            Error::Memory(format!(
                "{what}: {:#x} is not CUDA device memory ({why}) — pass a GPU array, or copy host data with Tensor::from_host",
                view.ptr
            ))
        };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(not_device(driver_message(result::DriverError(r))));
        }
        let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
        let unified = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32;
        if kind != device && kind != unified {
            let why = if kind == 0 {
                "unknown to CUDA".to_string()
            } else {
                format!("memory type {kind}")
            };
            return Err(not_device(why));
        }
        if ordinal != self.inner.ordinal as i32 {
            return Err(Error::Memory(format!(
                "{what}: memory is on GPU {ordinal}, the op runs on GPU {}",
                self.inner.ordinal
            )));
        }
        Ok(())
    }

    fn function(&self, name: &'static str) -> Result<Function> {
        let mut map = self
            .inner
            .module
            .functions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(f) = map.get(name) {
            return Ok(*f);
        }
        let c = CString::new(name).map_err(|_| Error::Driver {
            call: "cuModuleGetFunction".into(),
            message: "bad name".into(),
        })?;
        // SAFETY: the module is loaded for the lifetime of Inner.
        let f = unsafe { result::module::get_function(self.inner.module.raw, c) }.map_err(|e| {
            Error::Driver {
                call: format!("cuModuleGetFunction({name})"),
                message: driver_message(e),
            }
        })?;
        // SAFETY: f is a valid function of the loaded module.
        let max = unsafe {
            result::function::get_function_attribute(
                f,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            )
        }
        .map_err(|e| Error::Driver {
            call: format!("cuFuncGetAttribute({name})"),
            message: driver_message(e),
        })?;
        let func = Function(f, max.max(32) as u32);
        map.insert(name, func);
        Ok(func)
    }

    /// `wanted` threads per block, lowered (to whole warps) to what kernel `name` can launch
    /// with on this GPU: a block-per-row kernel may use more registers than 1024 threads allow.
    pub(crate) fn block_for(&self, name: &'static str, wanted: u32) -> Result<u32> {
        let max = self.function(name)?.1 / 32 * 32;
        Ok(wanted.min(max).max(32))
    }

    /// Launches kernel `name` on this handle's stream: the one place kiln launches a kernel.
    /// Nothing here allocates, waits or queries the device (capture-safe); the function
    /// handle and its limits are cached after the first call. `args` point at the kernel's parameters,
    /// in order, each exactly the type the kernel declares.
    ///
    /// # Safety
    /// The argument types and the memory they point to must match the kernel.
    pub(crate) unsafe fn launch(
        &self,
        name: &'static str,
        grid: u32,
        block: u32,
        shared: u32,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        self.launch_2d(name, (grid, 1), block, shared, args)
    }

    /// [`Gpu::launch`] with a 2-D grid `(x, y)`.
    ///
    /// # Safety
    /// As [`Gpu::launch`].
    pub(crate) unsafe fn launch_2d(
        &self,
        name: &'static str,
        grid: (u32, u32),
        block: u32,
        shared: u32,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        self.bind()?;
        let f = self.function(name)?.0;
        result::launch_kernel(
            f,
            (grid.0.max(1), grid.1.max(1), 1),
            (block, 1, 1),
            shared,
            self.stream.raw(),
            args,
        )
        .map_err(|e| Error::Driver {
            call: format!("cuLaunchKernel({name})"),
            message: driver_message(e),
        })
    }

    /// How many blocks of kernel `name` fit on the GPU at once (SMs × resident blocks per SM
    /// at this block size and dynamic shared memory, as the driver computes it from the
    /// kernel's registers). Grid-stride kernels launch at most this many: one full wave, no
    /// stragglers waiting for a second.
    pub(crate) fn resident_blocks(
        &self,
        name: &'static str,
        block: u32,
        shared: u32,
    ) -> Result<u32> {
        let key = (name, block, shared);
        if let Some(n) = self
            .inner
            .module
            .occupancy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(*n);
        }
        let f = self.function(name)?.0;
        // SAFETY: f is a function of the loaded module.
        let per_sm = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(f, block as i32, shared as usize)
        }
        .map_err(|e| Error::Driver {
            call: format!("cuOccupancyMaxActiveBlocksPerMultiprocessor({name})"),
            message: driver_message(e),
        })?;
        let n = self.inner.sm_count * per_sm.max(1) as u32;
        self.inner
            .module
            .occupancy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, n);
        Ok(n)
    }

    /// Grid for a grid-stride kernel over `work` items (packs, rows, tokens): never more
    /// blocks than the work needs, nor than fit at once.
    pub(crate) fn grid_for(
        &self,
        name: &'static str,
        work: u64,
        block: u32,
        shared: u32,
    ) -> Result<u32> {
        let needed = work.div_ceil(block as u64).max(1);
        Ok(needed.min(self.resident_blocks(name, block, shared)? as u64) as u32)
    }

    /// Grid for a block-per-row kernel (grid-stride over rows).
    pub(crate) fn rows_grid(
        &self,
        name: &'static str,
        rows: usize,
        block: u32,
        shared: u32,
    ) -> Result<u32> {
        Ok((rows as u64)
            .min(self.resident_blocks(name, block, shared)? as u64)
            .max(1) as u32)
    }
}

/// Outputs come from the device's default memory pool (stream-ordered `cuMemAllocAsync`). Its
/// default release threshold (0) hands freed memory back to the driver at every
/// synchronisation, so the next allocation maps pages again; keeping it (like torch's caching
/// allocator does) makes an op's cost the op, not the page mapping. Freed blocks stay in the
/// pool for kiln's next allocations.
fn keep_pool_memory(ctx: &CudaContext) -> Result<()> {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: out-parameter for the device's default pool.
    let r = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::driver(
            "cuDeviceGetDefaultMemPool",
            result::DriverError(r),
        ));
    }
    let mut threshold: u64 = u64::MAX;
    // SAFETY: the attribute takes a pointer to a cuuint64_t.
    let r = unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut threshold as *mut u64 as *mut c_void,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::driver(
            "cuMemPoolSetAttribute",
            result::DriverError(r),
        ));
    }
    Ok(())
}

/// Runs `f`, turning a panic inside cudarc (e.g. a driver symbol missing from an old driver)
/// into an error.
pub(crate) fn guard<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Driver {
                call: what.to_string(),
                message: msg,
            })
        }
    }
}
