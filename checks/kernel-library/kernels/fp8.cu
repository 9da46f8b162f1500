// fp8 (e4m3) conversions: Ada (sm_89) and newer have the hardware, so the kernels exist only
// there. The library declares it (Cargo.toml: gates = { "fp8.cu" = ">=8.9" }).
#include <cuda_fp8.h>
#include "../common/cuda_utils.cuh"

#if __CUDA_ARCH__ >= 890
extern "C" __global__ void cast_f32_fp8(const size_t numel, const float *inp, __nv_fp8_e4m3 *out) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) {
        out[i] = __nv_fp8_e4m3(inp[i]);
    }
}

extern "C" __global__ void cast_fp8_f32(const size_t numel, const size_t num_dims, const size_t *info,
                                        const __nv_fp8_e4m3 *inp, float *out) {
    const size_t *dims = info;
    const size_t *strides = info + num_dims;
    const bool cont = info == nullptr || is_contiguous(num_dims, dims, strides);
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) {
        const size_t src = cont ? i : get_strided_index(i, num_dims, dims, strides);
        out[i] = float(inp[src]);
    }
}
#endif
