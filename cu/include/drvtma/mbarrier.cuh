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
__device__ __forceinline__ void init_barrier_runs(BarrierRun a, BarrierRun b,
                                                  BarrierRun c = BarrierRun{nullptr, 0, 0}) {
    for (int i = 0; i < a.count; ++i) mbar_init(&a.bars[i], a.arrivals);
    for (int i = 0; i < b.count; ++i) mbar_init(&b.bars[i], b.arrivals);
    for (int i = 0; i < c.count; ++i) mbar_init(&c.bars[i], c.arrivals);
    mbar_fence_init();
}

// Thread 0 initialises the runs; the CTA barrier at the end makes them visible to every thread. Every thread of
// the block must call it (it ends in __syncthreads).
__device__ __forceinline__ void init_block_barriers(BarrierRun a, BarrierRun b = BarrierRun{nullptr, 0, 0},
                                                    BarrierRun c = BarrierRun{nullptr, 0, 0}) {
    if (threadIdx.x == 0) init_barrier_runs(a, b, c);
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

// The one look at an mbarrier phase, defined once for every flavour: DRVTMA_MBAR_PARITY_POLL(name, "op") defines
// `bool name(u64* bar, u32 parity)`, true once the phase with this parity has completed (parity 1 is "complete"
// right after init). `op` is the instruction with its qualifiers, spliced into the asm string: "try_wait.parity"
// (may suspend the thread a while; acquire at CTA scope, the default) or e.g. "test_wait.parity.acquire.cluster"
// (returns at once; cluster.cuh's flavours acquire at cluster scope).
#define DRVTMA_MBAR_PARITY_POLL(name, op)                                 \
    __device__ __forceinline__ bool name(u64* bar, u32 parity) {           \
        u32 done;                                                          \
        asm volatile(                                                      \
            "{\n\t.reg .pred p;\n\t"                                       \
            "mbarrier." op ".shared::cta.b64 p, [%1], %2;\n\t"             \
            "selp.u32 %0, 1, 0, p;\n\t}"                                   \
            : "=r"(done)                                                   \
            : "r"(smem_u32(bar)), "r"(parity)                              \
            : "memory");                                                   \
        return done != 0;                                                  \
    }

DRVTMA_MBAR_PARITY_POLL(mbar_try_wait_parity, "try_wait.parity")

// A CTA's stop word (mbar_wait_or_stop below): 0 while the run goes on, 1 once a thread gave up.
__device__ __forceinline__ bool stop_raised(const volatile u32* stop) { return stop != nullptr && *stop != 0u; }
__device__ __forceinline__ void raise_stop(volatile u32* stop) { *stop = 1u; }

// ---- bounded waits: the one definition. `poll()` until it returns true; after DRVTMA_WAIT_TIMEOUT_NS the
// timeout is recorded in the status block (who, where, which parity, since when: BarrierTimeout on the host) and
// the wait returns false. Each thread's bound is its own: a wait returns in bounded time whatever the others do.
// `stop` (optional, a CTA's stop word, see mbar_wait_or_stop): the wait also returns false, unrecorded, once the
// word is raised.
//
// DRVTMA_TEST_GIVE_UP_BARRIER (test builds only): on waits naming that barrier id, warp 1 of every warpgroup waits
// as usual and then reports a timeout anyway, as a thread whose deadline passed just before the phase completed
// would; its sibling warps see the phase complete. The edge of the bound, made certain: only a uniform decision
// (below) gets everyone out; a per-thread `return` would leave warps 0, 2, 3 inside the next aligned op. Not once
// the stop word is raised: a thread gives up once, after which the waits of a stopped run return at once.
template <typename Poll>
__device__ __forceinline__ bool wait_bounded(Poll poll, DrvtmaStatus* st, u32 barrier_id, u32 stage, u32 parity,
                                             u32 where, const volatile u32* stop = nullptr) {
    if (!poll()) {
        const u64 start = globaltimer_ns();
        while (!poll()) {
            if (stop_raised(stop)) return false;  // another thread's bound passed: it recorded the cause
            if (globaltimer_ns() - start > DRVTMA_WAIT_TIMEOUT_NS) {
                drvtma_report_timeout(st, barrier_id, stage, parity, where, start);
                return false;
            }
        }
    }
#ifdef DRVTMA_TEST_GIVE_UP_BARRIER
    // (the warp asks as one whether the run has stopped: all 32 lanes give up, or none)
    if (barrier_id == DRVTMA_TEST_GIVE_UP_BARRIER && (threadIdx.x / 32) % 4 == 1 &&
        !__any_sync(0xffffffffu, stop_raised(stop))) {
        drvtma_report_timeout(st, barrier_id, stage, parity, where, globaltimer_ns());
        return false;
    }
#endif
    return true;
}

// Bounded wait on an mbarrier phase. `try_wait` is the flavour of try_wait (cluster.cuh's acquires at cluster
// scope for multicast-fed barriers). On false the caller stops using the stage and leaves, alone: use it where
// the waiting thread meets nobody afterwards (a lone producer, a lone waiter that then publishes a flag) or where
// a later CTA barrier turns the result into a vote (`__syncthreads_or(!ok)`, see mbar_wait_cta).
template <typename TryWait>
__device__ __forceinline__ bool mbar_wait_bounded(TryWait try_wait, u64* bar, u32 parity, DrvtmaStatus* st,
                                                  u32 barrier_id, u32 stage, u32 where) {
    return wait_bounded([&] { return try_wait(bar, parity); }, st, barrier_id, stage, parity, where);
}

__device__ __forceinline__ bool mbar_wait(u64* bar, u32 parity, DrvtmaStatus* st, u32 barrier_id, u32 stage,
                                          u32 where) {
    return mbar_wait_bounded(mbar_try_wait_parity, bar, parity, st, barrier_id, stage, where);
}

// ---- uniform timeouts. Threads that go on to an aligned operation together (wgmma over a warpgroup, mma.sync /
// ldmatrix / shfl / vote over a warp, bar.sync over a named group) must all go on or all leave: each waits (bounded),
// then the group votes and all leave if any timed out (why it cannot hang or desync: docs/CONTRACT.md).

// OR of `p` over the `threads` threads (whole warps) that meet at named barrier `id`; every one of them must
// call it. The warp converges first (a lane may come from a wait loop the others skipped), so the barrier can be
// the aligned form (the non-aligned one compiles to a WARPSYNC.COLLECTIVE loop that synccheck flags:
// docs/results/sanitizer.md).
__device__ __forceinline__ bool group_any(u32 id, u32 threads, bool p) {
    u32 any;
    __syncwarp();
    asm volatile(
        "{\n\t.reg .pred in, out;\n\t"
        "setp.ne.u32 in, %1, 0;\n\t"
        "bar.red.or.pred out, %2, %3, in;\n\t"
        "selp.u32 %0, 1, 0, out;\n\t}"
        : "=r"(any)
        : "r"(static_cast<u32>(p)), "r"(id), "r"(threads)
        : "memory");
    return any != 0;
}

// Every thread of the group (named barrier `group_bar`, `threads` threads) waits on the phase, then all agree:
// true for all when every wait succeeded, false for all when any timed out (each timeout recorded).
__device__ __forceinline__ bool mbar_wait_group(u64* bar, u32 parity, DrvtmaStatus* st, u32 barrier_id, u32 stage,
                                                u32 where, u32 group_bar, u32 threads) {
    return !group_any(group_bar, threads, !mbar_wait(bar, parity, st, barrier_id, stage, where));
}

// ---- a group that stays together through a loop, with one vote after it instead of one per wait. A consumer's
// k-loop waits on a stage and then runs aligned operations on it, every k-block. mbar_wait_group's vote costs a
// barrier instruction each time; this keeps the group uniform without it: no thread leaves the loop early.
// A thread whose bound passes records the timeout, raises the CTA's stop word (a shared u32, zeroed before the
// barriers are published) and goes on with the iteration as if the phase had completed: every thread of the group
// runs the same aligned operations on the same stages (on stale data once stopped: the launch reports the timeout
// and C is not to be read). Every other wait returns as soon as it sees the word, so each thread stays bounded: one
// bound, then no more waiting. After the loop the group votes once on the word (group_any(id, threads,
// stop_raised(stop))): all leave or all go on. Returns true when the phase completed for this thread; false when
// it did not (its own timeout, recorded, or the word raised by another), and then the word is raised.
__device__ __forceinline__ bool mbar_wait_or_stop(u64* bar, u32 parity, volatile u32* stop, DrvtmaStatus* st,
                                                  u32 barrier_id, u32 stage, u32 where) {
    if (wait_bounded([&] { return mbar_try_wait_parity(bar, parity); }, st, barrier_id, stage, parity, where, stop))
        return true;
    raise_stop(stop);
    return false;
}

// The same over the whole CTA (every thread of the block calls it).
__device__ __forceinline__ bool mbar_wait_cta(u64* bar, u32 parity, DrvtmaStatus* st, u32 barrier_id, u32 stage,
                                              u32 where) {
    return !__syncthreads_or(!mbar_wait(bar, parity, st, barrier_id, stage, where));
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
    // n stages on at once (a stage passes n / stages + 1 or n / stages times; each full lap flips the phase)
    __device__ __forceinline__ void advance_by(int n, int stages) {
        const int s = stage + n;
        phase ^= (u32)((s / stages) & 1);
        stage = s % stages;
    }
};
