// Shared-memory bank conflicts, timed: every warp of one block issues the same warp request (lane i reads `width`
// bytes, 4 or 16, at offsets[i] of a 1024-byte aligned buffer; lanes from `active` on stay idle) `iters` x UNROLL
// times, back to back (ld.volatile: ptxas would otherwise merge the repeated loads of one address). With several
// warps issuing, the shared-memory pipe is the bound, so the block's cycles per request follow the wavefronts a
// request costs; the host divides by a conflict-free request's cycles (drvtma.show.banks predicts the count;
// tests/test_bank_probe_gpu.py compares).
#include <drvtma/common.cuh>

#define BANK_SMEM_BYTES (16 * 1024)
#define BANK_UNROLL 16

extern "C" __global__ void bank_probe(const u32* offsets, u32 width, u32 active, u32 iters, u64* cycles,
                                      u32* sink) {
    __shared__ __align__(1024) u32 buf[BANK_SMEM_BYTES / 4];
    for (u32 i = threadIdx.x; i < BANK_SMEM_BYTES / 4; i += blockDim.x) buf[i] = i * 2654435761u;
    const u32 lane = threadIdx.x & 31;
    // the offsets are the host's (absolute addresses mod 16 KiB); the buffer's own address is 1024-aligned
    const u32 addr = static_cast<u32>(__cvta_generic_to_shared(buf)) + (offsets[lane] % BANK_SMEM_BYTES);
    u32 acc = 0;
    u64 start = 0;
    __syncthreads();
    if (threadIdx.x == 0) start = clock64();
    __syncthreads();
    if (lane < active) {
        if (width == 16) {
            for (u32 it = 0; it < iters; ++it) {
#pragma unroll
                for (int u = 0; u < BANK_UNROLL; ++u) {
                    u32 a, b, c, d;
                    asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr) : "memory");
                    acc ^= a ^ b ^ c ^ d;
                }
            }
        } else {
            for (u32 it = 0; it < iters; ++it) {
#pragma unroll
                for (int u = 0; u < BANK_UNROLL; ++u) {
                    u32 a;
                    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(a) : "r"(addr) : "memory");
                    acc ^= a;
                }
            }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) cycles[blockIdx.x] = static_cast<u64>(clock64() - start);
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
