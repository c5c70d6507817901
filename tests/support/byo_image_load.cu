// A user's TMA load kernel in drvtma's runner signature (drvtma.fuzz.runners.CuLoadRunner): one CTA per box loads
// it into 1024-aligned shared memory and copies the whole shared-memory image out (swizzle and padding included).
#include <drvtma/tma.cuh>

extern "C" __global__ void image_load(const __grid_constant__ CUtensorMap map,
                                      const int* coords,   // [gridDim.x][5]: driver order (dim 0 first)
                                      int rank,
                                      u32 box_bytes,       // what one load delivers (expect_tx)
                                      u32 image_bytes,     // the box's shared-memory footprint
                                      unsigned char* out,  // [gridDim.x][image_bytes]
                                      DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    unsigned char* tile = align_smem_1024(smem_raw);
    init_block_barriers({&bar, 1, 1});
    const int* at = coords + 5 * blockIdx.x;
#ifdef PLANT_OFF_BY_ONE  // a planted bug for the toolchain tests: the outermost coordinate one row further along
    int moved[5] = {at[0], at[1], at[2], at[3], at[4]};
    moved[rank - 1] += rank > 1 ? 1 : 16;  // a rank-1 map moves 16 elements (a whole multiple of 16 bytes)
    at = moved;
#endif
    if (is_issuer()) {
        mbar_arrive_expect_tx(&bar, box_bytes);
        tma_load(tile, &map, rank, at, &bar);
    }
    if (!mbar_wait(&bar, 0, status, 0, 0, blockIdx.x)) return;
    unsigned char* mine = out + static_cast<size_t>(blockIdx.x) * image_bytes;
    for (u32 i = threadIdx.x; i < image_bytes; i += blockDim.x) mine[i] = tile[i];
}
