/* The C ABI between kiln's CUDA kernels and Rust. nvcc compiles it into the kernels; bindgen
 * turns it into kiln_kernels::abi with layout tests, so both sides agree on every byte.
 * Plain C only: no templates, no CUDA types. Every struct is passed to its kernel by value. */
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

/* Integer type of an index operand (positions, token ids); NONE = operand absent. */
typedef enum KilnIndexType {
    KILN_INDEX_NONE = 0,
    KILN_INDEX_I32 = 1,
    KILN_INDEX_I64 = 2
} KilnIndexType;

/* out[r, c] = x[r, c] * rsqrt(mean_c(x[r, :]^2) + eps) * weight[c]; x, out: [rows, cols]. */
typedef struct KilnRmsnormParams {
    uint64_t rows;
    uint64_t cols;
    float eps;
} KilnRmsnormParams;

/* out[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)); x, out: [rows, cols]. */
typedef struct KilnSoftmaxParams {
    uint64_t rows;
    uint64_t cols;
} KilnSoftmaxParams;

/* Rotary embedding, Llama's rotate-half layout, on x: [tokens, heads, head_dim].
 * For i < head_dim/2: f = pos / theta^(2i/head_dim), (a, b) = (x[i], x[i + head_dim/2]),
 * out[i] = a cos f - b sin f, out[i + head_dim/2] = b cos f + a sin f.
 * pos = positions[token] when positions_type != NONE, else offset + token. */
typedef struct KilnRopeParams {
    uint64_t tokens;
    uint32_t heads;
    uint32_t head_dim;
    int64_t offset;
    float theta;
    uint32_t positions_type; /* KilnIndexType */
} KilnRopeParams;

/* out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i] for i < n. */
typedef struct KilnSiluMulParams {
    uint64_t n;
} KilnSiluMulParams;

/* out[i, :] = table[ids[i], :]; table: [vocab, dim], out: [num_ids, dim]. An id outside
 * [0, vocab) writes a zero row and, when bad is not null, records the smallest such i in *bad
 * (initialised to UINT64_MAX by the host), so the host can report it. */
typedef struct KilnEmbeddingParams {
    uint64_t num_ids;
    uint64_t vocab;
    uint64_t dim;
    uint32_t ids_type; /* KilnIndexType: I32 or I64 */
} KilnEmbeddingParams;

#endif
