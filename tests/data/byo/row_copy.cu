// Your kernel, in your own file: drvtma's device headers without -I, your headers from next to it and from -I.
#include <drvtma/tma.cuh>
#include "copy_out.cuh"              // next to this file
#include <my_project/config.cuh>     // from your include directory (-I include)

extern "C" __global__ void row_copy(const __grid_constant__ CUtensorMap map, const int* coords, u32 box_bytes,
                                    u32* out, DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    u32* tile = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    init_block_barriers({&bar, 1, 1});
    if (!tma_load_2d_block(tile, &map, coords, &bar, box_bytes, status)) return;
    copy_out(tile, out + static_cast<size_t>(blockIdx.x) * (box_bytes / 4), box_bytes / 4, MY_COPY_STRIDE);
}
