// Tensor maps outside the parameter bank: loads through a map in global memory (fenced or not, prefetched or not)
// or in __constant__ memory; maps edited on the device (tensormap.replace in shared memory, published with
// cp_fenceproxy, then loaded through); and the rewrite probe behind the pitfalls in docs/tensormap.md.
// Each CTA writes back its raw shared-memory image, so the host compares every byte with drvtma/tma/tiled/oracle.py.
#include <drvtma/image.cuh>
#include <drvtma/tensormap.cuh>

// Filled by the host (cuLibraryGetGlobal + cuMemcpyHtoD) before a const_map_load launch.
__constant__ CUtensorMap drvtma_const_map;

// Every CTA loads its own box (coords[blockIdx.x][5], dim 0 first) through one map in global memory.
// fence: kTmapFence* (acquire before first use, thread 0, then a CTA barrier); prefetch: prefetch.tensormap first.
extern "C" __global__ void global_map_load(const CUtensorMap* map, int fence, int prefetch, int rank,
                                           const int* coords, u32 box_offset, u32 image_bytes, u32 tx_bytes,
                                           u32 poison, u32* images, DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    u32* image = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    if (threadIdx.x == 0) {
        tensormap_acquire(map, fence);
        if (prefetch) tensormap_prefetch(map);
    }
    init_block_barriers({&bar, 1, 1});
    load_one_image(map, rank, coords + 5 * blockIdx.x, box_offset, image_bytes, tx_bytes, poison, image, images,
                   &bar, status);
}

// The same through the __constant__ map (which no fence can acquire).
extern "C" __global__ void const_map_load(int prefetch, int rank, const int* coords, u32 box_offset,
                                          u32 image_bytes, u32 tx_bytes, u32 poison, u32* images,
                                          DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    u32* image = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    if (threadIdx.x == 0 && prefetch) tensormap_prefetch(&drvtma_const_map);
    init_block_barriers({&bar, 1, 1});
    load_one_image(&drvtma_const_map, rank, coords + 5 * blockIdx.x, box_offset, image_bytes, tx_bytes, poison,
                   image, images, &bar, status);
}

// One device edit job per CTA (drvtma/tma/maps/global_maps.py ReplaceJob.to_words, kJobWords ints):
// [0] edits, [1] rank to load with, [2] tx bytes, [3] load (0: only edit and publish), [4] start from zeros
// instead of the template, [5..9] coordinates (dim 0 first), [10..15] unused, [16..] edits (TmapEdit, 4 ints each).
constexpr int kJobWords = 48;
constexpr int kMaxEdits = 8;

// Edit a copy of `tmpl` in shared memory (one thread), publish it to out_maps[blockIdx.x] (warp 0, cp_fenceproxy
// .release.gpu), acquire it (`fence`), then load one box through it. edit_ok[blockIdx.x] gets a bit per edit PTX
// could encode. The host reads the published bytes back and decodes them.
extern "C" __global__ void replace_load(const CUtensorMap* tmpl, const int* jobs, CUtensorMap* out_maps, int fence,
                                        u32 box_offset, u32 image_bytes, u32 poison, u32* images, u32* edit_ok,
                                        DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    __shared__ CUtensorMap smap;  // CUtensorMap is alignas(128), as tensormap.replace wants
    u32* image = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    const int* job = jobs + kJobWords * blockIdx.x;
    CUtensorMap* mine = out_maps + blockIdx.x;
    if (threadIdx.x < 32) {
        tensormap_copy_to_smem(&smap, job[4] ? nullptr : tmpl, threadIdx.x);
        __syncwarp();
        if (threadIdx.x == 0) {
            u32 ok = 0;
            const int n = min(job[0], kMaxEdits);
            const TmapEdit* edits = reinterpret_cast<const TmapEdit*>(job + 16);
            for (int i = 0; i < n; ++i) ok |= static_cast<u32>(tensormap_apply_edit(&smap, edits[i])) << i;
            edit_ok[blockIdx.x] = ok;
        }
        __syncwarp();
        tensormap_cp_fenceproxy_gpu(mine, &smap);
        if (threadIdx.x == 0) tensormap_acquire(mine, fence);
    }
    init_block_barriers({&bar, 1, 1});
    if (!job[3]) return;
    load_one_image(mine, job[1], job + 5, box_offset, image_bytes, static_cast<u32>(job[2]), poison, image, images,
                   &bar, status);
}

// The rewrite pitfalls. slots[blockIdx.x] holds map A (written by the host); map_b has the same geometry over
// another tensor. Load 1 goes through the slot; the slot is then rewritten with map B (cp_fenceproxy) either after
// load 1 completed or while it may still be in flight (mode & 1); load 2 goes through the slot, after an acquire
// (mode & 2) or not. Mode & 4: acquire .sys before load 1 (the host wrote the slot).
// counts[blockIdx.x][load][0..2]: words of each image whose high half is 0xAAAA (tensor A), 0xBBBB (B), other.
extern "C" __global__ void rewrite_probe(CUtensorMap* slots, const CUtensorMap* map_b, int mode, int rank,
                                         const int* coords, u32 image_bytes, u32 tx_bytes, u32* counts,
                                         DrvtmaStatus* status) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bars[2];
    __shared__ CUtensorMap smap;
    __shared__ u32 tally[2][3];
    u32* images[2] = {reinterpret_cast<u32*>(align_smem_1024(smem_raw)), nullptr};
    images[1] = images[0] + image_bytes / 4;
    CUtensorMap* slot = slots + blockIdx.x;
    const u32 words = image_bytes / 4;
    for (u32 i = threadIdx.x; i < 2 * words; i += blockDim.x) images[0][i] = 0u;
    if (threadIdx.x < 6) tally[threadIdx.x / 3][threadIdx.x % 3] = 0;
    fence_proxy_async_shared();
    if (threadIdx.x == 0 && (mode & 4)) tensormap_acquire_sys(slot);
    init_block_barriers({bars, 2, 1});
    int c[5];
    load_coords(coords, c);
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(&bars[0], tx_bytes);
        tma_load(images[0], slot, rank, c, &bars[0]);
    }
    const bool in_flight = mode & 1;
    // warp 0 meets at aligned tensormap copies, the block at barriers below: every timeout decision is the block's
    if (!in_flight && !mbar_wait_cta(&bars[0], 0, status, 0, 0, 1)) return;
    if (threadIdx.x < 32) {  // rewrite the slot with map B
        tensormap_copy_to_smem(&smap, map_b, threadIdx.x);
        __syncwarp();
        tensormap_cp_fenceproxy_gpu(slot, &smap);
        if (threadIdx.x == 0 && (mode & 2)) tensormap_acquire_gpu(slot);
    }
    if (in_flight && !mbar_wait_cta(&bars[0], 0, status, 0, 0, 1)) return;
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(&bars[1], tx_bytes);
        tma_load(images[1], slot, rank, c, &bars[1]);
    }
    if (!mbar_wait_cta(&bars[1], 0, status, 1, 0, 2)) return;
    for (int k = 0; k < 2; ++k) {
        u32 n[3] = {0, 0, 0};
        for (u32 i = threadIdx.x; i < words; i += blockDim.x) {
            const u32 high = images[k][i] >> 16;
            ++n[high == 0xAAAAu ? 0 : high == 0xBBBBu ? 1 : 2];
        }
        for (int j = 0; j < 3; ++j) atomicAdd(&tally[k][j], n[j]);
    }
    __syncthreads();
    if (threadIdx.x < 6) counts[6 * blockIdx.x + threadIdx.x] = tally[threadIdx.x / 3][threadIdx.x % 3];
}
