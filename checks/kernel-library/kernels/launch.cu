// Kernels launched from host code: the library's Rust side calls `kernel_library_scale_add`
// through FFI, and the launch (grid size, stream) happens here, in C++. kiln-build compiles this
// file with its host code for every target into a static library (Cargo.toml: host-sources).
#include <cuda_runtime.h>

#include "../common/cuda_utils.cuh"

template <typename T>
__global__ void scale_add(const size_t numel, const T *x, const T *y, T *out, const T alpha) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) {
        out[i] = alpha * x[i] + y[i];
    }
}

// Returns the cudaError_t of the launch (0: launched).
extern "C" int kernel_library_scale_add(size_t numel, const float *x, const float *y, float *out,
                                        float alpha, cudaStream_t stream) {
    const unsigned int block = 256;
    const unsigned int grid = (unsigned int)((numel + block - 1) / block < 1024 ? (numel + block - 1) / block : 1024);
    scale_add<float><<<grid > 0 ? grid : 1, block, 0, stream>>>(numel, x, y, out, alpha);
    return (int)cudaGetLastError();
}
