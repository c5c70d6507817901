// drvtma device helper for the load probes: one box loaded into a poisoned shared-memory image that is then
// copied out whole, so the host can compare every byte (written or not) with drvtma/tma/tiled/oracle.py.
#pragma once
#include "tma.cuh"

// A box's coordinates from memory (5 ints, dim 0 first; a rank below 5 ignores the rest).
__device__ __forceinline__ void load_coords(const int* coords, int c[5]) {
    for (int k = 0; k < 5; ++k) c[k] = coords[k];
}

// Poison `image` (image_bytes, a multiple of 16), load one box of `map` into it at `box_offset` (thread 0 issues:
// `rank` and coords[5], dim 0 first; `tx` bytes expected) and copy the image to this block's slot of `images`
// ([gridDim.x][image_bytes / 4]). Every thread of the block calls it, with `bar` freshly initialised (one arrival).
// Returns the block's one answer: false when any thread's wait timed out (recorded in `status`, where = the block).
// `issue(dst)` starts the copy into `dst` (thread 0 only, after arming the barrier): any TMA load mode.
template <class Issue>
__device__ __forceinline__ bool load_one_image_by(Issue issue, u32 box_offset, u32 image_bytes, u32 tx, u32 poison,
                                                  u32* image, u32* images, u64* bar, DrvtmaStatus* status) {
    const u32 words = image_bytes / 4;
    for (u32 i = threadIdx.x; i < words; i += blockDim.x) image[i] = poison;
    // The poison is written by the generic proxy, the box by the async proxy: order them, or a late poison store
    // could land on top of loaded data (the CTA barrier completes the ordering).
    fence_proxy_async_shared();
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(bar, tx);
        issue(reinterpret_cast<unsigned char*>(image) + box_offset);
    }
    // a thread whose wait timed out copies a stale image and meets the others at the barrier, which is the vote:
    // the block returns false as one (mbarrier.cuh, uniform timeouts)
    const bool waited = mbar_wait(bar, 0, status, 0, 0, blockIdx.x);
    u32* out = images + static_cast<size_t>(blockIdx.x) * words;
    for (u32 i = threadIdx.x; i < words; i += blockDim.x) out[i] = image[i];
    return !__syncthreads_or(!waited);
}

// A tiled box at coords (5 ints, dim 0 first).
__device__ __forceinline__ bool load_one_image(const CUtensorMap* map, int rank, const int* coords, u32 box_offset,
                                               u32 image_bytes, u32 tx, u32 poison, u32* image, u32* images,
                                               u64* bar, DrvtmaStatus* status) {
    int c[5];
    load_coords(coords, c);
    return load_one_image_by([&](void* dst) { tma_load(dst, map, rank, c, bar); }, box_offset, image_bytes, tx,
                             poison, image, images, bar, status);
}

// The digest of an image, as drvtma.tma.tiled.oracle.image_digests computes it on the host: each 8-byte word w_i
// (little-endian, i from 0) mixed as fmix64(w_i ^ i * STEP) (MurmurHash3's finaliser, a bijection) and the mixed words
// summed mod 2^64. A change of one word always changes the sum; any other pattern of changes leaves it with a chance
// near 2^-64, and the word's index in the mix tells moved words apart. A campaign compares digests, and downloads the
// images only when they differ.
#define DRVTMA_DIGEST_STEP 0x9E3779B97F4A7C15ull
#define DRVTMA_DIGEST_MUL1 0xFF51AFD7ED558CCDull
#define DRVTMA_DIGEST_MUL2 0xC4CEB9FE1A85EC53ull

__device__ __forceinline__ u64 digest_mix(u64 x) {
    x ^= x >> 33;
    x *= DRVTMA_DIGEST_MUL1;
    x ^= x >> 33;
    x *= DRVTMA_DIGEST_MUL2;
    x ^= x >> 33;
    return x;
}

// This block's image (image_bytes, a multiple of 8; in shared or global memory) digested into digests[blockIdx.x].
// Every thread of the block calls it once the image is final (after load_one_image_by). The warps' sums meet by
// atomic adds in global memory, not in shared memory: a static shared array would take room the largest images need.
__device__ __forceinline__ void write_image_digest(const u32* image, u32 image_bytes, u64* digests) {
    u64* out = digests + blockIdx.x;
    if (threadIdx.x == 0) *out = 0;
    const u64* words = reinterpret_cast<const u64*>(image);
    u64 sum = 0;
    for (u32 i = threadIdx.x; i < image_bytes / 8; i += blockDim.x)
        sum += digest_mix(words[i] ^ (static_cast<u64>(i) * DRVTMA_DIGEST_STEP));
    for (int lane = 16; lane > 0; lane >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, lane);
    __syncthreads();  // the zero above lands before any warp's sum
    if ((threadIdx.x & 31) == 0) atomicAdd(out, sum);
}

// A probe's image and barrier: a 1024-byte aligned image in dynamic shared memory (so the swizzle phase of the
// destination is exactly `box_offset`, whatever the compiler puts before the dynamic region) and one barrier, freshly
// initialised for one arrival. Every probe kernel takes the image arguments as drvtma/tma/tiled/probe.py passes them:
// box_offset (bytes into the image, a multiple of 128), image_bytes (a multiple of 16), tx_bytes (what the oracle says
// one load delivers), poison (32-bit pattern for every byte not loaded), images ([gridDim.x][image_bytes / 4]), status;
// the tiled and im2col load probes also take digests ([gridDim.x], write_image_digest; null: none) before status.
struct ProbeImage {
    u32* image;
    u64* bar;
};

__device__ __forceinline__ ProbeImage probe_image() {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 bar;
    u32* image = reinterpret_cast<u32*>(align_smem_1024(smem_raw));
    init_block_barriers({&bar, 1, 1});
    return {image, &bar};
}
