//! Matrix multiply through cuBLAS: `cublasGemmEx` from exactly `libcublas.so.13` (the pinned
//! soname, see loader.rs), with cudarc's cuBLAS type definitions.

use std::ffi::{c_char, c_int, c_void};

use cudarc::cublas::sys::{
    cublasComputeType_t, cublasGemmAlgo_t, cublasHandle_t, cublasOperation_t, cudaDataType,
};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::tensor::{Tensor, View};
use crate::{loader, validate};

// Prototypes from cublas_api.h; statuses read as plain ints.
type Create = unsafe extern "C" fn(*mut cublasHandle_t) -> c_int;
type Destroy = unsafe extern "C" fn(cublasHandle_t) -> c_int;
#[rustfmt::skip]
type GemmEx = unsafe extern "C" fn(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, c_int, c_int, c_int,
    *const c_void, *const c_void, cudaDataType, c_int, *const c_void, cudaDataType, c_int,
    *const c_void, *mut c_void, cudaDataType, c_int, cublasComputeType_t, cublasGemmAlgo_t,
) -> c_int;
type StatusString = unsafe extern "C" fn(c_int) -> *const c_char;
/// cublasGetProperty(libraryPropertyType, int*): MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2.
type GetProperty = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;

pub(crate) struct Api {
    create: Create,
    destroy: Destroy,
    gemm_ex: GemmEx,
    status_string: StatusString,
    get_property: GetProperty,
}

/// cuBLAS, from exactly the pinned soname.
pub(crate) static CUBLAS: loader::Api<Api> = loader::Api::new(
    loader::LibrarySpec {
        name: "cuBLAS",
        soname: loader::sonames::CUBLAS_SONAME,
        wheel: loader::sonames::CUBLAS_WHEEL,
        feature: "matmul",
        abi: loader::sonames::CUBLAS_ABI,
    },
    |s| {
        // SAFETY: each type above is the prototype of the named function.
        unsafe {
            Ok(Api {
                create: s.get("cublasCreate_v2")?,
                destroy: s.get("cublasDestroy_v2")?,
                gemm_ex: s.get("cublasGemmEx")?,
                status_string: s.get("cublasGetStatusString")?,
                get_property: s.get("cublasGetProperty")?,
            })
        }
    },
    |api| {
        let mut part = [0 as c_int; 3];
        for (property, value) in part.iter_mut().enumerate() {
            // SAFETY: writes one int; property is MAJOR_VERSION, MINOR_VERSION or PATCH_LEVEL.
            let status = unsafe { (api.get_property)(property as c_int, value) };
            CUBLAS.check("cublasGetProperty", status, api.status_string)?;
        }
        let [major, minor, patch] = part.map(|p| p.max(0) as u32);
        Ok(((major, minor, patch), api.get_property as usize))
    },
);

fn check(api: &Api, call: &str, status: c_int) -> Result<()> {
    CUBLAS.check(call, status, api.status_string)
}

/// One cuBLAS handle per GPU, on the legacy default stream (cuBLAS's default).
struct Blas(cublasHandle_t);
// SAFETY: the handle is only used under its per-GPU mutex.
unsafe impl Send for Blas {}

impl Drop for Blas {
    fn drop(&mut self) {
        if let Ok(api) = CUBLAS.get() {
            // SAFETY: created by cublasCreate, destroyed once.
            unsafe { (api.destroy)(self.0) };
        }
    }
}

impl Gpu {
    /// c = a @ b for row-major a [m, k] and b [k, n] (f32, f16 or bf16; f32 accumulation,
    /// no TF32 for f32 inputs — the same as torch's default).
    pub fn matmul(&self, a: &View, b: &View) -> Result<Tensor> {
        let (m, k, n) = validate::matmul(a, b)?;
        self.check_view("matmul a", a)?;
        self.check_view("matmul b", b)?;
        let api = CUBLAS.get()?;
        let out = Tensor::alloc(self, a.dtype, vec![m, n])?;
        if m == 0 || n == 0 {
            return Ok(out);
        }
        self.bind()?;
        if k == 0 {
            // An empty sum: zeros (cuBLAS may leave C untouched for k = 0).
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    out.ptr(),
                    0,
                    out.nbytes(),
                    self.stream().cu_stream(),
                )
            }
            .map_err(|e| Error::driver("cuMemsetD8Async", e))?;
            return Ok(out);
        }
        let ty = match a.dtype {
            DType::F32 => cudaDataType::CUDA_R_32F,
            DType::F16 => cudaDataType::CUDA_R_16F,
            DType::BF16 => cudaDataType::CUDA_R_16BF,
            other => return Err(Error::DType(format!("matmul: no cuBLAS type for {other}"))),
        };
        let slot = self.handle(|| {
            let mut h: cublasHandle_t = std::ptr::null_mut();
            // SAFETY: out-parameter; the context of this GPU is current.
            check(api, "cublasCreate", unsafe { (api.create)(&mut h) })?;
            Ok(Blas(h))
        })?;
        // Held through the call: one cuBLAS call per handle at a time.
        let guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        let handle = guard.0;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ: swap the operands, no transposes.
        // SAFETY: pointers checked above; sizes from validate::matmul (each < 2^31); the handle
        // runs on the legacy default stream.
        let status = unsafe {
            (api.gemm_ex)(
                handle,
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                n as c_int,
                m as c_int,
                k as c_int,
                &alpha as *const f32 as *const c_void,
                b.ptr as *const c_void,
                ty,
                n as c_int,
                a.ptr as *const c_void,
                ty,
                k as c_int,
                &beta as *const f32 as *const c_void,
                out.ptr() as *mut c_void,
                ty,
                n as c_int,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        check(api, "cublasGemmEx", status)?;
        Ok(out)
    }
}
