"""The kernel of docs/testing-your-kernel.md: a user's own 2D TMA tile copy, checked against drvtma's oracle."""

# Each CTA loads one box of `map` at its coordinates into shared memory and copies the box out, row after row.
# Unswizzled maps with rows of whole 16-byte chunks: the shared image is the box in C order.
TILE_COPY_SOURCE = r"""
#include <drvtma/tma.cuh>

extern "C" __global__ void tile_copy(const __grid_constant__ CUtensorMap map,
                                     const int* coords,   // [gridDim.x][2]: column, row (dim 0 first)
                                     u32 box_bytes,       // what one load delivers (the spec's expect_tx_bytes)
                                     u32* out,            // [gridDim.x][box_bytes / 4]
                                     DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    u32* tile = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    init_block_barriers({&bar, 1, 1});
    // the issuer arms the barrier and loads; every thread waits, bounded: a lost copy is a BarrierTimeout
    if (!tma_load_2d_block(tile, &map, coords, &bar, box_bytes, status)) return;
    u32* mine = out + static_cast<size_t>(blockIdx.x) * (box_bytes / 4);
    for (u32 i = threadIdx.x; i < box_bytes / 4; i += blockDim.x) mine[i] = tile[i];
}
"""
