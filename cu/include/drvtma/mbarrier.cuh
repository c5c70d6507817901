// drvtma device helpers: mbarrier (init, arrive, expect_tx) and the bounded parity wait.
#pragma once
#include "common.cuh"
#include "status.cuh"

// How long one wait may spin before it is declared a timeout. Generous for real work (a wait is
// microseconds), short enough that a broken protocol ends a test in about a second, not a hang.
#ifndef DRVTMA_WAIT_TIMEOUT_NS
#define DRVTMA_WAIT_TIMEOUT_NS 1000000000ull
#endif

__device__ __forceinline__ void mbar_init(u64* bar, u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}

// Makes initialised barriers visible to the async proxy (the copy engine) and the other threads.
__device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// A run of barriers that share an arrival count, for init_block_barriers.
struct BarrierRun {
    u64* bars;
    int count;
    u32 arrivals;
};

// Thread 0 only: initialise every barrier of the runs and fence the inits for the copy engine
// (init_block_barriers and cluster.cuh's init_cluster_barriers add the barrier that publishes them).
__device__ __forceinline__ void init_barrier_runs(BarrierRun a, BarrierRun b) {
    for (int i = 0; i < a.count; ++i) mbar_init(&a.bars[i], a.arrivals);
    for (int i = 0; i < b.count; ++i) mbar_init(&b.bars[i], b.arrivals);
    mbar_fence_init();
}

// Thread 0 initialises the runs; the CTA barrier at the end makes them visible to every thread. Every thread of
// the block must call it (it ends in __syncthreads).
__device__ __forceinline__ void init_block_barriers(BarrierRun a, BarrierRun b = BarrierRun{nullptr, 0, 0}) {
    if (threadIdx.x == 0) init_barrier_runs(a, b);
    __syncthreads();
}

__device__ __forceinline__ void mbar_arrive(u64* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Arrive once and announce `bytes` of transactions that copies will complete on this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

// True once the phase with this parity has completed (parity 1 is "complete" right after init).
__device__ __forceinline__ bool mbar_try_wait_parity(u64* bar, u32 parity) {
    u32 done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
    return done != 0;
}

// Bounded wait: returns false (after recording who, where, which parity and since when) instead of hanging.
// Callers must stop using the stage and leave the kernel when it returns false.
// `try_wait` is the flavour of try_wait (cluster.cuh's acquires at cluster scope for multicast-fed barriers).
template <typename TryWait>
__device__ __forceinline__ bool mbar_wait_bounded(TryWait try_wait, u64* bar, u32 parity, DrvtmaStatus* st,
                                                  u32 barrier_id, u32 stage, u32 where) {
    if (try_wait(bar, parity)) return true;
    const u64 start = globaltimer_ns();
    while (!try_wait(bar, parity)) {
        if (globaltimer_ns() - start > DRVTMA_WAIT_TIMEOUT_NS) {
            drvtma_report_timeout(st, barrier_id, stage, parity, where, start);
            return false;
        }
    }
    return true;
}

__device__ __forceinline__ bool mbar_wait(u64* bar, u32 parity, DrvtmaStatus* st, u32 barrier_id, u32 stage,
                                          u32 where) {
    return mbar_wait_bounded(mbar_try_wait_parity, bar, parity, st, barrier_id, stage, where);
}

// Where a k-stage ring stands: the stage to use next and the parity its phase will complete with. The parity
// flips each time the stage index wraps (drvtma/ring.py models the same: parity (i / k) & 1 at iteration i).
struct RingCursor {
    int stage = 0;
    u32 phase = 0;
    __device__ __forceinline__ void advance(int stages) {
        if (++stage == stages) {
            stage = 0;
            phase ^= 1;
        }
    }
};
