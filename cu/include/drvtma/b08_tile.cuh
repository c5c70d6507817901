// drvtma B-08 kernels: what every mode does with a tile once it sits in shared memory.
// The consumer side is shared by all modes so they differ only in how the bytes arrive:
// `fma_iters` dependent FMAs per element (the article's burn loop), and per-tile checksums of the
// shared-memory bits consumed and of the FMA results (drvtma/verify.py computes the same in NumPy).
#pragma once
#include "tma.cuh"

// Consumer threads per block. Compile-time, so each thread's elements of a tile unroll into registers.
#ifndef B08_THREADS
#define B08_THREADS 256
#endif
// How the ring kernels (cu/b08/pipelines.cu) share a tile among consumers: 0 = every consumer thread takes a few
// elements of every tile (as the article's kernels do); 1 = one warp consumes a whole tile (32 elements a lane),
// so a warp pays the per-tile protocol (wait, reductions, release) once per tile it owns instead of once per tile.
#ifndef B08_WARP_TILES
#define B08_WARP_TILES 0
#endif

constexpr int kTileElems = 1024;                 // one tile: 1024 fp32 = 4 KiB (a 32x32 box for tensor2d)
constexpr u32 kTileBytes = kTileElems * 4;
constexpr int kBoxSide = 32;
constexpr int kConsumerThreads = B08_THREADS;
constexpr int kConsumerWarps = kConsumerThreads / 32;
constexpr bool kWarpTiles = B08_WARP_TILES != 0;
constexpr int kSumSlots = kWarpTiles ? 1 : kConsumerWarps;  // checksum pairs per tile
static_assert(kConsumerThreads % 32 == 0 && kConsumerThreads >= 32 && kConsumerThreads <= 1024,
              "B08_THREADS must be a multiple of 32 in [32, 1024]");

// Barrier ids and call sites reported in DrvtmaStatus (drvtma/modes.py names them).
constexpr u32 kBarFull = 0, kBarEmpty = 1;
constexpr u32 kSiteConsumerWait = 1, kSiteProducerWait = 2;

// The article's arithmetic: a chain of dependent FMAs on one element; unroll 1 keeps it a latency chain.
__device__ __forceinline__ float burn_fma(float x, int fma_iters) {
    float acc = 0.f;
#pragma unroll 1
    for (int k = 0; k < fma_iters; ++k) acc = fmaf(x, acc, 1.0f);
    return acc;
}

// Checksum terms. Mixing in the global element index makes a displaced or permuted element change the sum,
// and lets differently tiled modes (tensor2d boxes vs contiguous tiles) agree on the total.
__device__ __forceinline__ u32 mix_input(u32 bits, u32 gidx) { return (bits ^ (gidx * 0x9E3779B9u)) * 0x85EBCA6Bu; }
__device__ __forceinline__ u32 mix_result(u32 bits, u32 gidx) { return (bits ^ (gidx * 0x7FEB352Du)) * 0x846CA68Bu; }

// Where a tile's element idx (row-major in the 32x32 view) lives in the global array:
// contiguous tiles have pitch 32; a tensor2d box has the 2D view's row width as pitch.
struct TileGeom {
    u32 base;
    u32 pitch;
    __device__ __forceinline__ u32 gidx(int idx) const { return base + u32(idx >> 5) * pitch + u32(idx & 31); }
};

__device__ __forceinline__ TileGeom linear_tile(long long tile) { return TileGeom{u32(tile) * kTileElems, kBoxSide}; }

// One consumer's share of a tile: elements first, first + kStride, ... (kCount of them, those below 1024).
template <int kStride>
struct TileShare {
    static constexpr int kCount = (kTileElems + kStride - 1) / kStride;
    float v[kCount];

    // No guard when the stride divides the tile: first < kStride holds by launch configuration.
    static __device__ __forceinline__ bool exists(int idx) { return kTileElems % kStride == 0 || idx < kTileElems; }

    __device__ __forceinline__ void load(const float* tile, int first) {
#pragma unroll
        for (int e = 0; e < kCount; ++e) {
            const int idx = first + e * kStride;
            v[e] = exists(idx) ? tile[idx] : 0.f;
        }
    }

    // Burn the FMAs and fold this consumer's part of both checksums.
    __device__ __forceinline__ void compute(int first, TileGeom g, int fma_iters, u32& in_sum, u32& out_sum) const {
        in_sum = 0;
        out_sum = 0;
#pragma unroll
        for (int e = 0; e < kCount; ++e) {
            const int idx = first + e * kStride;
            if (exists(idx)) {
                const u32 gi = g.gidx(idx);
                in_sum += mix_input(__float_as_uint(v[e]), gi);
                out_sum += mix_result(__float_as_uint(burn_fma(v[e], fma_iters)), gi);
            }
        }
    }
};

using ThreadShare = TileShare<kConsumerThreads>;  // every consumer thread, a few elements of each tile
using WarpShare = TileShare<32>;                  // one warp, the whole tile

// Checksum pairs: sums[(tile * kSumSlots + slot) * 2 + {0, 1}], slot = the consumer warp (or 0 for warp-owned
// tiles). Plain stores into a poisoned buffer, so a tile nobody consumed keeps the poison and fails verification.
// A warp's store of one tile waits until its next tile is computed, so the reductions' latency hides behind that
// work instead of stalling the warp; flush() stores the last one.
struct TilePublisher {
    u32* sums;
    int slot;
    long long tile = -1;
    u32 in_warp = 0, out_warp = 0;

    __device__ __forceinline__ TilePublisher(u32* s, int sl) : sums(s), slot(sl) {}

    __device__ __forceinline__ void flush() {
        if (tile >= 0 && (threadIdx.x & 31) == 0) {
            reinterpret_cast<uint2*>(sums)[tile * kSumSlots + slot] = make_uint2(in_warp, out_warp);
        }
    }
    __device__ __forceinline__ void push(long long t, u32 in_sum, u32 out_sum) {
        flush();
        in_warp = __reduce_add_sync(0xffffffffu, in_sum);
        out_warp = __reduce_add_sync(0xffffffffu, out_sum);
        tile = t;
    }
};

// The article modes: the whole block consumes each tile (thread split; these kernels ignore B08_WARP_TILES).
__device__ __forceinline__ void consume_tile(const float* tile, int ctid, TileGeom g, int fma_iters,
                                             TilePublisher& pub, long long tile_index) {
    ThreadShare share;
    share.load(tile, ctid);
    u32 in_sum, out_sum;
    share.compute(ctid, g, fma_iters, in_sum, out_sum);
    pub.push(tile_index, in_sum, out_sum);
}

// This block's tiles: a contiguous run of tiles_per_block starting at `first` (the last run may be shorter).
struct TileRun {
    long long first;
    int count;
};

__device__ __forceinline__ TileRun block_tiles(int num_tiles, int tiles_per_block) {
    const long long first = (long long)blockIdx.x * tiles_per_block;
    const long long left = num_tiles - first;
    return {first, left <= 0 ? 0 : (left < tiles_per_block ? int(left) : tiles_per_block)};
}
