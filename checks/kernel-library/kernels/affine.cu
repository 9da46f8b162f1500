// y = x * mul + add over a strided tensor.
#include "../common/cuda_utils.cuh"

extern "C" __global__ void affine_f32(const size_t numel, const size_t num_dims, const size_t *info,
                                      const float *inp, float *out, const float mul, const float add) {
    const size_t *dims = info;
    const size_t *strides = info + num_dims;
    const bool cont = info == nullptr || is_contiguous(num_dims, dims, strides);
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) {
        const size_t src = cont ? i : get_strided_index(i, num_dims, dims, strides);
        out[i] = inp[src] * mul + add;
    }
}
