//! Softmax through cuDNN (cudarc's bindings; `libcudnn.so.9` loaded by loader.rs): the
//! operation that makes the package genuinely depend on cuDNN, and a cross-check of the
//! hand-written softmax kernel.

use std::ffi::c_void;

use cudarc::cudnn::{result as cudnn, sys};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::{guard, Gpu};
use crate::tensor::{Tensor, View};
use crate::{loader, validate};

pub(crate) struct Dnn(sys::cudnnHandle_t);
// SAFETY: the handle is only used under the Gpu's mutex.
unsafe impl Send for Dnn {}

impl Drop for Dnn {
    fn drop(&mut self) {
        // SAFETY: created by create_handle, destroyed once.
        unsafe {
            let _ = cudnn::destroy_handle(self.0);
        }
    }
}

fn dnn_err(call: &str, e: cudarc::cudnn::CudnnError) -> Error {
    Error::Library { library: "cuDNN", call: call.to_string(), message: format!("{:?}", e.0) }
}

/// A tensor descriptor, destroyed on drop.
struct Desc(sys::cudnnTensorDescriptor_t);
impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by create_tensor_descriptor, destroyed once.
        unsafe {
            let _ = cudnn::destroy_tensor_descriptor(self.0);
        }
    }
}

impl Gpu {
    /// Softmax over the last dim computed by cuDNN (`cudnnSoftmaxForward`, ACCURATE,
    /// per-instance over [rows, cols, 1, 1]); same contract as [`Gpu::softmax`].
    pub fn cudnn_softmax(&self, x: &View) -> Result<Tensor> {
        let (rows, cols) = validate::softmax(x)?;
        if rows > i32::MAX as usize || cols > i32::MAX as usize {
            return Err(Error::Shape(format!("cudnn_softmax: {rows} rows × {cols} cols do not fit cuDNN's int")));
        }
        self.check_view("cudnn_softmax x", x)?;
        loader::cudnn()?;
        let out = Tensor::alloc(self, x.dtype, x.shape.clone())?;
        if rows == 0 || cols == 0 {
            return Ok(out);
        }
        let ty = match x.dtype {
            DType::F32 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
            DType::F16 => sys::cudnnDataType_t::CUDNN_DATA_HALF,
            DType::BF16 => sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
            other => return Err(Error::DType(format!("cudnn_softmax: no cuDNN type for {other}"))),
        };
        self.bind()?;
        guard("cuDNN", || {
            let mut slot = self.dnn_slot().lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(Dnn(cudnn::create_handle().map_err(|e| dnn_err("cudnnCreate", e))?));
            }
            let handle = slot.as_ref().map(|d| d.0).expect("just set");
            let desc = Desc(cudnn::create_tensor_descriptor().map_err(|e| dnn_err("cudnnCreateTensorDescriptor", e))?);
            // SAFETY: descriptor just created; dims checked to fit int.
            unsafe {
                cudnn::set_tensor4d_descriptor(desc.0, sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW, ty, [rows as i32, cols as i32, 1, 1])
            }
            .map_err(|e| dnn_err("cudnnSetTensor4dDescriptor", e))?;
            let (alpha, beta) = (1.0f32, 0.0f32);
            // SAFETY: x and out hold rows × cols elements of `ty`; the handle runs on the
            // legacy default stream (cuDNN's default).
            unsafe {
                cudnn::softmax_forward(
                    handle,
                    sys::cudnnSoftmaxAlgorithm_t::CUDNN_SOFTMAX_ACCURATE,
                    sys::cudnnSoftmaxMode_t::CUDNN_SOFTMAX_MODE_INSTANCE,
                    &alpha as *const f32 as *const c_void,
                    desc.0,
                    x.ptr as *const c_void,
                    &beta as *const f32 as *const c_void,
                    desc.0,
                    out.ptr() as *mut c_void,
                )
            }
            .map_err(|e| dnn_err("cudnnSoftmaxForward", e))
        })?;
        Ok(out)
    }
}
