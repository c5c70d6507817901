// Cluster identity and distributed shared memory: each CTA records where it sits (blockIdx, %cluster_ctaid, rank),
// writes a tagged word per thread into the next rank's shared memory with st.shared::cluster, releases it with a
// remote mbarrier arrive, reads what the previous rank wrote, then (after a cluster barrier) loads the buffer of the
// rank two before it with ld.shared::cluster. The host checks the rank formula and every word.
#include <drvtma/tma.cuh>
#include <drvtma/cluster.cuh>

constexpr u32 kWords = 256;

extern "C" __global__ void cluster_identity(u32* ids,       // [clusters * ctas][8]
                                            u32* received,  // [clusters * ctas][kWords]: written by rank - 1
                                            u32* loaded,    // [clusters * ctas][kWords]: ld from rank - 2's buffer
                                            DrvtmaStatus* status) {
    __shared__ u32 buf[kWords];
    __shared__ u64 bar;
    const u32 me = cluster_ctarank(), ctas = cluster_nctarank(), cluster = cluster_linear_id();
    const u32 cta = cluster * ctas + me;
    if (threadIdx.x == 0) {
        const uint3 at = cluster_ctaid();
        u32* id = ids + static_cast<size_t>(cta) * 8;
        id[0] = blockIdx.x; id[1] = blockIdx.y; id[2] = blockIdx.z;
        id[3] = at.x; id[4] = at.y; id[5] = at.z; id[6] = me; id[7] = ctas;
    }
    init_cluster_barriers({&bar, 1, 1});  // one arrival: the previous rank's release

    const u32 next = (me + 1) % ctas;
    for (u32 t = threadIdx.x; t < kWords; t += blockDim.x)
        dsmem_st_u32(mapa_shared(smem_u32(&buf[t]), next), (cluster << 20) | (me << 12) | t);
    __syncthreads();  // every thread's remote stores before thread 0's release (release is cumulative)
    if (threadIdx.x == 0) mbar_remote_arrive(&bar, next);
    __shared__ bool ok;
    if (threadIdx.x == 0) ok = mbar_wait_cluster(&bar, 0, status, 0, 0, 0);
    __syncthreads();
    if (ok) {
        for (u32 t = threadIdx.x; t < kWords; t += blockDim.x) received[static_cast<size_t>(cta) * kWords + t] = buf[t];
    }
    cluster_sync();
    const u32 prev = (me + ctas - 1) % ctas;  // its buffer holds what rank - 2 wrote
    for (u32 t = threadIdx.x; t < kWords; t += blockDim.x)
        loaded[static_cast<size_t>(cta) * kWords + t] = dsmem_ld_u32(mapa_shared(smem_u32(&buf[t]), prev));
    cluster_sync();  // rank + 1 is still reading this CTA's buffer
}

// A compile-time cluster shape: launches must give no cluster or this one (drvtma.runtime.cluster_launch).
extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_dims_2(u32* ranks) {
    if (threadIdx.x == 0) ranks[blockIdx.x] = cluster_ctarank() | (cluster_nctarank() << 8);
}
