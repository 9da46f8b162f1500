// out = alpha * x + beta * y for f32, f16 and bf16, parameters passed by value in the struct
// declared in kiln_abi.h (the same struct bindgen gives Rust).
#include "kiln_abi.h"
#include "kiln_elementwise.cuh"

template <typename T>
__device__ void axpby(KilnAxpbyParams p, const T* __restrict__ x, const T* __restrict__ y,
                      T* __restrict__ out) {
    const float alpha = p.alpha, beta = p.beta;
    kiln::map2(p.n, x, y, out, [=](float a, float b) { return alpha * a + beta * b; });
}

#define AXPBY_PARAMS(T) (KilnAxpbyParams p, const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out)
#define ARGS_OF_axpby (p, x, y, out)
KILN_INSTANTIATE_3(axpby, axpby, AXPBY_PARAMS)
