// drvtma device helpers: 1D bulk copies and tiled tensor copies (load, store, reduce), ranks 1..5.
// Loads complete on an mbarrier (complete_tx bytes); stores and reductions complete through the issuing
// thread's bulk async-group (bulk_commit, bulk_wait_read, bulk_wait). Do not mix the two models.
#pragma once
#include "common.cuh"

// ---- 1D bulk copy (no tensor map): 16-byte aligned addresses, size a multiple of 16, no bounds handling.
__device__ __forceinline__ void bulk_load(void* dst_smem, const void* src_gmem, u32 bytes, u64* bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        ::"r"(smem_u32(dst_smem)), "l"(src_gmem), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void bulk_store(void* dst_gmem, const void* src_smem, u32 bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 ::"l"(dst_gmem), "r"(smem_u32(src_smem)), "r"(bytes) : "memory");
}

// ---- bulk async-group completion (stores, reductions): only the issuing thread may wait.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// The shared-memory sources of all but the newest N groups may be reused.
template <int N = 0> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// The global writes of all but the newest N groups are done.
template <int N = 0> __device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// Fetch a tensor map into the TMA unit's descriptor cache ahead of its first use (a hint: the first copy through
// the map otherwise waits for that fetch). `map` is a __grid_constant__ parameter's or a global map's generic address.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(tmap_u64(map)) : "memory");
}

// ---- L2 cache policies for loads with .L2::cache_hint: every line the load brings in gets the priority
// (fraction 1.0). kEvictFirst: evicted before normal lines; kEvictLast: after them.
enum L2Evict { kEvictNormal = 0, kEvictFirst = 1, kEvictLast = 2 };
template <int EVICT> __device__ __forceinline__ u64 l2_evict_policy() {
    static_assert(EVICT == kEvictFirst || EVICT == kEvictLast, "a normal load takes no policy");
    u64 policy;
    if constexpr (EVICT == kEvictFirst)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    else
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

// ---- tiled tensor loads: coordinates are signed, dim 0 (fastest) first; c0 * elemsize must be a multiple of 16.
__device__ __forceinline__ void tma_load_1d(void* dst, const CUtensorMap* map, int c0, u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)) : "memory");
}
// The same, with an L2 eviction priority for the lines it brings in (`policy` from l2_evict_policy): a stream read
// once (skinny GEMM's large operand) marked evict_first displaces its own spent lines, not other data in the L2.
__device__ __forceinline__ void tma_load_2d_hint(void* dst, const CUtensorMap* map, int c0, int c1, u64* bar,
                                                 u64 policy) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3}], [%4], %5;"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "l"(policy) : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
        : "memory");
}
__device__ __forceinline__ void tma_load_5d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            int c4, u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_u32(bar))
        : "memory");
}

// Rank chosen at run time (probe kernels): c holds `rank` coordinates, dim 0 first.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int rank, const int* c, u64* bar) {
    switch (rank) {
        case 1: tma_load_1d(dst, map, c[0], bar); break;
        case 2: tma_load_2d(dst, map, c[0], c[1], bar); break;
        case 3: tma_load_3d(dst, map, c[0], c[1], c[2], bar); break;
        case 4: tma_load_4d(dst, map, c[0], c[1], c[2], c[3], bar); break;
        default: tma_load_5d(dst, map, c[0], c[1], c[2], c[3], c[4], bar); break;
    }
}

// ---- im2col tensor loads (maps from cuTensorMapEncodeIm2col). Coordinates dim 0 first: c, w, (h), (d), n; the
// spatial ones are the filter base (inside the map's bounding box). Offsets are unsigned 16-bit, W first:
// rank 3 0..65535, rank 4 0..255, rank 5 0..31. One load brings pixelsPerColumn x channelsPerPixel elements.
typedef unsigned short u16;
__device__ __forceinline__ void tma_load_im2col_3d(void* dst, const CUtensorMap* map, int c, int w, int n, u16 ow,
                                                   u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5], {%6};"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c), "r"(w), "r"(n), "r"(smem_u32(bar)), "h"(ow) : "memory");
}
__device__ __forceinline__ void tma_load_im2col_4d(void* dst, const CUtensorMap* map, int c, int w, int h, int n,
                                                   u16 ow, u16 oh, u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(smem_u32(bar)), "h"(ow),
          "h"(oh) : "memory");
}
__device__ __forceinline__ void tma_load_im2col_5d(void* dst, const CUtensorMap* map, int c, int w, int h, int d,
                                                   int n, u16 ow, u16 oh, u16 od, u64* bar) {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5, %6}], [%7], {%8, %9, %10};"
        ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c), "r"(w), "r"(h), "r"(d), "r"(n), "r"(smem_u32(bar)),
          "h"(ow), "h"(oh), "h"(od) : "memory");
}
// Rank chosen at run time (probes): c holds `rank` coordinates (dim 0 first), off rank - 2 offsets (W first).
__device__ __forceinline__ void tma_load_im2col(void* dst, const CUtensorMap* map, int rank, const int* c,
                                                const int* off, u64* bar) {
    switch (rank) {
        case 3: tma_load_im2col_3d(dst, map, c[0], c[1], c[2], (u16)off[0], bar); break;
        case 4: tma_load_im2col_4d(dst, map, c[0], c[1], c[2], c[3], (u16)off[0], (u16)off[1], bar); break;
        default:
            tma_load_im2col_5d(dst, map, c[0], c[1], c[2], c[3], c[4], (u16)off[0], (u16)off[1], (u16)off[2], bar);
            break;
    }
}

// ---- tiled tensor stores and reductions (bulk-group completion). Any negative coordinate faults.
#define DRVTMA_COORDS_1 "{%2}"
#define DRVTMA_COORDS_2 "{%2, %3}"
#define DRVTMA_COORDS_3 "{%2, %3, %4}"
#define DRVTMA_COORDS_4 "{%2, %3, %4, %5}"
#define DRVTMA_COORDS_5 "{%2, %3, %4, %5, %6}"

// `insn` is the PTX opcode up to the rank, e.g. "cp.async.bulk.tensor" or "cp.reduce.async.bulk.tensor";
// `tail` is what follows ".Nd.global.shared::cta", e.g. ".tile.bulk_group" or ".add.tile.bulk_group".
#define DRVTMA_S2G(insn, tail, fn)                                                                              \
    __device__ __forceinline__ void fn##_1d(const CUtensorMap* map, const void* src, int c0) {                  \
        asm volatile(insn ".1d.global.shared::cta" tail " [%0, " DRVTMA_COORDS_1 "], [%1];"                     \
                     ::"l"(tmap_u64(map)), "r"(smem_u32(src)), "r"(c0) : "memory");                            \
    }                                                                                                           \
    __device__ __forceinline__ void fn##_2d(const CUtensorMap* map, const void* src, int c0, int c1) {          \
        asm volatile(insn ".2d.global.shared::cta" tail " [%0, " DRVTMA_COORDS_2 "], [%1];"                     \
                     ::"l"(tmap_u64(map)), "r"(smem_u32(src)), "r"(c0), "r"(c1) : "memory");                    \
    }                                                                                                           \
    __device__ __forceinline__ void fn##_3d(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {  \
        asm volatile(insn ".3d.global.shared::cta" tail " [%0, " DRVTMA_COORDS_3 "], [%1];"                     \
                     ::"l"(tmap_u64(map)), "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2) : "memory");           \
    }                                                                                                           \
    __device__ __forceinline__ void fn##_4d(const CUtensorMap* map, const void* src, int c0, int c1, int c2,    \
                                            int c3) {                                                           \
        asm volatile(insn ".4d.global.shared::cta" tail " [%0, " DRVTMA_COORDS_4 "], [%1];"                     \
                     ::"l"(tmap_u64(map)), "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");  \
    }                                                                                                           \
    __device__ __forceinline__ void fn##_5d(const CUtensorMap* map, const void* src, int c0, int c1, int c2,    \
                                            int c3, int c4) {                                                   \
        asm volatile(insn ".5d.global.shared::cta" tail " [%0, " DRVTMA_COORDS_5 "], [%1];"                     \
                     ::"l"(tmap_u64(map)), "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)      \
                     : "memory");                                                                               \
    }                                                                                                           \
    __device__ __forceinline__ void fn(const CUtensorMap* map, const void* src, int rank, const int* c) {       \
        switch (rank) {                                                                                         \
            case 1: fn##_1d(map, src, c[0]); break;                                                             \
            case 2: fn##_2d(map, src, c[0], c[1]); break;                                                       \
            case 3: fn##_3d(map, src, c[0], c[1], c[2]); break;                                                 \
            case 4: fn##_4d(map, src, c[0], c[1], c[2], c[3]); break;                                           \
            default: fn##_5d(map, src, c[0], c[1], c[2], c[3], c[4]); break;                                   \
        }                                                                                                       \
    }

DRVTMA_S2G("cp.async.bulk.tensor", ".tile.bulk_group", tma_store)
DRVTMA_S2G("cp.reduce.async.bulk.tensor", ".add.tile.bulk_group", tma_reduce_add)
DRVTMA_S2G("cp.reduce.async.bulk.tensor", ".min.tile.bulk_group", tma_reduce_min)
DRVTMA_S2G("cp.reduce.async.bulk.tensor", ".max.tile.bulk_group", tma_reduce_max)
DRVTMA_S2G("cp.reduce.async.bulk.tensor", ".inc.tile.bulk_group", tma_reduce_inc)
DRVTMA_S2G("cp.reduce.async.bulk.tensor", ".dec.tile.bulk_group", tma_reduce_dec)
DRVTMA_S2G("cp.reduce.async.bulk.tensor", ".and.tile.bulk_group", tma_reduce_and)
DRVTMA_S2G("cp.reduce.async.bulk.tensor", ".or.tile.bulk_group", tma_reduce_or)
DRVTMA_S2G("cp.reduce.async.bulk.tensor", ".xor.tile.bulk_group", tma_reduce_xor)

// Reduction chosen at run time, numbered as drvtma/tma/stores/rules.py's REDUCE_OPS: 0 add, 1 min, 2 max, 3 inc, 4 dec,
// 5 and, 6 or, 7 xor; -1 is a plain store.
__device__ __forceinline__ void tma_store_or_reduce(int op, const CUtensorMap* map, const void* src, int rank,
                                                    const int* c) {
    switch (op) {
        case 0: tma_reduce_add(map, src, rank, c); break;
        case 1: tma_reduce_min(map, src, rank, c); break;
        case 2: tma_reduce_max(map, src, rank, c); break;
        case 3: tma_reduce_inc(map, src, rank, c); break;
        case 4: tma_reduce_dec(map, src, rank, c); break;
        case 5: tma_reduce_and(map, src, rank, c); break;
        case 6: tma_reduce_or(map, src, rank, c); break;
        case 7: tma_reduce_xor(map, src, rank, c); break;
        default: tma_store(map, src, rank, c); break;
    }
}

// Prefetch a box into L2 (no shared memory, no completion).
__device__ __forceinline__ void tma_prefetch_2d(const CUtensorMap* map, int c0, int c1) {
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];"
                 ::"l"(tmap_u64(map)), "r"(c0), "r"(c1) : "memory");
}
