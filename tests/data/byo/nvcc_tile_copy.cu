// A TMA kernel as nvcc users write it: no drvtma headers, CUtensorMap from cuda.h, the PTX by hand.
// Build: nvcc -cubin -arch=sm_90a -o nvcc_tile_copy.cubin nvcc_tile_copy.cu
#include <cuda.h>
#include <cstdint>

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

extern "C" __global__ void nvcc_tile_copy(const __grid_constant__ CUtensorMap map, const int* coords,
                                          unsigned box_bytes, unsigned* out) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t bar;
    unsigned char* aligned = smem_raw + ((128u - (smem_addr(smem_raw) & 127u)) & 127u);  // TMA wants 128 B
    unsigned* tile = reinterpret_cast<unsigned*>(aligned);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar)) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     ::"r"(smem_addr(&bar)), "r"(box_bytes) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                     " [%0], [%1, {%2, %3}], [%4];"
                     ::"r"(smem_addr(tile)), "l"(reinterpret_cast<uint64_t>(&map)),
                     "r"(coords[2 * blockIdx.x]), "r"(coords[2 * blockIdx.x + 1]), "r"(smem_addr(&bar))
                     : "memory");
    }
    uint32_t done = 0;
    for (int spin = 0; spin < (1 << 24) && !done; ++spin) {  // bounded: a lost copy leaves the poison, no hang
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(smem_addr(&bar)) : "memory");
    }
    if (!done) return;
    unsigned* mine = out + static_cast<size_t>(blockIdx.x) * (box_bytes / 4);
    for (unsigned i = threadIdx.x; i < box_bytes / 4; i += blockDim.x) mine[i] = tile[i];
}
