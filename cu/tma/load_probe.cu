// Load probe: each CTA loads one box of `map` at its own coordinates into poisoned shared memory and writes the
// raw shared-memory image back, so the host can compare every byte (written or not) with drvtma/oracle.py.
// Rank, coordinates, base offset, image size and expect_tx are runtime values: one cubin serves every spec.
#include <drvtma/image.cuh>

// The image starts at a 1024-byte aligned shared address, so the swizzle phase (period up to 1024 B) of the
// destination is exactly `box_offset`, whatever the compiler puts before the dynamic region.

extern "C" __global__ void load_probe(const __grid_constant__ CUtensorMap map, int rank,
                                      const int* coords,       // [gridDim.x][5], dim 0 (fastest) first
                                      u32 box_offset,          // bytes into the image, a multiple of 128
                                      u32 image_bytes,         // a multiple of 16
                                      u32 tx_bytes,            // what the oracle says one load delivers
                                      u32 poison,              // 32-bit pattern for every byte not loaded
                                      u32* images,             // [gridDim.x][image_bytes / 4]
                                      DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    u32* image = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    init_block_barriers({&bar, 1, 1});
    load_one_image(&map, rank, coords + 5 * blockIdx.x, box_offset, image_bytes, tx_bytes, poison, image, images,
                   &bar, status);
}
