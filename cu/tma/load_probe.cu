// Load probe: each CTA loads one box of `map` at its own coordinates into poisoned shared memory and writes the
// raw shared-memory image back, so the host can compare every byte (written or not) with drvtma/tma/tiled/oracle.py.
// Rank, coordinates, base offset, image size and expect_tx are runtime values: one cubin serves every spec.
#include <drvtma/image.cuh>

extern "C" __global__ void load_probe(const __grid_constant__ CUtensorMap map, int rank,
                                      const int* coords,  // [gridDim.x][5], dim 0 (fastest) first
                                      // the image arguments (image.cuh, probe_image)
                                      u32 box_offset, u32 image_bytes, u32 tx_bytes, u32 poison, u32* images,
                                      u64* digests, DrvtmaStatus* status) {
    const ProbeImage p = probe_image();
    load_one_image(&map, rank, coords + 5 * blockIdx.x, box_offset, image_bytes, tx_bytes, poison, p.image, images,
                   p.bar, status);
    if (digests != nullptr) write_image_digest(p.image, image_bytes, digests);  // a kernel argument: uniform
}
