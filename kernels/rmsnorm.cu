// RMSNorm over the last dimension: one block per row (grid-stride over rows), a block-wide
// sum of squares in f32, then the row scaled by the weight. With 16-byte packs (pointers
// aligned, cols a multiple of the pack) and rows of up to CACHE packs per thread, the row stays
// in registers between the two steps, so x is read from memory once; otherwise the second
// step re-reads the row (an L1/L2 hit).
#include "kiln_abi.h"
#include "kiln_dtype.cuh"

// Packs per thread kept in registers on the single-read path.
#define CACHE 4

template <typename T>
__device__ void rmsnorm(KilnRmsnormParams p, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out) {
    __shared__ float scratch[32];
    constexpr int N = kiln::Pack<T>::N;
    const uint64_t cols = p.cols;
    const bool vec = kiln::aligned16(x) && kiln::aligned16(w) && kiln::aligned16(out) && cols % N == 0;
    for (uint64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
        const T* xr = x + row * cols;
        T* outr = out + row * cols;
        float ss = 0.0f;
        const uint64_t packs = cols / N;
        if (vec && packs <= (uint64_t)CACHE * blockDim.x) {
            kiln::Pack<T> cache[CACHE];
#pragma unroll
            for (int k = 0; k < CACHE; ++k) {
                const uint64_t i = threadIdx.x + (uint64_t)k * blockDim.x;
                if (i < packs) {
                    cache[k] = kiln::load_pack(xr, i);
#pragma unroll
                    for (int e = 0; e < N; ++e) { const float f = kiln::to_float(cache[k].v[e]); ss += f * f; }
                }
            }
            const float scale = rsqrtf(kiln::block_sum(ss, scratch) / (float)cols + p.eps);
#pragma unroll
            for (int k = 0; k < CACHE; ++k) {
                const uint64_t i = threadIdx.x + (uint64_t)k * blockDim.x;
                if (i < packs) {
                    const kiln::Pack<T> g = kiln::load_pack(w, i);
                    kiln::Pack<T> o;
#pragma unroll
                    for (int e = 0; e < N; ++e) o.v[e] = kiln::from_float<T>(kiln::to_float(cache[k].v[e]) * scale * kiln::to_float(g.v[e]));
                    kiln::store_pack(outr, i, o);
                }
            }
            continue;
        }
        if (vec) {
            for (uint64_t i = threadIdx.x; i < cols / N; i += blockDim.x) {
                const kiln::Pack<T> v = kiln::load_pack(xr, i);
#pragma unroll
                for (int k = 0; k < N; ++k) { const float f = kiln::to_float(v.v[k]); ss += f * f; }
            }
        } else {
            for (uint64_t i = threadIdx.x; i < cols; i += blockDim.x) { const float f = kiln::to_float(xr[i]); ss += f * f; }
        }
        const float scale = rsqrtf(kiln::block_sum(ss, scratch) / (float)cols + p.eps);
        if (vec) {
            for (uint64_t i = threadIdx.x; i < cols / N; i += blockDim.x) {
                const kiln::Pack<T> v = kiln::load_pack(xr, i), g = kiln::load_pack(w, i);
                kiln::Pack<T> o;
#pragma unroll
                for (int k = 0; k < N; ++k) o.v[k] = kiln::from_float<T>(kiln::to_float(v.v[k]) * scale * kiln::to_float(g.v[k]));
                kiln::store_pack(outr, i, o);
            }
        } else {
            for (uint64_t i = threadIdx.x; i < cols; i += blockDim.x)
                outr[i] = kiln::from_float<T>(kiln::to_float(xr[i]) * scale * kiln::to_float(w[i]));
        }
    }
}

#define RMSNORM_PARAMS(T) (KilnRmsnormParams p, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out)
#define ARGS_OF_rmsnorm (p, x, w, out)
KILN_INSTANTIATE_3(rmsnorm, rmsnorm, RMSNORM_PARAMS)
