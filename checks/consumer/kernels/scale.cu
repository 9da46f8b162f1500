// This project's kernels. kiln-build compiles this file once per target of the matrix in
// Cargo.toml [package.metadata.kiln] and links each target's module.
#include "consumer_abi.h"

extern "C" __global__ void consumer_scale_f32(const float *x, float *y, ConsumerScaleArgs args) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < args.n) {
        y[i] = args.alpha * x[i];
    }
}

extern "C" __global__ void consumer_add_f32(const float *a, const float *b, float *out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}
