// The source article's four ways of filling shared memory (B-08), each verified through per-tile checksums.
//   b08_sync     whole block loads the tile with ordinary loads, then computes (the baseline)
//   b08_bulk1d   one elected thread issues a 1D cp.async.bulk (expect_tx on an mbarrier), everyone waits at once
//   b08_tensor2d the same through a 2D tensor map (32x32 box), waiting at once
//   b08_pipe2    two stages: the copy of tile t+2 is issued once tile t is consumed, overlapping tile t+1's compute
// Every mbarrier wait is bounded; a timeout is recorded in *status and the kernel leaves.
#include <drvtma/b08_tile.cuh>

// `status` is unused (no mbarrier here); the parameters match bulk1d's so the host launches every mode alike.
extern "C" __global__ void __launch_bounds__(kConsumerThreads)
b08_sync(const float* __restrict__ in, u32* __restrict__ sums, int num_tiles, int tiles_per_block, int fma_iters,
         DrvtmaStatus* status) {
    __shared__ alignas(128) float tile[kTileElems];
    const auto [first, count] = block_tiles(num_tiles, tiles_per_block);
    const int tid = threadIdx.x;
    TilePublisher pub(sums, tid >> 5);
    for (int t = 0; t < count; ++t) {
        const float* src = in + (first + t) * kTileElems;
#pragma unroll
        for (int e = 0; e < ThreadShare::kCount; ++e) {
            const int idx = tid + e * kConsumerThreads;
            if (ThreadShare::exists(idx)) tile[idx] = src[idx];
        }
        __syncthreads();
        consume_tile(tile, tid, linear_tile(first + t), fma_iters, pub, first + t);
        __syncthreads();  // nobody may still read the tile when the next one is stored
    }
    pub.flush();
}

extern "C" __global__ void __launch_bounds__(kConsumerThreads)
b08_bulk1d(const float* __restrict__ in, u32* __restrict__ sums, int num_tiles, int tiles_per_block, int fma_iters,
           DrvtmaStatus* status) {
    __shared__ alignas(128) float tile[kTileElems];
    __shared__ alignas(8) u64 full;
    const auto [first, count] = block_tiles(num_tiles, tiles_per_block);
    const int tid = threadIdx.x;
    TilePublisher pub(sums, tid >> 5);
    init_block_barriers({&full, 1, 1});
    for (int t = 0; t < count; ++t) {
        if (is_issuer()) {
            mbar_arrive_expect_tx(&full, kTileBytes);
            bulk_load(tile, in + (first + t) * kTileElems, kTileBytes, &full);
        }
        // One barrier, one phase per tile: the phase parity alternates with t. A thread whose wait timed out
        // runs on to the block barrier on a stale tile (its warp's reductions need it), and that barrier is the
        // vote: all leave together (mbarrier.cuh, uniform timeouts).
        const bool waited = mbar_wait(&full, t & 1, status, kBarFull, 0, kSiteConsumerWait);
        consume_tile(tile, tid, linear_tile(first + t), fma_iters, pub, first + t);
        if (__syncthreads_or(!waited)) return;  // the next copy overwrites the tile
    }
    pub.flush();
}

// The 2D view is [rows, width] fp32 with width = tiles_x * 32; tile t is the box at (t % tiles_x, t / tiles_x),
// numbered as in the article, so a tile here is 32 rows of 128 bytes, not 4 KiB of contiguous memory.
extern "C" __global__ void __launch_bounds__(kConsumerThreads)
b08_tensor2d(const __grid_constant__ CUtensorMap map, u32* __restrict__ sums, int num_tiles, int tiles_per_block,
             int fma_iters, int tiles_x, DrvtmaStatus* status) {
    __shared__ alignas(128) float tile[kTileElems];  // tensor copies need a 128-byte aligned destination
    __shared__ alignas(8) u64 full;
    const auto [first, count] = block_tiles(num_tiles, tiles_per_block);
    const int tid = threadIdx.x;
    TilePublisher pub(sums, tid >> 5);
    const u32 width = u32(tiles_x) * kBoxSide;
    init_block_barriers({&full, 1, 1});
    for (int t = 0; t < count; ++t) {
        const int index = int(first) + t;
        const int bx = index % tiles_x, by = index / tiles_x;
        if (is_issuer()) {
            mbar_arrive_expect_tx(&full, kTileBytes);
            tma_load_2d(tile, &map, bx * kBoxSide, by * kBoxSide, &full);
        }
        const bool waited = mbar_wait(&full, t & 1, status, kBarFull, 0, kSiteConsumerWait);  // as b08_bulk1d
        const TileGeom g{u32(by) * kBoxSide * width + u32(bx) * kBoxSide, width};
        consume_tile(tile, tid, g, fma_iters, pub, index);
        if (__syncthreads_or(!waited)) return;
    }
    pub.flush();
}

// Faithful to the article's pipe2: a stage is refilled only after the whole block finished computing on it.
extern "C" __global__ void __launch_bounds__(kConsumerThreads)
b08_pipe2(const float* __restrict__ in, u32* __restrict__ sums, int num_tiles, int tiles_per_block, int fma_iters,
          DrvtmaStatus* status) {
    constexpr int kStages = 2;
    __shared__ alignas(128) float ring[kStages][kTileElems];
    __shared__ alignas(8) u64 full[kStages];
    const auto [first, count] = block_tiles(num_tiles, tiles_per_block);
    const int tid = threadIdx.x;
    TilePublisher pub(sums, tid >> 5);
    init_block_barriers({full, kStages, 1});
    const bool issuer = is_issuer();
    if (issuer) {
        for (int s = 0; s < kStages && s < count; ++s) {
            mbar_arrive_expect_tx(&full[s], kTileBytes);
            bulk_load(ring[s], in + (first + s) * kTileElems, kTileBytes, &full[s]);
        }
    }
    RingCursor at;
    for (int t = 0; t < count; ++t) {
        const bool waited = mbar_wait(&full[at.stage], at.phase, status, kBarFull, at.stage, kSiteConsumerWait);
        consume_tile(ring[at.stage], tid, linear_tile(first + t), fma_iters, pub, first + t);
        if (__syncthreads_or(!waited)) return;  // as b08_bulk1d: the barrier is the vote
        if (issuer && t + kStages < count) {
            mbar_arrive_expect_tx(&full[at.stage], kTileBytes);
            bulk_load(ring[at.stage], in + (first + t + kStages) * kTileElems, kTileBytes, &full[at.stage]);
        }
        at.advance(kStages);
    }
    pub.flush();
}
