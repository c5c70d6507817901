// Deeper pipelines than the article's pipe2: a k-stage ring filled by 1D bulk copies, and a warp-specialized
// producer/consumer ring. Same consumer work and checksums as cu/b08/b08_modes.cu.
//   pipe_ring  all warps consume; warp 0's elected lane refills a stage as soon as every thread has copied its
//              elements out (one full mbarrier per stage, a CTA barrier as the release)
//   ws_ring    one producer warp (the last) waits on "empty" barriers and issues copies; consumer warps wait on
//              "full" barriers and release stages early (once their elements are in registers): every consumer
//              thread arrives on the empty barrier itself (see ws_ring for why not one lane per warp)
// A stage holds `tiles_per_stage` tiles; an iteration is one stage fill. Optional trace: per wait, the stage,
// the parity and the first tile, for drvtma/b08/ring.py's model to check.
//
// DRVTMA_FAULT selects a deliberately broken protocol (tests expect a BarrierTimeout, never a hang):
//   1 expect_tx too low, 2 expect_tx too high, 3 a missing arrive (pipe_ring: the first fill's; ws_ring: the first
//   consumer warp's release of its first stage), 4 wrong starting parity of the producer (ws_ring only).
//
// DRVTMA_RING_PART keeps one half of the work, for `drvtma bench floors` (timing probes; nothing to verify):
//   1 copies only: consumers wait for each fill and release it untouched, computing and publishing nothing;
//   2 compute only: fills complete by a plain arrive, no copy is issued, consumers compute on the ring as it is.
// The full ring cannot be faster than either half, so the slower half bounds what any ring shape can reach.
#include <drvtma/b08_tile.cuh>

#ifndef DRVTMA_FAULT
#define DRVTMA_FAULT 0
#endif
#ifndef DRVTMA_RING_PART
#define DRVTMA_RING_PART 0
#endif
constexpr bool kCopies = DRVTMA_RING_PART != 2;
constexpr bool kComputes = DRVTMA_RING_PART != 1;

constexpr int kMaxStages = 16;

// Bytes announced for a fill of `bytes`: 8 off either way is never reached by 16-byte-granular completions.
__device__ __forceinline__ u32 announced_tx(u32 bytes) {
    if (DRVTMA_FAULT == 1) return bytes - 8;
    if (DRVTMA_FAULT == 2) return bytes + 8;
    return bytes;
}

// trace[(block * roles + role) * capacity + iteration] = {stage | parity << 16, first tile of the fill}
__device__ __forceinline__ void record_wait(uint2* trace, int roles, int role, int capacity, int i, int stage,
                                            u32 parity, long long tile) {
    if (trace != nullptr && i < capacity) {
        const long long row = (long long)blockIdx.x * roles + role;
        trace[row * capacity + i] = make_uint2(u32(stage) | (parity << 16), u32(tile));
    }
}

// This block's run of tiles and the ring it flows through: iteration i fills stage i % stages with the tiles
// first + i * tiles_per_stage onwards (the last fill may be shorter).
struct BlockRing {
    float* smem;  // stages * tiles_per_stage tiles
    int stages, tiles_per_stage, count, iters;
    long long first;

    __device__ __forceinline__ BlockRing(float* ring, int num_tiles, int tiles_per_block, int stages_,
                                         int tiles_per_stage_)
        : smem(ring), stages(stages_), tiles_per_stage(tiles_per_stage_) {
        const TileRun run = block_tiles(num_tiles, tiles_per_block);
        first = run.first;
        count = run.count;
        iters = (count + tiles_per_stage - 1) / tiles_per_stage;
    }
    __device__ __forceinline__ float* stage(int s) const { return smem + s * tiles_per_stage * kTileElems; }
    __device__ __forceinline__ long long tile0(int i) const { return first + (long long)i * tiles_per_stage; }
    __device__ __forceinline__ int fill_tiles(int i) const {
        const int left = count - i * tiles_per_stage;
        return left < tiles_per_stage ? left : tiles_per_stage;
    }
    __device__ __forceinline__ u32 fill_bytes(int i) const { return u32(fill_tiles(i)) * kTileBytes; }
};

// Consume the n tiles of one fill at `base` (global tile index tile0 onwards). `release()` runs once per consumer,
// block- or warp-uniformly, right after its last shared-memory read of the fill and before the compute on it.
template <typename Release>
__device__ __forceinline__ void consume_fill(const float* base, long long tile0, int n, int fma_iters,
                                             TilePublisher& pub, Release release) {
    const int tid = threadIdx.x, warp = tid >> 5;
    if constexpr (!kComputes) {
        release();
        return;
    }
    if constexpr (kWarpTiles) {
        const int rounds = (n + kConsumerWarps - 1) / kConsumerWarps;
        for (int r = 0; r < rounds; ++r) {
            const int j = r * kConsumerWarps + warp;
            const bool mine = j < n;  // warp-uniform
            WarpShare share;
            if (mine) share.load(base + j * kTileElems, tid & 31);
            if (r == rounds - 1) release();
            if (mine) {
                u32 in_sum, out_sum;
                share.compute(tid & 31, linear_tile(tile0 + j), fma_iters, in_sum, out_sum);
                pub.push(tile0 + j, in_sum, out_sum);
            }
        }
    } else {
        for (int j = 0; j < n; ++j) {
            ThreadShare share;
            share.load(base + j * kTileElems, tid);
            if (j == n - 1) release();
            u32 in_sum, out_sum;
            share.compute(tid, linear_tile(tile0 + j), fma_iters, in_sum, out_sum);
            pub.push(tile0 + j, in_sum, out_sum);
        }
    }
}

// The consumers' side of both rings: wait for each fill on its full barrier (recording the wait in the trace row
// of this warp, `roles` rows per block), consume it, and call release(i, stage, waited) once every consumer holds
// its elements. A thread whose wait timed out runs on, on a stale fill, to release(), which returns the uniform
// decision of everyone who meets there (a block barrier or a warp vote): false = all of them leave now, without
// publishing the rest (mbarrier.cuh, uniform timeouts).
template <typename Release>
__device__ __forceinline__ void consume_ring(const BlockRing& r, u64* full, int fma_iters, u32* sums,
                                             DrvtmaStatus* status, uint2* trace, int roles, int trace_capacity,
                                             Release release) {
    const int tid = threadIdx.x, warp = tid >> 5;
    TilePublisher pub(sums, kWarpTiles ? 0 : warp);
    RingCursor at;
    for (int i = 0; i < r.iters; ++i) {
        const int stage = at.stage;
        const bool waited = mbar_wait(&full[stage], at.phase, status, kBarFull, stage, kSiteConsumerWait);
        if ((tid & 31) == 0) record_wait(trace, roles, warp, trace_capacity, i, stage, at.phase, r.tile0(i));
        bool go = true;
        consume_fill(r.stage(stage), r.tile0(i), r.fill_tiles(i), fma_iters, pub,
                     [&] { go = release(i, stage, waited); });
        if (!go) return;
        at.advance(r.stages);
    }
    pub.flush();
}

extern "C" __global__ void __launch_bounds__(kConsumerThreads)
pipe_ring(const float* __restrict__ in, u32* __restrict__ sums, int num_tiles, int tiles_per_block, int fma_iters,
          int stages, int tiles_per_stage, DrvtmaStatus* status, uint2* trace, int trace_capacity) {
    extern __shared__ __align__(128) float ring_smem[];
    __shared__ alignas(8) u64 full[kMaxStages];
    const BlockRing r(ring_smem, num_tiles, tiles_per_block, stages, tiles_per_stage);
    init_block_barriers({full, stages, 1});
    const bool issuer = is_issuer();
    auto issue = [&](int i, int s) {
        if (!kCopies) {
            mbar_arrive(&full[s]);
            return;
        }
        const u32 bytes = r.fill_bytes(i);
        if (DRVTMA_FAULT == 3 && i == 0) {
            mbar_expect_tx(&full[s], bytes);  // the arrive is missing: the first fill's phase never completes
        } else {
            mbar_arrive_expect_tx(&full[s], announced_tx(bytes));
        }
        bulk_load(r.stage(s), in + r.tile0(i) * kTileElems, bytes, &full[s]);
    };
    if (issuer) {
        for (int i = 0; i < stages && i < r.iters; ++i) issue(i, i);
    }
    // Early release: once every thread holds its elements of the fill in registers, the refill may start.
    consume_ring(r, full, fma_iters, sums, status, trace, kConsumerWarps, trace_capacity,
                 [&](int i, int stage, bool waited) {
        if (__syncthreads_or(!waited)) return false;  // the release barrier is the vote
        if (issuer && i + stages < r.iters) issue(i + stages, stage);
        return true;
    });
}

// Block = kConsumerThreads consumer threads + one producer warp (the last).
extern "C" __global__ void __launch_bounds__(kConsumerThreads + 32)
ws_ring(const float* __restrict__ in, u32* __restrict__ sums, int num_tiles, int tiles_per_block, int fma_iters,
        int stages, int tiles_per_stage, DrvtmaStatus* status, uint2* trace, int trace_capacity) {
    extern __shared__ __align__(128) float ring_smem[];
    __shared__ alignas(8) u64 full[kMaxStages];
    __shared__ alignas(8) u64 empty[kMaxStages];
    const BlockRing r(ring_smem, num_tiles, tiles_per_block, stages, tiles_per_stage);
    const int warp = threadIdx.x >> 5;
    constexpr int kRoles = kConsumerWarps + 1;  // trace rows: consumer warps, then the producer
    // full: the producer's arrive_expect_tx; empty: one arrive per consumer thread
    init_block_barriers({full, stages, 1}, {empty, stages, kConsumerThreads});

    if (warp == kConsumerWarps) {  // producer warp
        if (!elect_one()) return;
        RingCursor at;
        for (int i = 0; i < r.iters; ++i) {
            const int stage = at.stage;
            // Empty barriers start on phase 1, which a fresh barrier reports complete: the first lap never waits.
            const u32 parity = (DRVTMA_FAULT == 4) ? at.phase : at.phase ^ 1;
            if (!mbar_wait(&empty[stage], parity, status, kBarEmpty, stage, kSiteProducerWait)) return;
            record_wait(trace, kRoles, kConsumerWarps, trace_capacity, i, stage, parity, r.tile0(i));
            if (kCopies) {
                mbar_arrive_expect_tx(&full[stage], announced_tx(r.fill_bytes(i)));
                bulk_load(r.stage(stage), in + r.tile0(i) * kTileElems, r.fill_bytes(i), &full[stage]);
            } else {
                mbar_arrive(&full[stage]);
            }
            at.advance(stages);
        }
        return;
    }
    // Each thread releases its own reads of the stage (its arrive has release semantics; the producer's wait
    // acquires): racecheck credits only the arriving lane, not __syncwarp's ordering (docs/results/sanitizer.md).
    // Consumer warps meet nobody but themselves (their reductions): a warp vote decides for each.
    consume_ring(r, full, fma_iters, sums, status, trace, kRoles, trace_capacity, [&](int i, int stage, bool waited) {
        if (!__all_sync(0xffffffffu, waited)) return false;
        const bool skip = (DRVTMA_FAULT == 3) && warp == 0 && i == 0;
        if (!skip) mbar_arrive(&empty[stage]);
        return true;
    });
}
