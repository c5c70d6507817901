// drvtma device helpers: the status record every bounded wait reports into.
// The host mirror is drvtma/status.py (STATUS_DTYPE); keep the two layouts identical.
#pragma once
#include "common.cuh"

constexpr u32 kStatusSlots = 8;  // timed-out waits recorded in full; the count covers all of them

struct DrvtmaTimeout {
    u32 block;    // linear block index
    u32 thread;   // threadIdx.x
    u32 barrier;  // kernel-chosen barrier id (e.g. 0 = full ring, 1 = empty ring)
    u32 stage;    // ring stage (or 0)
    u32 parity;   // parity that was awaited
    u32 where;    // kernel-chosen call-site id
    u64 since_ns; // %globaltimer when the wait began: the earliest-begun wait is the likeliest root cause
    u32 cta_rank;      // %cluster_ctarank of the waiting CTA (0 outside a cluster launch)
    u32 cluster_ctas;  // %cluster_nctarank: CTAs in its cluster (1 outside a cluster launch)
};

struct DrvtmaStatus {
    u32 timeouts;  // how many waits timed out, over the whole launch
    u32 claimed;   // slots handed out (may pass kStatusSlots; the later ones are counted, not stored)
    u32 reserved[2];
    DrvtmaTimeout slot[kStatusSlots];
};

__device__ __noinline__ void drvtma_report_timeout(DrvtmaStatus* st, u32 barrier, u32 stage, u32 parity, u32 where,
                                                   u64 since_ns) {
    if (st == nullptr) return;
    atomicAdd(&st->timeouts, 1u);
    const u32 i = atomicAdd(&st->claimed, 1u);
    if (i < kStatusSlots) {
        u32 rank, ctas;
        asm volatile("mov.u32 %0, %%cluster_ctarank;\n\tmov.u32 %1, %%cluster_nctarank;" : "=r"(rank), "=r"(ctas));
        st->slot[i] = DrvtmaTimeout{linear_block_id(), threadIdx.x, barrier, stage, parity, where, since_ns, rank, ctas};
    }
    __threadfence();
}
