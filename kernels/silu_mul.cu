// The SwiGLU gate: out = silu(gate) * up, element-wise (f32 math).
#include "kiln_abi.h"
#include "kiln_elementwise.cuh"

template <typename T>
__device__ void silu_mul(KilnSiluMulParams p, const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out) {
    kiln::map2(p.n, gate, up, out, [](float g, float u) { return g / (1.0f + expf(-g)) * u; });
}

#define SILU_MUL_PARAMS(T) (KilnSiluMulParams p, const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out)
#define ARGS_OF_silu_mul (p, gate, up, out)
KILN_INSTANTIATE_3(silu_mul, silu_mul, SILU_MUL_PARAMS)
