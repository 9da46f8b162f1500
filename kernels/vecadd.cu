// out[i] = a[i] + b[i]: the smallest kernel, and the smoke test of every target.
#include "kiln_elementwise.cuh"

template <typename T>
__device__ void vecadd(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, uint64_t n) {
    kiln::map2(n, a, b, out, [](float x, float y) { return x + y; });
}

#define VECADD_PARAMS(T) (const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, uint64_t n)
#define ARGS_OF_vecadd (a, b, out, n)
KILN_INSTANTIATE_3(vecadd, vecadd, VECADD_PARAMS)
