// im2col load probe: each CTA makes one im2col load of `map` (its coordinates and offsets from `rows`) into poisoned
// shared memory and writes the raw image back, so the host compares every byte with drvtma/tma/im2col/oracle.py.
// Rank, coordinates, offsets, image size and expect_tx are runtime values: one cubin serves every im2col map.
#include <drvtma/image.cuh>

extern "C" __global__ void im2col_probe(const __grid_constant__ CUtensorMap map, int rank,
                                        const int* rows,  // [gridDim.x][8]: c, w, h, d, n (dim 0 first, rank
                                                          // used), then offsets W, H, D
                                        // the image arguments (image.cuh, probe_image); tx_bytes: pixels x
                                        // channels x element size
                                        u32 box_offset, u32 image_bytes, u32 tx_bytes, u32 poison, u32* images,
                                        u64* digests, DrvtmaStatus* status) {
    const ProbeImage p = probe_image();
    const int* row = rows + 8 * blockIdx.x;
    int c[5], off[3];
    load_coords(row, c);
    for (int k = 0; k < 3; ++k) off[k] = row[5 + k];
    load_one_image_by([&](void* dst) { tma_load_im2col(dst, &map, rank, c, off, p.bar); }, box_offset, image_bytes,
                      tx_bytes, poison, p.image, images, p.bar, status);
    if (digests != nullptr) write_image_digest(p.image, image_bytes, digests);  // a kernel argument: uniform
}
