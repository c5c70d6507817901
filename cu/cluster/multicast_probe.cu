// Multicast probe: every cluster of the grid runs its own list of multicast loads (tiled, ranks 1..5, or 1D bulk)
// into `slots` poisoned images per CTA, and every CTA writes back all of its images and the state of each slot's
// barrier, so the host compares every receiving CTA with drvtma/cluster/multicast.py, not only rank 0.
//
// Protocol: poison, fence to the async proxy, thread 0 inits one barrier per
// slot, fence.mbarrier_init.release.cluster, cluster barrier; then thread 0 of every CTA arms each of its slot
// barriers for the bytes the host says land in it (issuer or not), issues the cluster's ops whose issuer it is,
// waits (bounded) on its barriers, and a trailing cluster barrier keeps every CTA alive until all are done.
// `flags` break one rule at a time for the hazard tests (each run in a child process).
#include <drvtma/tma.cuh>
#include <drvtma/cluster.cuh>

// One multicast; mirrored by drvtma/cluster/probe.py (OP_DTYPE). Keep the layouts identical.
struct McastOp {
    u32 issuer;  // cluster rank that issues it; kNoOp marks an unused entry
    u32 mask;    // ctaMask: bit r = the CTA of cluster rank r receives (16 bits used)
    u32 slot;    // image slot (same offset in every receiver)
    u32 pad;
    int c[5];    // tiled: coordinates, dim 0 first; bulk (rank 0): c[0] = source offset / 16, c[1] = bytes
    int pad2[3];
};

constexpr u32 kNoOp = 0xFFFFFFFFu;
constexpr u32 kMaxSlots = 8;
constexpr u32 kIdWords = 8;

// Hazard switches (drvtma/cluster/probe.py HAZARD_FLAGS).
constexpr u32 kNoInitFence = 1;    // skip fence.mbarrier_init.release.cluster (the cluster barrier stays)
constexpr u32 kNoInitSync = 2;     // skip the fence and the cluster barrier after init: peers may not exist yet
constexpr u32 kLateExpect = 4;     // issue first, arm 20 us later: the bytes land before expect_tx (tx < 0)
constexpr u32 kNoExpect = 8;       // arm with a bare arrive, 20 us after the bytes landed: never completes
constexpr u32 kExitEarly = 16;     // CTAs that issue nothing leave right after init, no waits, no trailing barrier
constexpr u32 kNoTrailingSync = 32;

__device__ __forceinline__ void spin_ns(u64 ns) {
    const u64 t0 = globaltimer_ns();
    while (globaltimer_ns() - t0 < ns) __nanosleep(1000);
}

extern "C" __global__ void multicast_probe(const __grid_constant__ CUtensorMap map,
                                           int rank,                    // 1..5 tiled; 0: 1D bulk from bulk_src
                                           const unsigned char* bulk_src,
                                           const McastOp* ops,          // [clusters][ops_per_cluster]
                                           u32 ops_per_cluster,
                                           const u32* expect,           // [clusters * ctas][slots]: bytes to arm
                                           u32 slots,                   // <= kMaxSlots
                                           u32 slot_bytes,              // a multiple of 1024
                                           u32 box_offset,              // into each slot, a multiple of 128 (16 bulk)
                                           u32 poison, u32 flags,
                                           u32* images,                 // [clusters * ctas][slots][slot_bytes / 4]
                                           u32* state,                  // [clusters * ctas][slots]
                                           u32* ids,                    // [clusters * ctas][kIdWords]
                                           DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bars[kMaxSlots];

    unsigned char* base = align_smem_1024(smem_raw);
    const u32 me = cluster_ctarank(), ctas = cluster_nctarank(), cluster = cluster_linear_id();
    const u32 cta = cluster * ctas + me;  // output index: cluster order, then rank
    const McastOp* mine = ops + static_cast<size_t>(cluster) * ops_per_cluster;

    if (threadIdx.x == 0) {
        const uint3 at = cluster_ctaid();
        u32* id = ids + static_cast<size_t>(cta) * kIdWords;
        id[0] = blockIdx.x; id[1] = blockIdx.y; id[2] = blockIdx.z;
        id[3] = at.x; id[4] = at.y; id[5] = at.z; id[6] = me; id[7] = ctas;
    }
    u32* image = reinterpret_cast<u32*>(base);
    const u32 words = slots * slot_bytes / 4;
    for (u32 i = threadIdx.x; i < words; i += blockDim.x) image[i] = poison;
    fence_proxy_async_shared();  // the poison (generic proxy) before the copies (async proxy)
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 s = 0; s < slots; ++s) mbar_init(&bars[s], 1);
        if (!(flags & (kNoInitFence | kNoInitSync))) mbar_fence_init();
    }
    if (flags & kNoInitSync) __syncthreads(); else cluster_sync();

    bool issues = false;
    for (u32 k = 0; k < ops_per_cluster; ++k) issues |= mine[k].issuer == me;
    if ((flags & kExitEarly) && !issues) return;

    const u32* arm = expect + static_cast<size_t>(cta) * slots;
    if (threadIdx.x == 0) {
        const bool late = flags & (kLateExpect | kNoExpect);
        if (!late) for (u32 s = 0; s < slots; ++s) mbar_arrive_expect_tx(&bars[s], arm[s]);
        for (u32 k = 0; k < ops_per_cluster; ++k) {
            const McastOp& op = mine[k];
            if (op.issuer != me) continue;
            unsigned char* dst = base + op.slot * slot_bytes + box_offset;
            if (rank == 0) {
                bulk_load_multicast(dst, bulk_src + 16ull * static_cast<u32>(op.c[0]), static_cast<u32>(op.c[1]),
                                    &bars[op.slot], static_cast<u16>(op.mask));
            } else {
                tma_load_multicast(dst, &map, rank, op.c, &bars[op.slot], static_cast<u16>(op.mask));
            }
        }
        if (late) {
            spin_ns(20000);
            for (u32 s = 0; s < slots; ++s) {
                if (flags & kNoExpect) mbar_arrive(&bars[s]); else mbar_arrive_expect_tx(&bars[s], arm[s]);
            }
        }
        // Barrier state per slot: bit 0 the armed phase completed; bit 1 a bare arrive then completes the next
        // phase at once, i.e. no bytes beyond the armed ones landed on this barrier.
        u32* out_state = state + static_cast<size_t>(cta) * slots;
        for (u32 s = 0; s < slots; ++s) {
            u32 st = 0;
            if (mbar_wait_cluster(&bars[s], 0, status, s, cluster, 0)) {
                st = 1;
                mbar_arrive(&bars[s]);
                if (mbar_test_parity(&bars[s], 1)) st |= 2;
            }
            out_state[s] = st;
        }
    }
    __syncthreads();
    u32* out = images + static_cast<size_t>(cta) * words;
    for (u32 i = threadIdx.x; i < words; i += blockDim.x) out[i] = image[i];
    if (!(flags & (kNoTrailingSync | kExitEarly))) cluster_sync();  // nobody leaves while a peer may write into it
}

// Shared memory reused too early (the humming / Triton repro pattern): rank 0 multicasts `rounds` tiles one after
// the other into the same buffer of every CTA of the cluster; each CTA waits for a tile, then (ranks > 0 after a
// `consume_ns` delay: a slow consumer) copies it out. `safe`: every CTA releases the buffer to rank 0 with a remote
// arrive on rank 0's empty barrier, and rank 0 waits for all of them before the next round. Unsafe: rank 0 only waits
// for its own copy, so the next tile may land while a peer is still reading the previous one.
extern "C" __global__ void multicast_reuse(const __grid_constant__ CUtensorMap map,
                                           const int* coords,        // [rounds][2], dim 0 first
                                           u32 rounds, u32 tile_bytes, u32 consume_ns, u32 safe,
                                           u32* out,                 // [clusters * ctas][rounds][tile_bytes / 4]
                                           DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 full, empty;

    u32* tile = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    const u32 me = cluster_ctarank(), ctas = cluster_nctarank(), cluster = cluster_linear_id();
    const u32 cta = cluster * ctas + me;
    const u32 words = tile_bytes / 4;
    const u16 all = static_cast<u16>((1u << ctas) - 1);
    init_cluster_barriers({&full, 1, 1}, {&empty, 1, ctas});
    __shared__ bool ok;
    if (threadIdx.x == 0) ok = true;
    __syncthreads();

    for (u32 i = 0; i < rounds; ++i) {
        const u32 parity = i & 1;
        if (threadIdx.x == 0) {
            if (me == 0) {
                if (i > 0 && safe && !mbar_wait_cluster(&empty, parity ^ 1, status, 1, i, 1)) ok = false;
                mbar_arrive_expect_tx(&full, tile_bytes);
                if (ok) tma_load_multicast_2d(tile, &map, coords[2 * i], coords[2 * i + 1], &full, all);
            } else {
                mbar_arrive_expect_tx(&full, tile_bytes);
            }
            if (ok && !mbar_wait_cluster(&full, parity, status, 0, i, 0)) ok = false;
            if (me != 0) spin_ns(consume_ns);
        }
        __syncthreads();
        if (!ok) break;
        u32* dst = out + (static_cast<size_t>(cta) * rounds + i) * words;
        for (u32 w = threadIdx.x; w < words; w += blockDim.x) dst[w] = tile[w];
        __syncthreads();
        if (threadIdx.x == 0 && safe) mbar_remote_arrive(&empty, 0);
    }
    cluster_sync();
}
