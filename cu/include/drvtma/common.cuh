// drvtma device helpers: basic types. NVRTC has no cuda.h, so the tensor-map type is declared here.
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;

// Same size and alignment as CUDA 13's CUtensorMap: 128 opaque bytes. Kernels take it as
// `const __grid_constant__ CUtensorMap` so it lives in parameter space, where TMA may read it.
#ifndef DRVTMA_NO_CUTENSORMAP
struct alignas(128) CUtensorMap { u64 opaque[16]; };
#endif

// 32-bit shared-memory address of a generic pointer into shared memory (what PTX's [addr] operands want).
__device__ __forceinline__ u32 smem_u32(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

// The tensor map operand of cp.async.bulk.tensor is the generic address of the map in param space.
__device__ __forceinline__ u64 tmap_u64(const CUtensorMap* map) { return reinterpret_cast<u64>(map); }

// The first address at or after `p` that is 1024-byte aligned in shared memory: a swizzle pattern repeats every
// 1024 B of the absolute shared address, so buffers placed from there have a phase the host knows.
__device__ __forceinline__ unsigned char* align_smem_1024(unsigned char* p) {
    return p + ((1024u - (smem_u32(p) & 1023u)) & 1023u);
}

__device__ __forceinline__ u64 globaltimer_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ u32 linear_block_id() {
    return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
