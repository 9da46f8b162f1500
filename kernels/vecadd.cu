// out[i] = a[i] + b[i]: the smallest kernel, and the smoke test of every target.
//
// Bandwidth: an H200 (132 SMs, ~4.8 TB/s HBM3e, ~0.6-0.8 µs DRAM latency) needs ~40+ KB of loads
// in flight per SM. Each thread therefore issues UNROLL 16-byte packs of a and of b (2·UNROLL
// independent LDG.128, 128 bytes) before it computes and stores, and the host launches one
// block per UNROLL·blockDim packs (a grid over the whole array, many waves, not one resident
// wave), so the SM scheduler streams blocks in as others retire. Within a block, pack
// k·blockDim + threadIdx.x of the block's chunk keeps every access warp-coalesced. The chunk
// loop is grid-stride only so that any grid size the host picks stays correct.
// Unaligned pointers take a scalar grid-stride loop.
#include "kiln_elementwise.cuh"

// Packs per thread per chunk (`VECADD_UNROLL` in crates/kiln-runtime/src/ops.rs).
#define UNROLL 4

template <typename T>
__device__ void vecadd(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, uint64_t n) {
    constexpr int N = kiln::Pack<T>::N;
    if (!(kiln::aligned16(a) && kiln::aligned16(b) && kiln::aligned16(out))) {
        kiln::map2(n, a, b, out, [](float x, float y) { return x + y; });
        return;
    }
    const uint64_t packs = n / N;
    const uint64_t chunk = (uint64_t)UNROLL * blockDim.x;
    for (uint64_t base = (uint64_t)blockIdx.x * chunk; base < packs; base += (uint64_t)gridDim.x * chunk) {
        kiln::Pack<T> pa[UNROLL], pb[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const uint64_t i = base + (uint64_t)k * blockDim.x + threadIdx.x;
            if (i < packs) { pa[k] = kiln::load_pack(a, i); pb[k] = kiln::load_pack(b, i); }
        }
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const uint64_t i = base + (uint64_t)k * blockDim.x + threadIdx.x;
            if (i < packs) {
                kiln::Pack<T> po;
#pragma unroll
                for (int e = 0; e < N; ++e) po.v[e] = kiln::from_float<T>(kiln::to_float(pa[k].v[e]) + kiln::to_float(pb[k].v[e]));
                kiln::store_pack(out, i, po);
            }
        }
    }
    // The n % N elements past the last pack.
    for (uint64_t i = packs * N + kiln::global_thread(); i < n; i += kiln::grid_threads()) {
        out[i] = kiln::from_float<T>(kiln::to_float(a[i]) + kiln::to_float(b[i]));
    }
}

// Up to one resident wave (decode sizes): one 16-byte pack per thread, no loop, 32-bit
// indices; the host launches it only when a, b and out are 16-byte aligned and the packs plus
// the n % N tail elements fit one wave (so they fit 32 bits). Thread i < packs adds pack i;
// thread packs + j adds tail element j. Measured on an H200 against the grid-stride map2
// (axpby's kernel, the earlier small-size path): 4096 bf16 2.01 vs 2.11 µs eager, 1 M bf16
// 2.87 vs 3.03 (docs/decode-floor.md): map2's alignment test, 64-bit loop and loop exit are
// on the one pass every thread makes.
template <typename T>
__device__ void vecadd_flat(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, uint64_t n) {
    constexpr int N = kiln::Pack<T>::N;
    // 32-bit sizes: the whole input fits one resident wave (the host's condition).
    const uint32_t n32 = (uint32_t)n;
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t packs = n32 / N;
    if (i < packs) {
        const kiln::Pack<T> pa = kiln::load_pack(a, i), pb = kiln::load_pack(b, i);
        kiln::Pack<T> po;
#pragma unroll
        for (int e = 0; e < N; ++e) po.v[e] = kiln::from_float<T>(kiln::to_float(pa.v[e]) + kiln::to_float(pb.v[e]));
        kiln::store_pack(out, i, po);
    } else {
        const uint32_t j = packs * N + (i - packs);
        if (j < n32) out[j] = kiln::from_float<T>(kiln::to_float(a[j]) + kiln::to_float(b[j]));
    }
}

#define VECADD_PARAMS(T) (const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, uint64_t n)
#define ARGS_OF_vecadd (a, b, out, n)
#define ARGS_OF_vecadd_flat (a, b, out, n)
KILN_INSTANTIATE_3(vecadd, vecadd, VECADD_PARAMS)
KILN_INSTANTIATE_3(vecadd_flat, vecadd_flat, VECADD_PARAMS)
