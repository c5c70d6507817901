// drvtma device helpers: fences, elect.sync, warp-group register reallocation.
#pragma once
#include "common.cuh"

// Ordinary (generic-proxy) writes to shared memory become visible to the copy engine (async proxy).
// Every thread that wrote a TMA store's source runs this before the CTA barrier that precedes the store.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One deterministic thread of a full warp. Unlike `threadIdx.x == 0` it needs no peeling loop.
__device__ __forceinline__ bool elect_one() {
    u32 pred;
    asm volatile(
        "{\n\t.reg .pred P;\n\t.reg .b32 r;\n\t"
        "elect.sync r|P, 0xffffffff;\n\t"
        "selp.u32 %0, 1, 0, P;\n\t}"
        : "=r"(pred));
    return pred != 0;
}

// The thread that issues a block's copies: warp 0's elected lane (a warp-uniform test, then elect.sync).
__device__ __forceinline__ bool is_issuer() { return (threadIdx.x >> 5) == 0 && elect_one(); }

// Give registers back (producer warps) or take more (consumer warps); counts are multiples of 8 in [24, 256].
template <u32 N> __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <u32 N> __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
