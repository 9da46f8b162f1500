// out[i] = a[i] + b[i]: the smallest kernel, and the smoke test of every target.
#include <stdint.h>

extern "C" __global__ void vecadd_f32(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = a[i] + b[i];
    }
}
