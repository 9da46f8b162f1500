//! Softmax through cuDNN: `cudnnSoftmaxForward` from exactly `libcudnn.so.9` (the pinned
//! soname, see loader.rs), with cudarc's cuDNN type definitions — the operation that makes the
//! package genuinely depend on cuDNN, and a cross-check of the hand-written softmax kernel.

use std::ffi::{c_char, c_int, c_void};

use cudarc::cudnn::sys::{
    cudnnDataType_t, cudnnHandle_t, cudnnSoftmaxAlgorithm_t, cudnnSoftmaxMode_t,
    cudnnTensorDescriptor_t, cudnnTensorFormat_t,
};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::tensor::{Tensor, View};
use crate::{loader, validate};

// Prototypes from cudnn_graph.h / cudnn_ops.h; statuses read as plain ints.
type Create = unsafe extern "C" fn(*mut cudnnHandle_t) -> c_int;
type Destroy = unsafe extern "C" fn(cudnnHandle_t) -> c_int;
type CreateDesc = unsafe extern "C" fn(*mut cudnnTensorDescriptor_t) -> c_int;
type DestroyDesc = unsafe extern "C" fn(cudnnTensorDescriptor_t) -> c_int;
type SetDesc4d = unsafe extern "C" fn(
    cudnnTensorDescriptor_t,
    cudnnTensorFormat_t,
    cudnnDataType_t,
    c_int,
    c_int,
    c_int,
    c_int,
) -> c_int;
#[rustfmt::skip]
type SoftmaxForward = unsafe extern "C" fn(
    cudnnHandle_t, cudnnSoftmaxAlgorithm_t, cudnnSoftmaxMode_t, *const c_void,
    cudnnTensorDescriptor_t, *const c_void, *const c_void, cudnnTensorDescriptor_t, *mut c_void,
) -> c_int;
type ErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type GetVersion = unsafe extern "C" fn() -> usize;

pub(crate) struct Api {
    create: Create,
    destroy: Destroy,
    create_desc: CreateDesc,
    destroy_desc: DestroyDesc,
    set_desc_4d: SetDesc4d,
    softmax_forward: SoftmaxForward,
    error_string: ErrorString,
    get_version: GetVersion,
}

/// cuDNN, from exactly the pinned soname.
pub(crate) static CUDNN: loader::Api<Api> = loader::Api::new(
    loader::LibrarySpec {
        name: "cuDNN",
        soname: loader::sonames::CUDNN_SONAME,
        wheel: loader::sonames::CUDNN_WHEEL,
        feature: "cudnn_softmax",
        abi: loader::sonames::CUDNN_ABI,
    },
    |s| {
        // SAFETY: each type above is the prototype of the named function.
        unsafe {
            Ok(Api {
                create: s.get("cudnnCreate")?,
                destroy: s.get("cudnnDestroy")?,
                create_desc: s.get("cudnnCreateTensorDescriptor")?,
                destroy_desc: s.get("cudnnDestroyTensorDescriptor")?,
                set_desc_4d: s.get("cudnnSetTensor4dDescriptor")?,
                softmax_forward: s.get("cudnnSoftmaxForward")?,
                error_string: s.get("cudnnGetErrorString")?,
                get_version: s.get("cudnnGetVersion")?,
            })
        }
    },
    // cudnnGetVersion: CUDNN_VERSION of the loaded library, major*10000 + minor*100 + patch.
    // SAFETY: takes nothing, returns a number.
    |api| {
        let code = unsafe { (api.get_version)() };
        Ok((
            loader::split_version_code(code as u64),
            api.get_version as usize,
        ))
    },
);

fn check(api: &Api, call: &str, status: c_int) -> Result<()> {
    CUDNN.check(call, status, api.error_string)
}

/// One cuDNN handle per GPU, on the legacy default stream (cuDNN's default).
struct Dnn(cudnnHandle_t);
// SAFETY: the handle is only used under its per-GPU mutex.
unsafe impl Send for Dnn {}

impl Drop for Dnn {
    fn drop(&mut self) {
        if let Ok(api) = CUDNN.get() {
            // SAFETY: created by cudnnCreate, destroyed once.
            unsafe { (api.destroy)(self.0) };
        }
    }
}

/// A tensor descriptor, destroyed on drop.
struct Desc<'a>(cudnnTensorDescriptor_t, &'a Api);
impl Drop for Desc<'_> {
    fn drop(&mut self) {
        // SAFETY: created by cudnnCreateTensorDescriptor, destroyed once.
        unsafe { (self.1.destroy_desc)(self.0) };
    }
}

impl Gpu {
    /// Softmax over the last dim computed by cuDNN (`cudnnSoftmaxForward`, ACCURATE,
    /// per-instance over [rows, cols, 1, 1]); same contract as [`Gpu::softmax`].
    pub fn cudnn_softmax(&self, x: &View) -> Result<Tensor> {
        let (rows, cols) = validate::softmax(x)?;
        if rows > i32::MAX as usize || cols > i32::MAX as usize {
            return Err(Error::Shape(format!(
                "cudnn_softmax: {rows} rows × {cols} cols do not fit cuDNN's int"
            )));
        }
        self.check_view("cudnn_softmax x", x)?;
        let api = CUDNN.get()?;
        let out = Tensor::alloc(self, x.dtype, x.shape.clone())?;
        if rows == 0 || cols == 0 {
            return Ok(out);
        }
        let ty = match x.dtype {
            DType::F32 => cudnnDataType_t::CUDNN_DATA_FLOAT,
            DType::F16 => cudnnDataType_t::CUDNN_DATA_HALF,
            DType::BF16 => cudnnDataType_t::CUDNN_DATA_BFLOAT16,
            other => {
                return Err(Error::DType(format!(
                    "cudnn_softmax: no cuDNN type for {other}"
                )))
            }
        };
        self.bind()?;
        let slot = self.handle(|| {
            let mut h: cudnnHandle_t = std::ptr::null_mut();
            // SAFETY: out-parameter; the context of this GPU is current.
            check(api, "cudnnCreate", unsafe { (api.create)(&mut h) })?;
            Ok(Dnn(h))
        })?;
        // Held through the calls: one cuDNN call per handle at a time.
        let guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        let handle = guard.0;
        let mut raw: cudnnTensorDescriptor_t = std::ptr::null_mut();
        // SAFETY: out-parameter.
        check(api, "cudnnCreateTensorDescriptor", unsafe {
            (api.create_desc)(&mut raw)
        })?;
        let desc = Desc(raw, api);
        // SAFETY: a live descriptor; dims checked to fit int.
        let status = unsafe {
            (api.set_desc_4d)(
                desc.0,
                cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                ty,
                rows as c_int,
                cols as c_int,
                1,
                1,
            )
        };
        check(api, "cudnnSetTensor4dDescriptor", status)?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: x and out hold rows × cols elements of `ty`; the handle runs on the legacy
        // default stream (cuDNN's default).
        let status = unsafe {
            (api.softmax_forward)(
                handle,
                cudnnSoftmaxAlgorithm_t::CUDNN_SOFTMAX_ACCURATE,
                cudnnSoftmaxMode_t::CUDNN_SOFTMAX_MODE_INSTANCE,
                &alpha as *const f32 as *const c_void,
                desc.0,
                x.ptr as *const c_void,
                &beta as *const f32 as *const c_void,
                desc.0,
                out.ptr() as *mut c_void,
            )
        };
        check(api, "cudnnSoftmaxForward", status)?;
        Ok(out)
    }
}
