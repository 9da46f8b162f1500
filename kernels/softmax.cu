// Numerically stable softmax over the last dimension: one block per row (grid-stride over
// rows). Pass 1 keeps a running (max, sum of exp(x - max)) per thread, merged across the
// block; pass 2 writes exp(x - max) / sum. With 16-byte packs and rows of up to CACHE packs
// per thread the row stays in registers between the passes (x read from memory once);
// otherwise pass 2 re-reads the row (an L1/L2 hit).
#include <math.h>
#include "kiln_abi.h"
#include "kiln_dtype.cuh"

namespace {

// Adds one value to a running (max, sum) pair. -inf values add nothing (and keep an all -inf
// row at max = -inf, sum = 0, which gives NaN like torch).
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
    if (x > m) { s = s * expf(m - x) + 1.0f; m = x; }
    else if (x != -INFINITY) { s += expf(x - m); }
}

// Block-wide merge of (max, sum) pairs; every thread gets the result.
__device__ __forceinline__ void block_merge(float& m, float& s, float* scratch_m, float* scratch_s) {
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        const float nm = fmaxf(m, om);
        s = (m == -INFINITY ? 0.0f : s * expf(m - nm)) + (om == -INFINITY ? 0.0f : os * expf(om - nm));
        m = nm;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    if (lane == 0) { scratch_m[warp] = m; scratch_s[warp] = s; }
    __syncthreads();
    m = lane < warps ? scratch_m[lane] : -INFINITY;
    s = lane < warps ? scratch_s[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        const float nm = fmaxf(m, om);
        s = (m == -INFINITY ? 0.0f : s * expf(m - nm)) + (om == -INFINITY ? 0.0f : os * expf(om - nm));
        m = nm;
    }
    __syncthreads();
}

}  // namespace

// Packs per thread kept in registers on the single-read path.
#define CACHE 4

template <typename T>
__device__ void softmax(KilnSoftmaxParams p, const T* __restrict__ x, T* __restrict__ out) {
    __shared__ float scratch_m[32], scratch_s[32];
    constexpr int N = kiln::Pack<T>::N;
    const uint64_t cols = p.cols;
    const bool vec = kiln::aligned16(x) && kiln::aligned16(out) && cols % N == 0;
    for (uint64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
        const T* xr = x + row * cols;
        T* outr = out + row * cols;
        float m = -INFINITY, s = 0.0f;
        const uint64_t packs = cols / N;
        if (vec && packs <= (uint64_t)CACHE * blockDim.x) {
            kiln::Pack<T> cache[CACHE];
#pragma unroll
            for (int k = 0; k < CACHE; ++k) {
                const uint64_t i = threadIdx.x + (uint64_t)k * blockDim.x;
                if (i < packs) {
                    cache[k] = kiln::load_pack(xr, i);
#pragma unroll
                    for (int e = 0; e < N; ++e) online_add(m, s, kiln::to_float(cache[k].v[e]));
                }
            }
            block_merge(m, s, scratch_m, scratch_s);
            const float inv = 1.0f / s;
#pragma unroll
            for (int k = 0; k < CACHE; ++k) {
                const uint64_t i = threadIdx.x + (uint64_t)k * blockDim.x;
                if (i < packs) {
                    kiln::Pack<T> o;
#pragma unroll
                    for (int e = 0; e < N; ++e) o.v[e] = kiln::from_float<T>(expf(kiln::to_float(cache[k].v[e]) - m) * inv);
                    kiln::store_pack(outr, i, o);
                }
            }
            continue;
        }
        if (vec) {
            for (uint64_t i = threadIdx.x; i < cols / N; i += blockDim.x) {
                const kiln::Pack<T> v = kiln::load_pack(xr, i);
#pragma unroll
                for (int k = 0; k < N; ++k) online_add(m, s, kiln::to_float(v.v[k]));
            }
        } else {
            for (uint64_t i = threadIdx.x; i < cols; i += blockDim.x) online_add(m, s, kiln::to_float(xr[i]));
        }
        block_merge(m, s, scratch_m, scratch_s);
        const float inv = 1.0f / s;
        if (vec) {
            for (uint64_t i = threadIdx.x; i < cols / N; i += blockDim.x) {
                const kiln::Pack<T> v = kiln::load_pack(xr, i);
                kiln::Pack<T> o;
#pragma unroll
                for (int k = 0; k < N; ++k) o.v[k] = kiln::from_float<T>(expf(kiln::to_float(v.v[k]) - m) * inv);
                kiln::store_pack(outr, i, o);
            }
        } else {
            for (uint64_t i = threadIdx.x; i < cols; i += blockDim.x) outr[i] = kiln::from_float<T>(expf(kiln::to_float(xr[i]) - m) * inv);
        }
    }
}

#define SOFTMAX_PARAMS(T) (KilnSoftmaxParams p, const T* __restrict__ x, T* __restrict__ out)
#define ARGS_OF_softmax (p, x, out)
KILN_INSTANTIATE_3(softmax, softmax, SOFTMAX_PARAMS)
