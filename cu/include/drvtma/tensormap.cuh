// drvtma device helpers: tensor maps outside the parameter bank (global and __constant__ maps), the acquire fence a
// CTA needs before it uses a map someone rewrote, prefetch.tensormap, and device-side edits (tensormap.replace on a
// copy in shared memory, published with tensormap.cp_fenceproxy). sm_90a only (tensormap.replace).
// Field numbers and PTX value codes are the host's drvtma/tma/maps/replace.py (FIELDS); keep the two the same.
#pragma once
#include "common.cuh"

// ---- acquire: which scope the writer was at. Host writes (cuMemcpyHtoD) need .sys, device writes .gpu [doc G].
// The fence orders only the executing thread: fence in one thread, then a CTA barrier before others use the map.
enum TmapFence : int { kTmapFenceNone = 0, kTmapFenceGpu = 1, kTmapFenceSys = 2 };

__device__ __forceinline__ void tensormap_acquire_gpu(const CUtensorMap* gmem_map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(gmem_map) : "memory");
}
__device__ __forceinline__ void tensormap_acquire_sys(const CUtensorMap* gmem_map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"(gmem_map) : "memory");
}
// The address must be in global memory: a __constant__ or parameter map cannot be fenced (PTX: undefined).
__device__ __forceinline__ void tensormap_acquire(const CUtensorMap* gmem_map, int scope) {
    if (scope == kTmapFenceGpu) tensormap_acquire_gpu(gmem_map);
    else if (scope == kTmapFenceSys) tensormap_acquire_sys(gmem_map);
}

// Bring the map's line in for later tensor copies (generic address: param, const or global).
__device__ __forceinline__ void tensormap_prefetch(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// ---- publish: copy 128 B from shared to global and release them to the tensormap proxy. A whole warp executes it
// (.sync.aligned); the shared copy must be complete and visible to the warp first (__syncwarp after the edits).
__device__ __forceinline__ void tensormap_cp_fenceproxy_gpu(CUtensorMap* gmem_dst, const CUtensorMap* smem_src) {
    asm volatile(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 128;"
        ::"l"(gmem_dst), "r"(smem_u32(smem_src)) : "memory");
}

// ---- edits on a copy in shared memory (one thread: replace is a weak write of all 1024 bits, so two threads
// editing the same map race). ord and the field3 values are immediates in PTX: the runtime switches below pick them.
#define DRVTMA_REPLACE_1(field, type, cons)                                                                   \
    __device__ __forceinline__ void tensormap_replace_##field(CUtensorMap* smem_map, u64 v) {                \
        asm volatile("tensormap.replace.tile." #field ".shared::cta.b1024." #type " [%0], %1;"                 \
                     ::"r"(smem_u32(smem_map)), cons(v) : "memory");                                          \
    }
#define DRVTMA_AS_B64(v) "l"(v)
#define DRVTMA_AS_B32(v) "r"(static_cast<u32>(v))
DRVTMA_REPLACE_1(global_address, b64, DRVTMA_AS_B64)
DRVTMA_REPLACE_1(rank, b32, DRVTMA_AS_B32)

#define DRVTMA_REPLACE_2(field, type, cons)                                                                   \
    template <int ORD> __device__ __forceinline__ void tensormap_replace_##field(CUtensorMap* smem_map, u64 v) { \
        asm volatile("tensormap.replace.tile." #field ".shared::cta.b1024." #type " [%0], %1, %2;"             \
                     ::"r"(smem_u32(smem_map)), "n"(ORD), cons(v) : "memory");                                \
    }                                                                                                         \
    __device__ __forceinline__ bool tensormap_replace_##field(CUtensorMap* smem_map, int ord, u64 v) {        \
        switch (ord) {                                                                                        \
            case 0: tensormap_replace_##field<0>(smem_map, v); return true;                                  \
            case 1: tensormap_replace_##field<1>(smem_map, v); return true;                                  \
            case 2: tensormap_replace_##field<2>(smem_map, v); return true;                                  \
            case 3: tensormap_replace_##field<3>(smem_map, v); return true;                                  \
            case 4: tensormap_replace_##field<4>(smem_map, v); return true;                                  \
            default: return false;                                                                            \
        }                                                                                                     \
    }
DRVTMA_REPLACE_2(box_dim, b32, DRVTMA_AS_B32)
DRVTMA_REPLACE_2(global_dim, b32, DRVTMA_AS_B32)
DRVTMA_REPLACE_2(global_stride, b64, DRVTMA_AS_B64)
DRVTMA_REPLACE_2(element_stride, b32, DRVTMA_AS_B32)

#define DRVTMA_REPLACE_3(field)                                                                               \
    template <int V> __device__ __forceinline__ void tensormap_replace_##field(CUtensorMap* smem_map) {       \
        asm volatile("tensormap.replace.tile." #field ".shared::cta.b1024.b32 [%0], %1;"                       \
                     ::"r"(smem_u32(smem_map)), "n"(V) : "memory");                                           \
    }
DRVTMA_REPLACE_3(elemtype)
DRVTMA_REPLACE_3(interleave_layout)
DRVTMA_REPLACE_3(swizzle_mode)
DRVTMA_REPLACE_3(fill_mode)
#define DRVTMA_CASE3(field, v) case v: tensormap_replace_##field<v>(smem_map); return true;

// PTX's own codes (not the driver's enums): elemtype 0 u8, 1 u16, 2 u32, 3 s32, 4 u64, 5 s64, 6 f16, 7 f32,
// 8 f32.ftz, 9 f64, 10 bf16, 11 tf32, 12 tf32.ftz; interleave 0..2; swizzle 0..3; fill 0 zero, 1 NaN.
__device__ __forceinline__ bool tensormap_replace_field3(CUtensorMap* smem_map, int field, u32 v) {
    switch (field) {
        case 6: switch (v) {
            DRVTMA_CASE3(elemtype, 0) DRVTMA_CASE3(elemtype, 1) DRVTMA_CASE3(elemtype, 2) DRVTMA_CASE3(elemtype, 3)
            DRVTMA_CASE3(elemtype, 4) DRVTMA_CASE3(elemtype, 5) DRVTMA_CASE3(elemtype, 6) DRVTMA_CASE3(elemtype, 7)
            DRVTMA_CASE3(elemtype, 8) DRVTMA_CASE3(elemtype, 9) DRVTMA_CASE3(elemtype, 10)
            DRVTMA_CASE3(elemtype, 11) DRVTMA_CASE3(elemtype, 12)
            default: return false;
        }
        case 7: switch (v) {
            DRVTMA_CASE3(interleave_layout, 0) DRVTMA_CASE3(interleave_layout, 1) DRVTMA_CASE3(interleave_layout, 2)
            default: return false;
        }
        case 8: switch (v) {
            DRVTMA_CASE3(swizzle_mode, 0) DRVTMA_CASE3(swizzle_mode, 1) DRVTMA_CASE3(swizzle_mode, 2)
            DRVTMA_CASE3(swizzle_mode, 3)
            default: return false;
        }
        case 9: switch (v) {
            DRVTMA_CASE3(fill_mode, 0) DRVTMA_CASE3(fill_mode, 1)
            default: return false;
        }
        default: return false;
    }
}

// One edit as the host sends it (drvtma/tma/maps/replace.py Edit.to_words): field, ord, value (low, high 32 bits).
struct TmapEdit { int field; int ord; u32 lo; u32 hi; };

// Apply one edit to a map in shared memory; false for a field/ord/value PTX has no encoding for (nothing written).
__device__ __forceinline__ bool tensormap_apply_edit(CUtensorMap* smem_map, const TmapEdit& e) {
    const u64 v = (static_cast<u64>(e.hi) << 32) | e.lo;
    switch (e.field) {
        case 0: tensormap_replace_global_address(smem_map, v); return true;
        case 1: tensormap_replace_rank(smem_map, v); return true;
        case 2: return tensormap_replace_box_dim(smem_map, e.ord, v);
        case 3: return tensormap_replace_global_dim(smem_map, e.ord, v);
        case 4: return tensormap_replace_global_stride(smem_map, e.ord, v);
        case 5: return tensormap_replace_element_stride(smem_map, e.ord, v);
        default: return tensormap_replace_field3(smem_map, e.field, e.lo);
    }
}

// Warp 0 copies a template (or zeros, when tmpl is null) into shared memory: 32 lanes x 4 B.
__device__ __forceinline__ void tensormap_copy_to_smem(CUtensorMap* smem_map, const CUtensorMap* tmpl, u32 lane) {
    const u32* src = reinterpret_cast<const u32*>(tmpl);
    reinterpret_cast<u32*>(smem_map)[lane] = src ? src[lane] : 0u;
}
