// drvtma device helpers: the status record every bounded wait reports into.
// The host mirror is drvtma/status.py (STATUS_DTYPE); keep the two layouts identical.
#pragma once
#include "common.cuh"

struct DrvtmaStatus {
    u32 timeouts;  // how many waits timed out, over the whole launch
    u32 claimed;   // 0 until the first timeout claims the fields below
    u32 block;     // linear block index of the first timeout
    u32 thread;    // threadIdx.x of the first timeout
    u32 barrier;   // kernel-chosen barrier id (e.g. 0 = full ring, 1 = empty ring)
    u32 stage;     // ring stage (or 0)
    u32 parity;    // parity that was awaited
    u32 where;     // kernel-chosen call-site id
};

__device__ __noinline__ void drvtma_report_timeout(DrvtmaStatus* st, u32 barrier, u32 stage, u32 parity, u32 where) {
    if (st == nullptr) return;
    atomicAdd(&st->timeouts, 1u);
    if (atomicCAS(&st->claimed, 0u, 1u) == 0u) {
        st->block = linear_block_id();
        st->thread = threadIdx.x;
        st->barrier = barrier;
        st->stage = stage;
        st->parity = parity;
        st->where = where;
    }
    __threadfence();
}
