// `drvtma bench descriptors`: the cost of a load through each kind of map. Every CTA issues `loads` loads of one
// box one after the other (each waits for the previous: latency, so the descriptor fetch shows), through
// variant 0: the by-value map (parameter space); 1: a global map (acquired once, .sys); 2: the same after
// prefetch.tensormap; 3: a map the CTA edits itself first (copy, replace the address, publish, acquire .gpu).
#include <drvtma/tma.cuh>
#include <drvtma/tensormap.cuh>

extern "C" __global__ void descriptor_bench(const __grid_constant__ CUtensorMap pmap, const CUtensorMap* gmap,
                                            CUtensorMap* slots, int variant, int loads, int rows, u32 tx_bytes,
                                            u32* sink, DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    __shared__ CUtensorMap smap;
    unsigned char* box = align_smem_1024(smem_raw);
    const CUtensorMap* map = &pmap;
    if (variant == 1 || variant == 2) {
        map = gmap;
        if (threadIdx.x == 0) {
            tensormap_acquire_sys(gmap);
            if (variant == 2) tensormap_prefetch(gmap);
        }
    } else if (variant == 3 && threadIdx.x < 32) {
        CUtensorMap* mine = slots + blockIdx.x;
        tensormap_copy_to_smem(&smap, gmap, threadIdx.x);
        __syncwarp();
        if (threadIdx.x == 0) tensormap_replace_global_address(&smap, gmap->opaque[0]);
        __syncwarp();
        tensormap_cp_fenceproxy_gpu(mine, &smap);
        if (threadIdx.x == 0) tensormap_acquire_gpu(mine);
    }
    if (variant == 3) map = slots + blockIdx.x;
    init_block_barriers({&bar, 1, 1});
    if (threadIdx.x == 0) {
        for (int i = 0; i < loads; ++i) {
            mbar_arrive_expect_tx(&bar, tx_bytes);
            tma_load_2d(box, map, 0, (blockIdx.x * 7 + i * 13) % rows, &bar);
            if (!mbar_wait(&bar, i & 1, status, 0, 0, i)) return;
        }
        sink[blockIdx.x] = reinterpret_cast<u32*>(box)[0];
    }
}
