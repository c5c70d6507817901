// drvtma device helpers for wgmma.mma_async: warpgroup fences, commit/wait, descriptors placed at run time.
// The per-shape instruction wrappers are generated (wgmma_ops.cuh, behind DRVTMA_WGMMA_<TYPE>).
#pragma once
#include "common.cuh"
#include "wgmma_ops.cuh"

// Orders register accesses (accumulator, A fragments) before the next wgmma; needed before the first one.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// Closes the group of wgmmas issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Waits until at most N committed groups are pending; only then may d or the A registers be read.
template <int N = 0> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator accesses across the asynchronous region (no instruction).
__device__ __forceinline__ void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void wgmma_fence_operand(int& r) { asm volatile("" : "+r"(r)::"memory"); }

// A descriptor the host built with its start address relative to a buffer, moved to the buffer's shared address.
// Only the 14-bit start field changes (masked: a carry must not reach the reserved bits 14-15).
__device__ __forceinline__ u64 wgmma_desc_at(u64 relative, u32 smem_base) {
    const u64 start = (relative + (smem_base >> 4)) & 0x3FFFull;
    return (relative & ~0x3FFFull) | start;
}
