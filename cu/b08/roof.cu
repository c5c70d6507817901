// `drvtma bench roof`: the plain read kernel the TMA modes are measured against.
// Every thread streams 16-byte loads over a grid-stride loop, ROOF_UNROLL loads in flight at a time, and folds
// the words into a sum so the loads cannot be removed; block_sums lets the host check that every byte was read.
#include <drvtma/common.cuh>

#ifndef ROOF_UNROLL
#define ROOF_UNROLL 4
#endif

extern "C" __global__ void roof_read_vec4(const uint4* __restrict__ in, long long n_vec, u32* __restrict__ block_sums) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    u32 sum = 0;
    for (; i + (ROOF_UNROLL - 1) * stride < n_vec; i += ROOF_UNROLL * stride) {
        uint4 v[ROOF_UNROLL];
#pragma unroll
        for (int u = 0; u < ROOF_UNROLL; ++u) v[u] = __ldcs(in + i + u * stride);  // streaming: no reuse
#pragma unroll
        for (int u = 0; u < ROOF_UNROLL; ++u) sum += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    for (; i < n_vec; i += stride) {
        const uint4 v = __ldcs(in + i);
        sum += v.x + v.y + v.z + v.w;
    }
    sum = __reduce_add_sync(0xffffffffu, sum);
    __shared__ u32 warp_sums[32];
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 total = 0;
        for (int w = 0; w < int(blockDim.x >> 5); ++w) total += warp_sums[w];
        block_sums[blockIdx.x] = total;
    }
}
