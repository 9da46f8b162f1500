/* The C ABI between kiln's CUDA kernels and Rust. nvcc compiles it into the kernels; bindgen
 * turns it into kiln_kernels::abi with layout tests, so both sides agree on every byte.
 * Plain C only: no templates, no CUDA types. */
#ifndef KILN_ABI_H
#define KILN_ABI_H

#include <stdint.h>

/* out[i] = alpha * x[i] + beta * y[i] for i < n; passed to the kernel by value. */
typedef struct KilnAxpbyParams {
    uint64_t n;
    float alpha;
    float beta;
} KilnAxpbyParams;

/* Element types a templated kernel is instantiated for (the suffix of its symbol). */
typedef enum KilnDtype {
    KILN_DTYPE_F32 = 0,
    KILN_DTYPE_F16 = 1,
    KILN_DTYPE_BF16 = 2
} KilnDtype;

#endif
