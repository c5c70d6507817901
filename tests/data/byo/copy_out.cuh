#pragma once
// Copy `words` words from shared memory to global, `stride` threads apart.
__device__ __forceinline__ void copy_out(const u32* from, u32* to, u32 words, u32 stride) {
    for (u32 i = threadIdx.x; i < words; i += stride) to[i] = from[i];
}
