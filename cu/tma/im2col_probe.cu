// im2col load probe: each CTA makes one im2col load of `map` (its coordinates and offsets from `rows`) into poisoned
// shared memory and writes the raw image back, so the host compares every byte with drvtma/tma/im2col_oracle.py.
// Rank, coordinates, offsets, image size and expect_tx are runtime values: one cubin serves every im2col map.
#include <drvtma/image.cuh>

extern "C" __global__ void im2col_probe(const __grid_constant__ CUtensorMap map, int rank,
                                        const int* rows,         // [gridDim.x][8]: c, w, h, d, n (dim 0 first,
                                                                 // rank used), then offsets W, H, D
                                        u32 box_offset,          // bytes into the image, a multiple of 128
                                        u32 image_bytes,         // a multiple of 16
                                        u32 tx_bytes,            // pixels x channels x element size (the oracle's)
                                        u32 poison,              // 32-bit pattern for every byte not loaded
                                        u32* images,             // [gridDim.x][image_bytes / 4]
                                        DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    u32* image = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    init_block_barriers({&bar, 1, 1});
    const int* row = rows + 8 * blockIdx.x;
    int c[5], off[3];
    load_coords(row, c);
    for (int k = 0; k < 3; ++k) off[k] = row[5 + k];
    load_one_image_by([&](void* dst) { tma_load_im2col(dst, &map, rank, c, off, &bar); }, box_offset, image_bytes,
                      tx_bytes, poison, image, images, &bar, status);
}
