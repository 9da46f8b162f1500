// Numerically stable softmax over the last dimension, written for bandwidth.
//
// A *group* of G threads (G a power of two, 32..1024; G = 32 is one warp per row) owns one
// row; a block holds blockDim.x / G groups (several short rows per block), and the grid
// covers the rows (many blocks, not one resident wave: the SM scheduler keeps rows in flight).
// Rows of up to EPT·G elements (EPT = 32 per thread, so up to 32768 elements with G = 1024)
// whose x, out and row length allow 16-byte packs are held in registers: each thread loads up
// to EPT elements as EPT/N packs in one burst of independent loads, then
//   max  = group max (warp shuffles; across warps one shared-memory step when G > 32),
//   e    = exp2(x·log2e − max·log2e) kept in the same registers,
//   sum  = group sum, out = e · (1/sum)
// so x is read from memory exactly once and written once, one exp per element.
// G is derived from the row length by the same rule on both sides (`softmax_group` in
// crates/kiln-runtime/src/ops.rs); the kernel also copes with any blockDim.x the host picks
// (it clamps G to blockDim.x and falls back to the two-pass path below when a row does not fit).
// Longer or unaligned rows (view offset or row length not a multiple of the pack): one pass keeps a running (max, sum) per thread, merged across the group, then a
// second pass re-reads the row (an L2 hit for moderate rows) and writes.
#include <math.h>
#include "kiln_abi.h"
#include "kiln_dtype.cuh"

namespace {

constexpr int EPT = 32;                        // elements per thread held in registers
constexpr float LOG2E = 1.4426950408889634f;

// Adds one value to a running (max, sum) pair. -inf values add nothing (and keep an all -inf
// row at max = -inf, sum = 0, which gives NaN like torch).
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
    if (x > m) { s = s * expf(m - x) + 1.0f; m = x; }
    else if (x != -INFINITY) { s += expf(x - m); }
}

__device__ __forceinline__ void merge_pair(float& m, float& s, float om, float os) {
    const float nm = fmaxf(m, om);
    s = (m == -INFINITY ? 0.0f : s * expf(m - nm)) + (om == -INFINITY ? 0.0f : os * expf(om - nm));
    m = nm;
}

// Group-wide reductions. G is block-uniform; every thread of the block calls them (threads of
// inactive groups too), so the barriers are reached by all. Scratch: 32 floats.
__device__ __forceinline__ float group_max(float v, unsigned G, float* scratch) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (G > 32) {
        const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wpg = G >> 5, idx = (threadIdx.x / G) * wpg + lane;
        if (lane == 0) scratch[warp] = v;
        __syncthreads();
        v = (lane < wpg && idx < 32) ? scratch[idx] : -INFINITY;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
        __syncthreads();
    }
    return v;
}

__device__ __forceinline__ float group_sum(float v, unsigned G, float* scratch) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (G > 32) {
        const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wpg = G >> 5, idx = (threadIdx.x / G) * wpg + lane;
        if (lane == 0) scratch[warp] = v;
        __syncthreads();
        v = (lane < wpg && idx < 32) ? scratch[idx] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        __syncthreads();
    }
    return v;
}

__device__ __forceinline__ void group_merge(float& m, float& s, unsigned G, float* scratch_m, float* scratch_s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) merge_pair(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (G > 32) {
        const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wpg = G >> 5, idx = (threadIdx.x / G) * wpg + lane;
        if (lane == 0) { scratch_m[warp] = m; scratch_s[warp] = s; }
        __syncthreads();
        const bool in = lane < wpg && idx < 32;
        m = in ? scratch_m[idx] : -INFINITY;
        s = in ? scratch_s[idx] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) merge_pair(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
        __syncthreads();
    }
}

// Threads per row: the smallest power of two (>= 32) with EPT elements per thread covering the
// row, at most 1024 and at most blockDim.x (then the row may not fit: two-pass path).
__device__ __forceinline__ unsigned group_threads(uint64_t cols) {
    unsigned g = 32;
    while (g < 1024 && (uint64_t)g * EPT < cols) g <<= 1;
    return g < blockDim.x ? g : blockDim.x;
}

// One row held in registers: EPT/N 16-byte packs per thread (pack i = t + k·G, coalesced
// across the group). (A scalar variant for unaligned rows needed ~130 registers for its 32
// independent loads; unaligned rows take the two-pass path instead.)
template <typename T>
__device__ __forceinline__ void row_in_registers(const T* __restrict__ xr, T* __restrict__ outr, uint64_t cols, unsigned t, unsigned G,
                                                 bool active, float* scratch) {
    constexpr int W = kiln::Pack<T>::N;  // elements per 16-byte pack
    constexpr int U = EPT / W;           // packs per thread
    const unsigned units = (unsigned)(cols / W);  // cols <= EPT * 1024 here: 32-bit indices
    float v[EPT];
#pragma unroll
    for (int k = 0; k < U; ++k) {
        const unsigned i = t + k * G;
        if (active && i < units) {
            const kiln::Pack<T> pk = kiln::load_pack(xr, i);
#pragma unroll
            for (int e = 0; e < W; ++e) v[k * W + e] = kiln::to_float(pk.v[e]);
        } else {
#pragma unroll
            for (int e = 0; e < W; ++e) v[k * W + e] = -INFINITY;
        }
    }
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < EPT; ++j) m = fmaxf(m, v[j]);
    m = group_max(m, G, scratch);
    // exp(x - m) = exp2(x·log2e - m·log2e); the rounding of m·log2e is common to the whole row
    // and cancels in the normalisation. All -inf row: m = -inf gives NaN, like torch.
    const float ms = m * LOG2E;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < EPT; ++j) { v[j] = exp2f(fmaf(v[j], LOG2E, -ms)); s += v[j]; }
    s = group_sum(s, G, scratch);
    const float inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < U; ++k) {
        const unsigned i = t + k * G;
        if (active && i < units) {
            kiln::Pack<T> o;
#pragma unroll
            for (int e = 0; e < W; ++e) o.v[e] = kiln::from_float<T>(v[k * W + e] * inv);
            kiln::store_pack(outr, i, o);
        }
    }
}

// Rows longer than EPT·G: online (max, sum) pass, then a re-reading write pass.
template <typename T>
__device__ void row_two_pass(const T* __restrict__ xr, T* __restrict__ outr, uint64_t cols, unsigned t, unsigned G, bool active, bool vec,
                             float* scratch_m, float* scratch_s) {
    constexpr int N = kiln::Pack<T>::N;
    float m = -INFINITY, s = 0.0f;
    if (active) {
        if (vec) {
            for (uint64_t i = t; i < cols / N; i += G) {
                const kiln::Pack<T> v = kiln::load_pack(xr, i);
#pragma unroll
                for (int k = 0; k < N; ++k) online_add(m, s, kiln::to_float(v.v[k]));
            }
        } else {
            for (uint64_t i = t; i < cols; i += G) online_add(m, s, kiln::to_float(xr[i]));
        }
    }
    group_merge(m, s, G, scratch_m, scratch_s);
    if (!active) return;
    const float inv = 1.0f / s;
    if (vec) {
        for (uint64_t i = t; i < cols / N; i += G) {
            const kiln::Pack<T> v = kiln::load_pack(xr, i);
            kiln::Pack<T> o;
#pragma unroll
            for (int k = 0; k < N; ++k) o.v[k] = kiln::from_float<T>(expf(kiln::to_float(v.v[k]) - m) * inv);
            kiln::store_pack(outr, i, o);
        }
    } else {
        for (uint64_t i = t; i < cols; i += G) outr[i] = kiln::from_float<T>(expf(kiln::to_float(xr[i]) - m) * inv);
    }
}

}  // namespace

template <typename T>
__device__ void softmax(KilnSoftmaxParams p, const T* __restrict__ x, T* __restrict__ out) {
    __shared__ float scratch_m[32], scratch_s[32];
    constexpr int N = kiln::Pack<T>::N;
    const uint64_t cols = p.cols;
    const unsigned G = group_threads(cols);
    const unsigned rows_per_block = blockDim.x / G;
    const unsigned group = threadIdx.x / G, t = threadIdx.x % G;
    const bool vec = kiln::aligned16(x) && kiln::aligned16(out) && cols % N == 0;
    const bool in_registers = cols <= (uint64_t)EPT * G;
    // Block-uniform loop bounds: every thread runs the same iterations (barriers inside).
    for (uint64_t base = (uint64_t)blockIdx.x * rows_per_block; base < p.rows; base += (uint64_t)gridDim.x * rows_per_block) {
        const uint64_t row = base + group;
        const bool active = group < rows_per_block && row < p.rows;
        const T* xr = x + (active ? row : 0) * cols;
        T* outr = out + (active ? row : 0) * cols;
        if (vec && in_registers) {
            row_in_registers<T>(xr, outr, cols, t, G, active, scratch_m);
        } else {
            row_two_pass<T>(xr, outr, cols, t, G, active, vec, scratch_m, scratch_s);
        }
    }
}

#define SOFTMAX_PARAMS(T) (KilnSoftmaxParams p, const T* __restrict__ x, T* __restrict__ out)
#define ARGS_OF_softmax (p, x, out)
KILN_INSTANTIATE_3(softmax, softmax, SOFTMAX_PARAMS)
