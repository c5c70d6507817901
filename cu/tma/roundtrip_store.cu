// Round trip through shared memory: TMA load -> y = x*a + b in place -> TMA store, against a plain vectorised
// load/compute/store kernel. scripts/bench_store.py times both against cuMemcpyDtoD.
//
// tma_roundtrip is persistent: CTA c handles tiles c, c + grid, ... of a 2D fp32 tensor, through a ring of
// `stages` tile buffers. Loads complete on per-stage mbarriers (bounded waits); stores complete through the
// issuing thread's bulk group. A stage is refilled only after wait_group.read says its store has read it: the
// refill for tile i-1+stages is issued right after tile i's store, with wait_group.read 1 (all but the newest
// group), so one store is always in flight while the next tile computes.
#include <drvtma/tma.cuh>

constexpr int kMaxStages = 8;

__device__ __forceinline__ float4 scale_add4(float4 v, float a, float b) {
    // no FMA contraction: NumPy rounds the product and the sum separately
    v.x = __fadd_rn(__fmul_rn(v.x, a), b);
    v.y = __fadd_rn(__fmul_rn(v.y, a), b);
    v.z = __fadd_rn(__fmul_rn(v.z, a), b);
    v.w = __fadd_rn(__fmul_rn(v.w, a), b);
    return v;
}

extern "C" __global__ void __launch_bounds__(256)
tma_roundtrip(const __grid_constant__ CUtensorMap in_map, const __grid_constant__ CUtensorMap out_map, int tile_cols,
              int tile_rows, int tiles_x, int num_tiles, int stages, float a, float b, DrvtmaStatus* status) {
    extern __shared__ __align__(128) float4 ring[];
    __shared__ alignas(8) u64 full[kMaxStages];
    const int tile_vec4 = tile_cols * tile_rows / 4;
    const u32 tile_bytes = static_cast<u32>(tile_cols * tile_rows * 4);
    const int count = num_tiles > static_cast<int>(blockIdx.x)
                          ? (num_tiles - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x : 0;
    const bool issuer = is_issuer();
    init_block_barriers({full, stages, 1});
    auto tile_x = [&](int i) { return ((blockIdx.x + i * gridDim.x) % tiles_x) * tile_cols; };
    auto tile_y = [&](int i) { return ((blockIdx.x + i * gridDim.x) / tiles_x) * tile_rows; };
    auto issue_load = [&](int i) {
        const int s = i % stages;
        mbar_arrive_expect_tx(&full[s], tile_bytes);
        tma_load_2d(ring + s * tile_vec4, &in_map, tile_x(i), tile_y(i), &full[s]);
    };
    if (issuer) {
        for (int i = 0; i < stages && i < count; ++i) issue_load(i);
    }
    RingCursor at;
    for (int i = 0; i < count; ++i, at.advance(stages)) {
        const int s = at.stage;
        // A thread whose wait timed out runs on to the block barrier on a stale tile; that barrier is the vote,
        // so the block leaves together (mbarrier.cuh, uniform timeouts) at no cost to the fast path.
        const bool waited = mbar_wait(&full[s], at.phase, status, 0, s, 1);
        float4* tile = ring + s * tile_vec4;
        for (int k = threadIdx.x; k < tile_vec4; k += blockDim.x) tile[k] = scale_add4(tile[k], a, b);
        fence_proxy_async_shared();  // every writing thread, then the barrier, then the store
        if (__syncthreads_or(!waited)) {
            if (issuer) bulk_wait<0>();  // never leave with a store still reading shared memory
            return;
        }
        if (issuer) {
            tma_store_2d(&out_map, tile, tile_x(i), tile_y(i));
            bulk_commit();
            if (i >= 1 && i - 1 + stages < count) {
                bulk_wait_read<1>();  // tile i-1's store has read its stage
                issue_load(i - 1 + stages);
            }
        }
    }
    if (issuer) bulk_wait<0>();
}

extern "C" __global__ void __launch_bounds__(256)
plain_roundtrip(const float4* __restrict__ in, float4* __restrict__ out, long long n_vec4, float a, float b) {
    const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < n_vec4; k += step)
        out[k] = scale_add4(in[k], a, b);
}
