// Device-side helpers shared by the templated kernels: load/store any supported element type
// through float, so arithmetic happens in f32 whatever the storage type.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace kiln {

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

}  // namespace kiln

// Declares extern "C" entry points NAME_f32, NAME_f16 and NAME_bf16 for a templated kernel,
// so the runtime finds them by a plain, unmangled name.
#define KILN_INSTANTIATE_3(NAME, KERNEL, PARAMS)                                              \
    extern "C" __global__ void NAME##_f32 PARAMS(float) { KERNEL<float> ARGS_OF_##NAME; }      \
    extern "C" __global__ void NAME##_f16 PARAMS(__half) { KERNEL<__half> ARGS_OF_##NAME; }    \
    extern "C" __global__ void NAME##_bf16 PARAMS(__nv_bfloat16) { KERNEL<__nv_bfloat16> ARGS_OF_##NAME; }
