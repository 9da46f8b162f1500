// out = alpha * x + beta * y for f32, f16 and bf16, parameters passed by value in the struct
// declared in kiln_abi.h (the same struct bindgen gives Rust).
#include "kiln_abi.h"
#include "kiln_dtype.cuh"

template <typename T>
__device__ void axpby(KilnAxpbyParams p, const T* __restrict__ x, const T* __restrict__ y,
                      T* __restrict__ out) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        const float v = p.alpha * kiln::to_float(x[i]) + p.beta * kiln::to_float(y[i]);
        out[i] = kiln::from_float<T>(v);
    }
}

#define AXPBY_PARAMS(T) (KilnAxpbyParams p, const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out)
#define ARGS_OF_axpby (p, x, y, out)
KILN_INSTANTIATE_3(axpby, axpby, AXPBY_PARAMS)
