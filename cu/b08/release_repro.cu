// The smallest producer/consumer ring that shows what compute-sanitizer racecheck makes of a stage release
// (docs/results/sanitizer.md). One consumer warp reads a 4 KiB stage (32 words a lane) and releases it on an "empty" mbarrier;
// a producer warp waits for the release and refills the stage; `iters` fills through one stage.
// DRVTMA_RELEASE picks the release protocol:
//   0 __syncwarp, then lane 0 arrives (1 arrival): correct under the PTX memory model, since bar.warp.sync orders
//     every lane's reads before lane 0's release-arrive; racecheck flags it
//   1 every lane arrives (32 arrivals): each lane's own reads precede its own release; what ws_ring does
//   2 lane 0 arrives with no __syncwarp: a real race (lanes 1..31 may still be reading), the control
//   3 as 0, but the producer warp refills the stage with plain shared-memory stores instead of a bulk copy
// Each lane writes out[(block * iters + fill) * 32 + lane] = the wrapping u32 sum of its 32 words; drvtma/b08/release_repro.py
// checks it against NumPy.
#include <drvtma/tma.cuh>

#ifndef DRVTMA_RELEASE
#define DRVTMA_RELEASE 0
#endif

constexpr int kWords = 1024;  // one stage: 4 KiB
constexpr u32 kEmptyArrivals = DRVTMA_RELEASE == 1 ? 32 : 1;
constexpr u32 kFullArrivals = DRVTMA_RELEASE == 3 ? 32 : 1;

extern "C" __global__ void __launch_bounds__(64)
release_repro(const u32* __restrict__ in, u32* __restrict__ out, int iters, DrvtmaStatus* status) {
    __shared__ __align__(128) u32 stage[kWords];
    __shared__ alignas(8) u64 full, empty;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    init_block_barriers({&full, 1, kFullArrivals}, {&empty, 1, kEmptyArrivals});
    if (warp == 1) {  // producer
        const bool leader = DRVTMA_RELEASE == 3 || elect_one();
        if (!leader) return;
        for (int i = 0; i < iters; ++i) {
            // the first fill finds a fresh barrier, whose phase of parity 1 counts as complete
            if (!mbar_wait(&empty, (i & 1) ^ 1, status, 1, 0, 2)) return;
            const u32* src = in + (long long)i * kWords;
            if (DRVTMA_RELEASE == 3) {
                for (int e = lane; e < kWords; e += 32) stage[e] = src[e];
                mbar_arrive(&full);
            } else {
                mbar_arrive_expect_tx(&full, kWords * 4);
                bulk_load(stage, src, kWords * 4, &full);
            }
        }
        return;
    }
    for (int i = 0; i < iters; ++i) {  // consumer warp
        // the warp's lanes meet again at __syncwarp: they leave together or not at all (mbarrier.cuh)
        if (!__all_sync(0xffffffffu, mbar_wait(&full, i & 1, status, 0, 0, 1))) return;
        u32 sum = 0;
#pragma unroll
        for (int e = 0; e < 32; ++e) sum += stage[lane + 32 * e];
        if (DRVTMA_RELEASE == 1) {
            mbar_arrive(&empty);
        } else {
            if (DRVTMA_RELEASE != 2) __syncwarp();
            if (lane == 0) mbar_arrive(&empty);
        }
        out[((long long)blockIdx.x * iters + i) * 32 + lane] = sum;
    }
}
