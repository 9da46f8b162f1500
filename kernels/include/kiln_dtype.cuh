// Device-side helpers shared by the templated kernels: load/store any supported element type
// through float, so arithmetic happens in f32 whatever the storage type; 16-byte packs for
// vectorised memory access; block-wide reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace kiln {

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// 16 bytes of T: the widest load/store a thread can issue (LDG.128 / STG.128).
template <typename T> struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

__device__ __forceinline__ bool aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// Through uint4: a struct copy of Pack may be split into element-wise accesses by the
// compiler (seen for stores in rope), so loads go through uint4 and stores are one explicit
// 128-bit st.global.
template <typename T> __device__ __forceinline__ Pack<T> load_pack(const T* __restrict__ base, uint64_t pack_index) {
    const uint4 raw = reinterpret_cast<const uint4*>(base)[pack_index];
    Pack<T> p;
    memcpy(&p, &raw, sizeof(raw));
    return p;
}
template <typename T> __device__ __forceinline__ void store_pack(T* __restrict__ base, uint64_t pack_index, const Pack<T>& p) {
    uint4 raw;
    memcpy(&raw, &p, sizeof(raw));
    // An explicit 128-bit global store: the compiler split even a uint4 assignment in rope.
    // No "memory" clobber, so loads may still be scheduled across it: no kiln kernel reads
    // back what it stores.
    uint4* dst = reinterpret_cast<uint4*>(base) + pack_index;
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(raw.x), "r"(raw.y), "r"(raw.z), "r"(raw.w));
}

__device__ __forceinline__ uint64_t global_thread() { return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ uint64_t grid_threads() { return (uint64_t)gridDim.x * blockDim.x; }

// Sum over the block (blockDim.x a multiple of 32, at most 1024). `scratch` holds 32 floats.
// Every thread gets the result; the trailing barrier makes `scratch` reusable right away.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    return v;
}

}  // namespace kiln

// Declares extern "C" entry points NAME_f32, NAME_f16 and NAME_bf16 for a templated kernel,
// so the runtime finds them by a plain, unmangled name.
#define KILN_INSTANTIATE_3(NAME, KERNEL, PARAMS)                                              \
    extern "C" __global__ void NAME##_f32 PARAMS(float) { KERNEL<float> ARGS_OF_##NAME; }      \
    extern "C" __global__ void NAME##_f16 PARAMS(__half) { KERNEL<__half> ARGS_OF_##NAME; }    \
    extern "C" __global__ void NAME##_bf16 PARAMS(__nv_bfloat16) { KERNEL<__nv_bfloat16> ARGS_OF_##NAME; }
