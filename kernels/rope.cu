// Rotary position embedding (Llama's rotate-half layout) on x: [tokens, heads, head_dim].
// One block per token (grid-stride over tokens): the block computes cos/sin of the token's
// head_dim/2 angles once into shared memory (dynamic: head_dim floats), then every head's
// pairs (i, i + head_dim/2) are rotated with them. Consecutive threads touch consecutive i,
// so loads and stores are coalesced; with 16-byte packs (pointers aligned, head_dim/2 a
// multiple of the pack) each thread rotates a pack of pairs at once.
#include "kiln_abi.h"
#include "kiln_dtype.cuh"

template <typename T>
__device__ void rope(KilnRopeParams p, const T* __restrict__ x, const void* __restrict__ positions, T* __restrict__ out) {
    extern __shared__ float cs[];  // cos at [0, half), sin at [half, head_dim)
    constexpr int N = kiln::Pack<T>::N;
    const uint32_t half = p.head_dim / 2;
    const bool vec = kiln::aligned16(x) && kiln::aligned16(out) && half % N == 0;
    const uint32_t chunks = half / N, units = p.heads * chunks;
    const uint32_t per_token = p.heads * half;  // the host checks heads * head_dim < 2^31
    for (uint64_t t = blockIdx.x; t < p.tokens; t += gridDim.x) {
        int64_t pos;
        if (p.positions_type == KILN_INDEX_I32) pos = ((const int32_t*)positions)[t];
        else if (p.positions_type == KILN_INDEX_I64) pos = ((const int64_t*)positions)[t];
        else pos = p.offset + (int64_t)t;
        for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
            // As torch-based Llama computes it: inv_freq = 1 / theta^(2i/d), angle = pos * inv_freq.
            const float inv_freq = 1.0f / powf(p.theta, (float)(2 * i) / (float)p.head_dim);
            float s, c;
            sincosf((float)pos * inv_freq, &s, &c);
            cs[i] = c;
            cs[half + i] = s;
        }
        __syncthreads();
        const T* xt = x + t * (uint64_t)p.heads * p.head_dim;
        T* ot = out + t * (uint64_t)p.heads * p.head_dim;
        if (vec) {
            for (uint32_t j = threadIdx.x; j < units; j += blockDim.x) {
                const uint32_t h = j / chunks, i0 = (j % chunks) * N;
                const uint64_t lo = (uint64_t)h * p.head_dim + i0, hi = lo + half;
                const kiln::Pack<T> a = kiln::load_pack(xt + lo, 0), b = kiln::load_pack(xt + hi, 0);
                kiln::Pack<T> oa, ob;
#pragma unroll
                for (int e = 0; e < N; ++e) {
                    const float c = cs[i0 + e], s = cs[half + i0 + e];
                    const float fa = kiln::to_float(a.v[e]), fb = kiln::to_float(b.v[e]);
                    oa.v[e] = kiln::from_float<T>(fa * c - fb * s);
                    ob.v[e] = kiln::from_float<T>(fb * c + fa * s);
                }
                kiln::store_pack(ot + lo, 0, oa);
                kiln::store_pack(ot + hi, 0, ob);
            }
        } else for (uint32_t j = threadIdx.x; j < per_token; j += blockDim.x) {
            const uint32_t h = j / half, i = j % half;
            const uint64_t base = (uint64_t)h * p.head_dim;
            const float a = kiln::to_float(xt[base + i]), b = kiln::to_float(xt[base + half + i]);
            const float c = cs[i], s = cs[half + i];
            ot[base + i] = kiln::from_float<T>(a * c - b * s);
            ot[base + half + i] = kiln::from_float<T>(b * c + a * s);
        }
        __syncthreads();
    }
}

#define ROPE_PARAMS(T) (KilnRopeParams p, const T* __restrict__ x, const void* __restrict__ positions, T* __restrict__ out)
#define ARGS_OF_rope (p, x, positions, out)
KILN_INSTANTIATE_3(rope, rope, ROPE_PARAMS)
