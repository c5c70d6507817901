// A user's TMA store kernel in drvtma's runner signature (drvtma.fuzz.runners.CuStoreRunner): one CTA copies the
// box's shared-memory image into 1024-aligned shared memory and stores (or reduces) it at the coordinates.
// Built with -DSKIP_LAST_CHUNK it carries a planted bug: the copy stops one 16-byte chunk short, so the store writes
// the zeros that chunk holds instead of the box's last bytes.
#include <drvtma/tma.cuh>

extern "C" __global__ void image_store(const __grid_constant__ CUtensorMap map,
                                       const int* coords,   // [5]: driver order (dim 0 first)
                                       int rank,
                                       int op,              // -1 store; 0 add .. 7 xor
                                       const uint4* image,  // the box as a load would have laid it out
                                       u32 image_bytes) {
    extern __shared__ unsigned char smem_raw[];
    uint4* tile = reinterpret_cast<uint4*>(align_smem_1024(smem_raw));
    const u32 chunks = image_bytes / 16;
    for (u32 i = threadIdx.x; i < chunks; i += blockDim.x) {
#ifdef SKIP_LAST_CHUNK
        tile[i] = i + 1 < chunks ? image[i] : make_uint4(0, 0, 0, 0);
#else
        tile[i] = image[i];
#endif
    }
    fence_proxy_async_shared();  // every writing thread: the store reads shared memory through the async proxy
    __syncthreads();
    if (is_issuer()) {
        tma_store_or_reduce(op, &map, tile, rank, coords);
        bulk_commit();
        bulk_wait<0>();  // the global writes are done before the CTA retires
    }
}
