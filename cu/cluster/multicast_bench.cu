// When does multicast pay: the k CTAs of a cluster all read the same sequence of tiles (a kStages ring), either
// with one multicast per tile (CTA r loads slice r of every tile for the whole cluster: each tile leaves L2 once per
// cluster) or each CTA loading every slice itself (k copies). Every CTA sums every word it receives, so the host can
// check that each CTA saw every tile, and the stage cannot be reused before its words were read.
//
// Multicast stage reuse: CTA r writes slice r into every peer's stage, so before reissuing a stage it must know every
// peer has read it: each CTA releases each stage to every rank (remote arrive on their empty barrier, k arrivals).
#include <drvtma/tma.cuh>
#include <drvtma/cluster.cuh>

#ifndef DRVTMA_MC_STAGES
#define DRVTMA_MC_STAGES 2  // ring depth (drvtma bench multicast --stages)
#endif
constexpr int kStages = DRVTMA_MC_STAGES;

extern "C" __global__ void multicast_bench(const __grid_constant__ CUtensorMap map,  // box: one slice
                                           u32 tiles,           // per cluster
                                           u32 slice_rows,      // rows of one slice (the map's box)
                                           u32 slice_bytes,
                                           u32 total_rows,      // rows of the tensor (tiles wrap around it)
                                           u32 multicast,       // 1: one multicast per slice; 0: own copies
                                           u32* checksums,      // [clusters * ctas]
                                           DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 full[kStages], empty[kStages];
    unsigned char* stage_base = align_smem_1024(smem_raw);
    const u32 me = cluster_ctarank(), k = cluster_nctarank(), cluster = cluster_linear_id();
    const u32 tile_bytes = slice_bytes * k, tile_rows = slice_rows * k;
    const u16 all = static_cast<u16>((1u << k) - 1);
    init_cluster_barriers({full, kStages, 1}, {empty, kStages, k});

    auto issue = [&](u32 i) {  // thread 0: tile i into stage i % kStages
        const u32 s = i % kStages;
        unsigned char* dst = stage_base + s * tile_bytes;
        const int row = static_cast<int>((static_cast<unsigned long long>(cluster) * tiles + i) * tile_rows % total_rows);
        mbar_arrive_expect_tx(&full[s], tile_bytes);
        if (multicast) {
            tma_load_multicast_2d(dst + me * slice_bytes, &map, 0, row + me * slice_rows, &full[s], all);
        } else {
            for (u32 j = 0; j < k; ++j) tma_load_2d(dst + j * slice_bytes, &map, 0, row + j * slice_rows, &full[s]);
        }
    };
    __shared__ bool ok;
    if (threadIdx.x == 0) {
        ok = true;
        for (u32 i = 0; i < tiles && i < kStages; ++i) issue(i);
    }
    __syncthreads();
    u32 sum = 0;
    for (u32 i = 0; i < tiles; ++i) {
        const u32 s = i % kStages, parity = (i / kStages) & 1;
        if (threadIdx.x == 0 && !mbar_wait(&full[s], parity, status, 0, s, 0)) ok = false;
        __syncthreads();
        if (!ok) break;
        const uint4* words = reinterpret_cast<const uint4*>(stage_base + s * tile_bytes);
        for (u32 w = threadIdx.x; w < tile_bytes / 16; w += blockDim.x) {
            const uint4 v = words[w];
            sum += v.x + v.y + v.z + v.w;
        }
        __syncthreads();  // every thread has read stage s
        if (threadIdx.x == 0 && i + kStages < tiles) {
            if (multicast) {
                // CTA-scope release and acquire, as CUTLASS's cluster pipelines: the cluster-scope forms cost a
                // MEMBAR.ALL.GPU per arrive and an L1 invalidation per wait (cluster.cuh)
                for (u32 r = 0; r < k; ++r) mbar_remote_arrive_cta(&empty[s], r);
                if (!mbar_wait(&empty[s], parity, status, 1, s, 1)) ok = false;
            }
            if (ok) issue(i + kStages);
        }
    }
    // Block sum of the per-thread sums (wrapping, like the host's uint32 sum).
    __shared__ u32 total;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    atomicAdd(&total, sum);
    __syncthreads();
    if (threadIdx.x == 0) checksums[cluster * k + me] = ok ? total : 0xFFFFFFFFu;
    cluster_sync();  // peers may still arrive on this CTA's empty barriers
}
