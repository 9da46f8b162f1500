// Shared by every kernel file, outside kernels/ (as a library's common headers often are).
// The helpers are plain (non-inline, non-static) device functions, as in many real kernel
// libraries: each source compiled as a whole program gets its own copy; relocatable device
// code (-rdc) would make them clash as multiple definitions in the device link.
#pragma once
#include <stddef.h>

__device__ bool is_contiguous(const size_t num_dims, const size_t *dims, const size_t *strides) {
    size_t acc = 1;
    for (size_t d = 0; d < num_dims; d++) {
        size_t dim_idx = num_dims - 1 - d;
        if (dims[dim_idx] > 1 && acc != strides[dim_idx]) {
            return false;
        }
        acc *= dims[dim_idx];
    }
    return true;
}

__device__ size_t get_strided_index(size_t idx, const size_t num_dims, const size_t *dims, const size_t *strides) {
    size_t strided_i = 0;
    for (size_t d = 0; d < num_dims; d++) {
        size_t dim_idx = num_dims - 1 - d;
        strided_i += (idx % dims[dim_idx]) * strides[dim_idx];
        idx /= dims[dim_idx];
    }
    return strided_i;
}
