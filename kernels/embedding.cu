// Embedding lookup: out[i, :] = table[ids[i], :]. One block per id (grid-stride over ids);
// rows are copied in 16-byte packs when aligned. Ids are validated here, on the device:
// out-of-range ids write a zero row, and — when `bad` is not null (Gpu::embedding_checked) —
// record the smallest offending i in *bad (host-initialised to UINT64_MAX) so the host can
// raise. Gpu::embedding passes null: no flag, no memset, no read back, never a sync.
#include "kiln_abi.h"
#include "kiln_dtype.cuh"

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
            for (uint64_t i = threadIdx.x; i < dim / N; i += blockDim.x) kiln::store_pack(orow, i, kiln::load_pack(trow, i));
        } else {
            for (uint64_t i = threadIdx.x; i < dim; i += blockDim.x) orow[i] = trow[i];
        }
    }
}

#define EMBEDDING_PARAMS(T) (KilnEmbeddingParams p, const T* __restrict__ table, const void* __restrict__ ids, T* __restrict__ out, unsigned long long* __restrict__ bad)
#define ARGS_OF_embedding (p, table, ids, out, bad)
KILN_INSTANTIATE_3(embedding, embedding, EMBEDDING_PARAMS)
