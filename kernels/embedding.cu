// Embedding lookup: out[i, :] = table[ids[i], :]. One block per id (grid-stride over ids);
// rows are copied in 16-byte packs when aligned. Ids are validated here, on the device:
// out-of-range ids write a zero row, and — when `bad` is not null (Gpu::embedding_checked) —
// record the smallest offending i in *bad (host-initialised to UINT64_MAX) so the host can
// raise. Gpu::embedding passes null: no flag, no memset, no read back, never a sync.
#include "kiln_abi.h"
#include "kiln_dtype.cuh"

// 16-byte packs each thread moves per step of a row.
#define UNROLL 4

template <typename T>
__device__ void embedding(KilnEmbeddingParams p, const T* __restrict__ table, const void* __restrict__ ids, T* __restrict__ out,
                          unsigned long long* __restrict__ bad) {
    constexpr int N = kiln::Pack<T>::N;
    const uint64_t dim = p.dim;
    const bool vec = kiln::aligned16(table) && kiln::aligned16(out) && dim % N == 0;
    for (uint64_t r = blockIdx.x; r < p.num_ids; r += gridDim.x) {
        const int64_t id = p.ids_type == KILN_INDEX_I64 ? ((const int64_t*)ids)[r] : (int64_t)((const int32_t*)ids)[r];
        T* orow = out + r * dim;
        if (id < 0 || (uint64_t)id >= p.vocab) {
            if (bad != nullptr && threadIdx.x == 0) atomicMin(bad, (unsigned long long)r);
            for (uint64_t i = threadIdx.x; i < dim; i += blockDim.x) orow[i] = kiln::from_float<T>(0.0f);
            continue;
        }
        const T* trow = table + (uint64_t)id * dim;
        if (vec) {
            // UNROLL packs per thread per step, the loads issued before the stores (with
            // predicated accesses ptxas hoists a store between the loads, which then wait for it).
            const uint64_t packs = dim / N, step = (uint64_t)UNROLL * blockDim.x;
            for (uint64_t base = 0; base < packs; base += step) {
                kiln::Pack<T> v[UNROLL];
                const uint64_t i0 = base + threadIdx.x;
                if (base + step <= packs) {  // a full step: unpredicated, loads grouped ahead of stores
#pragma unroll
                    for (int k = 0; k < UNROLL; ++k) v[k] = kiln::load_pack(trow, i0 + (uint64_t)k * blockDim.x);
#pragma unroll
                    for (int k = 0; k < UNROLL; ++k) kiln::store_pack(orow, i0 + (uint64_t)k * blockDim.x, v[k]);
                } else {
#pragma unroll
                    for (int k = 0; k < UNROLL; ++k) {
                        const uint64_t i = i0 + (uint64_t)k * blockDim.x;
                        if (i < packs) v[k] = kiln::load_pack(trow, i);
                    }
#pragma unroll
                    for (int k = 0; k < UNROLL; ++k) {
                        const uint64_t i = i0 + (uint64_t)k * blockDim.x;
                        if (i < packs) kiln::store_pack(orow, i, v[k]);
                    }
                }
            }
        } else {
            for (uint64_t i = threadIdx.x; i < dim; i += blockDim.x) orow[i] = trow[i];
        }
    }
}

// Up to one resident wave (decode: a few ids): a 2-D grid, blockIdx.y = the id's position,
// one 16-byte pack per thread of the row (blockIdx.x·blockDim.x + threadIdx.x), no loop. The
// host launches it only when table and out are 16-byte aligned, dim % N == 0 and every pack
// of every row fits one wave (so 32-bit pack indices). With 64 bf16 ids of 4096 elements the
// one-block-per-id kernel above (4 packs per thread, a loop) cost 2.57 µs against torch's
// 2.52; this one 2.45 against 2.55 in the bundle's run (docs/decode-floor.md).
template <typename T>
__device__ void embedding_flat(KilnEmbeddingParams p, const T* __restrict__ table, const void* __restrict__ ids, T* __restrict__ out,
                               unsigned long long* __restrict__ bad) {
    constexpr int N = kiln::Pack<T>::N;
    // 32-bit row length: every row fits one resident wave (the host's condition).
    const uint32_t dim = (uint32_t)p.dim;
    const uint32_t packs = dim / N;
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t r = blockIdx.y;
    if (i >= packs) return;
    const int64_t id = p.ids_type == KILN_INDEX_I64 ? ((const int64_t*)ids)[r] : (int64_t)((const int32_t*)ids)[r];
    T* orow = out + (uint64_t)r * dim;
    if (id < 0 || (uint64_t)id >= p.vocab) {
        if (bad != nullptr && i == 0) atomicMin(bad, (unsigned long long)r);
        kiln::Pack<T> z;
#pragma unroll
        for (int e = 0; e < N; ++e) z.v[e] = kiln::from_float<T>(0.0f);
        kiln::store_pack(orow, i, z);
        return;
    }
    kiln::store_pack(orow, i, kiln::load_pack(table + (uint64_t)id * dim, i));
}

#define EMBEDDING_PARAMS(T) (KilnEmbeddingParams p, const T* __restrict__ table, const void* __restrict__ ids, T* __restrict__ out, unsigned long long* __restrict__ bad)
#define ARGS_OF_embedding (p, table, ids, out, bad)
#define ARGS_OF_embedding_flat (p, table, ids, out, bad)
KILN_INSTANTIATE_3(embedding, embedding, EMBEDDING_PARAMS)
KILN_INSTANTIATE_3(embedding_flat, embedding_flat, EMBEDDING_PARAMS)
