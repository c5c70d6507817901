// drvtma device helpers: thread-block clusters (sm_90). Rank and shape, mapa, barrier.cluster, remote mbarrier
// arrive, cluster-wide barrier initialisation, multicast tensor loads (ranks 1..5) and 1D bulk multicast,
// distributed shared memory loads and stores. Rules and sources: the PTX ISA (cp.async.bulk, mapa, barrier.cluster, mbarrier) and the CUDA guide's clusters.
//
// The rules the helpers cannot enforce (the probes in cu/cluster/ pin what breaking them does:
// docs/results/multicast.md):
// - every CTA a multicast writes into must arm its own barrier for the bytes that land in it, issuer or not;
// - nobody touches a peer's shared memory before every CTA initialised its barriers (init_cluster_barriers);
// - a CTA must not exit, nor reuse a buffer, while a peer may still write into it (cluster_sync at the end).
#pragma once
#include "common.cuh"
#include "mbarrier.cuh"

typedef unsigned short u16;  // ctaMask is a 16-bit operand ("h")

// ---- identity. Rank = x + nx * (y + ny * z) over %cluster_ctaid [derived; pinned by cluster_identity.cu].
__device__ __forceinline__ u32 cluster_ctarank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ u32 cluster_nctarank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint3 cluster_ctaid() {
    uint3 v;
    asm volatile("mov.u32 %0, %%cluster_ctaid.x;\n\tmov.u32 %1, %%cluster_ctaid.y;\n\tmov.u32 %2, %%cluster_ctaid.z;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z));
    return v;
}
__device__ __forceinline__ uint3 cluster_nctaid() {
    uint3 v;
    asm volatile("mov.u32 %0, %%cluster_nctaid.x;\n\tmov.u32 %1, %%cluster_nctaid.y;\n\tmov.u32 %2, %%cluster_nctaid.z;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z));
    return v;
}
// Linear index of this CTA's cluster in the grid (x fastest), for per-cluster work and output slots.
__device__ __forceinline__ u32 cluster_linear_id() {
    u32 x, y, z, nx, ny;
    asm volatile("mov.u32 %0, %%clusterid.x;\n\tmov.u32 %1, %%clusterid.y;\n\tmov.u32 %2, %%clusterid.z;\n\t"
                 "mov.u32 %3, %%nclusterid.x;\n\tmov.u32 %4, %%nclusterid.y;"
                 : "=r"(x), "=r"(y), "=r"(z), "=r"(nx), "=r"(ny));
    return x + nx * (y + ny * z);
}

// ---- distributed shared memory: the same variable in CTA `rank` (a .shared::cluster address).
__device__ __forceinline__ u32 mapa_shared(u32 local_smem_addr, u32 rank) {
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(local_smem_addr), "r"(rank));
    return r;
}
__device__ __forceinline__ void dsmem_st_u32(u32 cluster_addr, u32 value) {
    asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(cluster_addr), "r"(value) : "memory");
}
__device__ __forceinline__ u32 dsmem_ld_u32(u32 cluster_addr) {
    u32 v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_addr) : "memory");
    return v;
}

// ---- barrier.cluster. Every non-exited thread of the cluster arrives once per phase; the wait acquires what the
// arrivals released (not asynchronous copies: those complete on mbarriers). Not `.aligned`: callers may diverge.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire;" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
    cluster_arrive();
    cluster_wait();
}

// ---- mbarriers across the cluster. A CTA waits only on its own barriers; peers may arrive on them.
// Arrive once on the barrier at the same offset as `bar` in CTA `rank` (release at cluster scope: it publishes this
// thread's st.shared::cluster stores to the peer, as cluster_identity.cu needs; each call costs a MEMBAR.ALL.GPU, so
// handing a ring stage back uses mbar_remote_arrive_cta below).
__device__ __forceinline__ void mbar_remote_arrive(u64* bar, u32 rank) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];"
                 ::"r"(mapa_shared(smem_u32(bar), rank)) : "memory");
}

// Arrive once on the barrier at the same offset as `bar` in CTA `rank` with mbarrier.arrive's default semantics
// (release at CTA scope), as CUTLASS's ClusterBarrier::arrive(cta_id, pred) does. Enough to hand a ring stage back
// to a peer's producer: the arrival says this thread's reads of the stage are done (a wgmma's reads are complete
// at its wait), and the peer's TMA overwrites the stage only after its own wait on this barrier. The
// .release.cluster form above is preceded by MEMBAR.ALL.GPU in SASS, on every call.
__device__ __forceinline__ void mbar_remote_arrive_cta(u64* bar, u32 rank) {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(mapa_shared(smem_u32(bar), rank)) : "memory");
}

// try_wait that acquires at cluster scope: for a barrier that publishes peers' plain st.shared::cluster stores
// (cluster_identity.cu) or whose waiter reads peer memory. A ring of multicast stages does not need it: the
// bytes complete_tx this CTA's own barrier through the async proxy (gemm_ws.cu, multicast_bench.cu wait at CTA scope).
DRVTMA_MBAR_PARITY_POLL(mbar_try_wait_parity_cluster, "try_wait.parity.acquire.cluster")

// Bounded wait on a multicast-fed barrier. A timeout is recorded with the CTA's cluster rank (status.cuh).
__device__ __forceinline__ bool mbar_wait_cluster(u64* bar, u32 parity, DrvtmaStatus* st, u32 barrier_id,
                                                  u32 stage, u32 where) {
    return mbar_wait_bounded(mbar_try_wait_parity_cluster, bar, parity, st, barrier_id, stage, where);
}

// One non-blocking look at a barrier's phase (probes report barrier state with it).
DRVTMA_MBAR_PARITY_POLL(mbar_test_parity, "test_wait.parity.acquire.cluster")

// Thread 0 initialises the barriers and runs fence.mbarrier_init.release.cluster (mbar_fence_init); the cluster
// barrier after it makes every CTA's barriers visible to every peer and to multicasts issued after it. Every thread
// of every CTA of the cluster must call it.
__device__ __forceinline__ void init_cluster_barriers(BarrierRun a, BarrierRun b = BarrierRun{nullptr, 0, 0},
                                                      BarrierRun c = BarrierRun{nullptr, 0, 0}) {
    if (threadIdx.x == 0) init_barrier_runs(a, b, c);
    // A release arrive (not the relaxed one PTX's example uses): whatever the threads wrote before (poison,
    // fenced to the async proxy) must also be ordered before the peers' multicasts into this CTA.
    cluster_sync();
}

// ---- multicast loads: the box lands at the same offset as `dst` in every CTA whose rank bit is set in `mask`,
// and each of them gets complete_tx of the bytes landing in it on the barrier at the same offset as `bar`.
__device__ __forceinline__ void tma_load_multicast_1d(void* dst, const CUtensorMap* map, int c0, u64* bar, u16 mask) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2}], [%3], %4;"
                 ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(smem_u32(bar)), "h"(mask) : "memory");
}
__device__ __forceinline__ void tma_load_multicast_2d(void* dst, const CUtensorMap* map, int c0, int c1, u64* bar,
                                                      u16 mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;"
                 ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(mask)
                 : "memory");
}
// The same with an L2 eviction priority (l2_evict_policy in copy.cuh).
__device__ __forceinline__ void tma_load_multicast_2d_hint(void* dst, const CUtensorMap* map, int c0, int c1,
                                                           u64* bar, u16 mask, u64 policy) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;"
                 ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(mask),
                 "l"(policy) : "memory");
}
__device__ __forceinline__ void tma_load_multicast_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                                      u64* bar, u16 mask) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3, %4}], [%5], %6;"
                 ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)), "h"(mask)
                 : "memory");
}
__device__ __forceinline__ void tma_load_multicast_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                                      int c3, u64* bar, u16 mask) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;"
                 ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar)),
                   "h"(mask)
                 : "memory");
}
__device__ __forceinline__ void tma_load_multicast_5d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                                      int c3, int c4, u64* bar, u16 mask) {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3, %4, %5, %6}], [%7], %8;"
                 ::"r"(smem_u32(dst)), "l"(tmap_u64(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4),
                   "r"(smem_u32(bar)), "h"(mask)
                 : "memory");
}

// Rank chosen at run time (probe kernels): c holds `rank` coordinates, dim 0 first.
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, int rank, const int* c,
                                                   u64* bar, u16 mask) {
    switch (rank) {
        case 1: tma_load_multicast_1d(dst, map, c[0], bar, mask); break;
        case 2: tma_load_multicast_2d(dst, map, c[0], c[1], bar, mask); break;
        case 3: tma_load_multicast_3d(dst, map, c[0], c[1], c[2], bar, mask); break;
        case 4: tma_load_multicast_4d(dst, map, c[0], c[1], c[2], c[3], bar, mask); break;
        default: tma_load_multicast_5d(dst, map, c[0], c[1], c[2], c[3], c[4], bar, mask); break;
    }
}

// 1D bulk multicast: `bytes` (a multiple of 16, 16-byte aligned ends) to the same CTA-relative offset in each CTA.
__device__ __forceinline__ void bulk_load_multicast(void* dst_smem, const void* src_gmem, u32 bytes, u64* bar,
                                                    u16 mask) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1], %2, [%3], %4;"
                 ::"r"(smem_u32(dst_smem)), "l"(src_gmem), "r"(bytes), "r"(smem_u32(bar)), "h"(mask) : "memory");
}
