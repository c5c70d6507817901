// drvtma device helpers: everything, in one include.
#pragma once
#include "common.cuh"
#include "status.cuh"
#include "mbarrier.cuh"
#include "sync.cuh"
#include "copy.cuh"

// One 2D box per block, the usual start of a tile kernel: the issuer arms `bar` (initialised for one arrival) for
// `bytes` and loads the box of `map` at this block's coordinates, coords[blockIdx.x] of [gridDim.x][2] (dim 0 first:
// column, row), into `dst`; every thread then waits for phase 0, bounded. False: the wait timed out (recorded in
// `status`, where = the block): leave the kernel.
__device__ __forceinline__ bool tma_load_2d_block(void* dst, const CUtensorMap* map, const int* coords, u64* bar,
                                                  u32 bytes, DrvtmaStatus* status) {
    if (is_issuer()) {
        mbar_arrive_expect_tx(bar, bytes);
        tma_load_2d(dst, map, coords[2 * blockIdx.x], coords[2 * blockIdx.x + 1], bar);
    }
    return mbar_wait(bar, 0, status, 0, 0, blockIdx.x);
}
