// RMSNorm over the last dimension: one block per row (grid-stride over rows), a block-wide
// sum of squares in f32, then a second pass over the row (an L1/L2 hit) that scales by the
// weight. 16-byte packs when the pointers are aligned and cols is a multiple of the pack.
#include "kiln_abi.h"
#include "kiln_dtype.cuh"

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
