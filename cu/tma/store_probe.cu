// Store and reduction probes: one tiled tensor store or reduction per CTA (rank 1..5 and the operation chosen at
// run time), and one 1D bulk store per CTA. Each CTA copies its source image from global memory into shared
// memory with ordinary stores, so the host decides every byte (random data, swizzled layouts) and
// drvtma/tma/stores/oracle.py predicts what lands in global memory.
//
// The sequence is the one stores need: every thread that wrote the source runs
// fence.proxy.async.shared::cta, then a CTA barrier, then one elected thread issues, commits the bulk group and
// waits with wait_group.read before anyone reuses the source. The probe then scribbles over the source on purpose:
// if wait_group.read returned early, the scribble would reach global memory and the host would see it.
// Stores complete through the issuing thread's bulk group, not an mbarrier, so there is no bounded-wait variant:
// a store either completes or faults the context.
#include <drvtma/image.cuh>  // tma.cuh, and write_image_digest

// One CTA's work; mirrored by drvtma/tma/stores/probe.py (STORE_JOB_DTYPE). Keep the layouts identical.
struct StoreJob {
    long long image_offset;  // bytes into `images` where this CTA's shared-memory image starts (16-byte aligned)
    u32 image_bytes;         // bytes of the image (a multiple of 16)
    u32 smem_offset;         // the source's shared address modulo 1024 (a multiple of 128 below 1024): swizzle phase
    int rank;                // 1..5
    int op;                  // -1 store; 0 add, 1 min, 2 max, 3 inc, 4 dec, 5 and, 6 or, 7 xor
    int coords[5];           // dim 0 (fastest) first
    int pad;
};

struct BulkStoreJob {
    long long src_offset;  // bytes into `src` (16-byte aligned)
    long long dst_offset;  // bytes into `dst` (16-byte aligned)
    u32 bytes;             // a multiple of 16
    u32 pad;
};

constexpr u32 kScribble = 0xDEADBEEFu;

// The maps live in global memory, written by the host: the tensormap proxy may still hold a map an earlier
// launch used at the same address, so acquire it before use (PTX ISA, fence.proxy.tensormap::generic).
__device__ __forceinline__ void acquire_tensormap(const CUtensorMap* map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"(map) : "memory");
}

__device__ __forceinline__ void copy_in(uint4* dst, const uint4* src, u32 bytes) {
    for (u32 i = threadIdx.x; i < bytes / 16; i += blockDim.x) dst[i] = src[i];
}

__device__ __forceinline__ void scribble(uint4* dst, u32 bytes) {
    for (u32 i = threadIdx.x; i < bytes / 16; i += blockDim.x) dst[i] = make_uint4(kScribble, kScribble, kScribble, kScribble);
}

extern "C" __global__ void store_probe(const CUtensorMap* __restrict__ maps, const StoreJob* __restrict__ jobs,
                                       const uint4* __restrict__ images, int num_jobs) {
    extern __shared__ __align__(128) unsigned char smem[];
    if (static_cast<int>(blockIdx.x) >= num_jobs) return;
    const StoreJob job = jobs[blockIdx.x];
    uint4* src = reinterpret_cast<uint4*>(align_smem_1024(smem) + job.smem_offset);  // the host knows the phase
    const bool issuer = is_issuer();
    copy_in(src, images + job.image_offset / 16, job.image_bytes);
    fence_proxy_async_shared();  // every writing thread, before the barrier: the copy engine reads through the async proxy
    __syncthreads();
    if (issuer) {
        const CUtensorMap* map = maps + blockIdx.x;
        acquire_tensormap(map);
        tma_store_or_reduce(job.op, map, src, job.rank, job.coords);
        bulk_commit();
        bulk_wait_read<0>();  // the source may be reused from here on
    }
    __syncthreads();
    scribble(src, job.image_bytes);
    if (issuer) bulk_wait<0>();  // global writes done before the CTA retires
}

extern "C" __global__ void bulk_store_probe(const BulkStoreJob* __restrict__ jobs, const uint4* __restrict__ src,
                                            unsigned char* __restrict__ dst, int num_jobs) {
    extern __shared__ __align__(128) unsigned char smem[];
    if (static_cast<int>(blockIdx.x) >= num_jobs) return;
    const BulkStoreJob job = jobs[blockIdx.x];
    uint4* buf = reinterpret_cast<uint4*>(smem);
    const bool issuer = is_issuer();
    copy_in(buf, src + job.src_offset / 16, job.bytes);
    fence_proxy_async_shared();
    __syncthreads();
    if (issuer) {
        bulk_store(dst + job.dst_offset, buf, job.bytes);
        bulk_commit();
        bulk_wait_read<0>();
    }
    __syncthreads();
    scribble(buf, job.bytes);
    if (issuer) bulk_wait<0>();
}

// One CTA digests one region [bounds[i], bounds[i + 1]) of a batch's buffer (byte offsets, multiples of 8) as the
// load probes digest an image (image.cuh, write_image_digest): a campaign compares the regions' digests with the
// oracle's (drvtma/tma/stores/probe.py, region_digests) and downloads the buffer only when one differs.
extern "C" __global__ void region_digests(const unsigned char* buf, const long long* bounds, u64* digests) {
    const long long lo = bounds[blockIdx.x], hi = bounds[blockIdx.x + 1];
    write_image_digest(reinterpret_cast<const u32*>(buf + lo), static_cast<u32>(hi - lo), digests);
}
