// The element-wise loop every map kernel shares: grid-stride over 16-byte packs when all
// pointers are 16-byte aligned (the common case: cudaMalloc'd, torch and cupy buffers), then a
// scalar tail; a scalar loop otherwise. Math in f32 through `f`.
#pragma once
#include "kiln_dtype.cuh"

namespace kiln {

template <typename T, typename F>
__device__ __forceinline__ void map2(uint64_t n, const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, F f) {
    constexpr int N = Pack<T>::N;
    const uint64_t stride = grid_threads();
    uint64_t start = 0;
    if (aligned16(a) && aligned16(b) && aligned16(out)) {
        const uint64_t packs = n / N;
        for (uint64_t i = global_thread(); i < packs; i += stride) {
            const Pack<T> pa = load_pack(a, i), pb = load_pack(b, i);
            Pack<T> po;
#pragma unroll
            for (int k = 0; k < N; ++k) po.v[k] = from_float<T>(f(to_float(pa.v[k]), to_float(pb.v[k])));
            store_pack(out, i, po);
        }
        start = packs * N;
    }
    for (uint64_t i = start + global_thread(); i < n; i += stride) {
        out[i] = from_float<T>(f(to_float(a[i]), to_float(b[i])));
    }
}

}  // namespace kiln
