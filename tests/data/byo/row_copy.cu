// Your kernel, in your own file: drvtma's device headers without -I, your headers from next to it and from -I.
#include <drvtma/mbarrier.cuh>
#include <drvtma/copy.cuh>
#include <drvtma/sync.cuh>
#include "copy_out.cuh"              // next to this file
#include <my_project/config.cuh>     // from your include directory (-I include)

extern "C" __global__ void row_copy(const __grid_constant__ CUtensorMap map, const int* coords, u32 box_bytes,
                                    u32* out, DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    u32* tile = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    init_block_barriers({&bar, 1, 1});
    if (is_issuer()) {
        mbar_arrive_expect_tx(&bar, box_bytes);
        tma_load_2d(tile, &map, coords[2 * blockIdx.x], coords[2 * blockIdx.x + 1], &bar);
    }
    if (!mbar_wait(&bar, 0, status, 0, 0, blockIdx.x)) return;
    copy_out(tile, out + static_cast<size_t>(blockIdx.x) * (box_bytes / 4), box_bytes / 4, MY_COPY_STRIDE);
}
