//! Matrix multiply through cuBLAS (cudarc's bindings; `libcublas.so.13` loaded by loader.rs).

use std::ffi::c_void;

use cudarc::cublas::{result as cublas, sys};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::{guard, Gpu};
use crate::tensor::{Tensor, View};
use crate::{loader, validate};

/// One cuBLAS handle per GPU, on the legacy default stream (cuBLAS's default).
pub(crate) struct Blas(sys::cublasHandle_t);
// SAFETY: the handle is only used under the Gpu's mutex.
unsafe impl Send for Blas {}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: created by create_handle, destroyed once.
        unsafe {
            let _ = cublas::destroy_handle(self.0);
        }
    }
}

fn blas_err(call: &str, e: cudarc::cublas::result::CublasError) -> Error {
    Error::Library { library: "cuBLAS", call: call.to_string(), message: format!("{:?}", e.0) }
}

impl Gpu {
    /// c = a @ b for row-major a [m, k] and b [k, n] (f32, f16 or bf16; f32 accumulation,
    /// no TF32 for f32 inputs — the same as torch's default).
    pub fn matmul(&self, a: &View, b: &View) -> Result<Tensor> {
        let (m, k, n) = validate::matmul(a, b)?;
        self.check_view("matmul a", a)?;
        self.check_view("matmul b", b)?;
        loader::cublas()?;
        let out = Tensor::alloc(self, a.dtype, vec![m, n])?;
        if m == 0 || n == 0 {
            return Ok(out);
        }
        self.bind()?;
        if k == 0 {
            // An empty sum: zeros (cuBLAS may leave C untouched for k = 0).
            unsafe { cudarc::driver::result::memset_d8_async(out.ptr(), 0, out.nbytes(), self.stream().cu_stream()) }
                .map_err(|e| Error::driver("cuMemsetD8Async", e))?;
            return Ok(out);
        }
        let ty = match a.dtype {
            DType::F32 => sys::cudaDataType::CUDA_R_32F,
            DType::F16 => sys::cudaDataType::CUDA_R_16F,
            DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
            other => return Err(Error::DType(format!("matmul: no cuBLAS type for {other}"))),
        };
        guard("cuBLAS", || {
            let mut slot = self.blas_slot().lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(Blas(cublas::create_handle().map_err(|e| blas_err("cublasCreate", e))?));
            }
            let handle = slot.as_ref().map(|b| b.0).expect("just set");
            let (alpha, beta) = (1.0f32, 0.0f32);
            // Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ: swap the operands, no transposes.
            // SAFETY: pointers checked above; sizes from validate::matmul; the handle's stream is
            // the legacy default stream.
            unsafe {
                cublas::gemm_ex(
                    handle,
                    sys::cublasOperation_t::CUBLAS_OP_N,
                    sys::cublasOperation_t::CUBLAS_OP_N,
                    n as i32,
                    m as i32,
                    k as i32,
                    &alpha as *const f32 as *const c_void,
                    b.ptr as *const c_void,
                    ty,
                    n as i32,
                    a.ptr as *const c_void,
                    ty,
                    k as i32,
                    &beta as *const f32 as *const c_void,
                    out.ptr() as *mut c_void,
                    ty,
                    n as i32,
                    sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .map_err(|e| blas_err("cublasGemmEx", e))
        })?;
        Ok(out)
    }
}
