// Core round trips: a plain kernel, an argument echo (a tensor map by value plus scalars after it),
// and one 2D tensor-map box plus one 1D bulk copy through shared memory with a bounded wait.
#include <drvtma/tma.cuh>

extern "C" __global__ void scale_add(const float* __restrict__ in, float* __restrict__ out, int n, float scale,
                                     float offset) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = __fadd_rn(__fmul_rn(in[i], scale), offset);  // no FMA contraction: NumPy rounds twice
}

// Writes back every byte it was given, so the host can prove that nothing after the 128-byte map was shifted
// or truncated. out: 16 words of map, then a, b, c, d, e, f widened to 64 bits (raw bits for floats).
extern "C" __global__ void echo_args(const __grid_constant__ CUtensorMap map, int a, double b, signed char c,
                                     u64 d, float e, short f, u64* out) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    for (int i = 0; i < 16; ++i) out[i] = map.opaque[i];
    out[16] = static_cast<u64>(static_cast<long long>(a));
    out[17] = static_cast<u64>(__double_as_longlong(b));
    out[18] = static_cast<u64>(static_cast<long long>(c));
    out[19] = d;
    out[20] = static_cast<u64>(__float_as_uint(e));
    out[21] = static_cast<u64>(static_cast<long long>(f));
}

// Block b loads the box at (x0 = b * box_w, y0) of a 2D fp32 map and `bytes` from `src + b * bytes` with a 1D
// bulk copy, both onto one mbarrier, then writes both shared-memory images out. expect_tx is a parameter so the
// host can also break it on purpose (a timeout, never a hang).
extern "C" __global__ void tma_box_and_bulk(const __grid_constant__ CUtensorMap map, int box_w, int y0,
                                            const float* __restrict__ src, int bytes, u32 expect_tx,
                                            float* __restrict__ out_box, float* __restrict__ out_bulk,
                                            DrvtmaStatus* status) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ u64 bar;
    const int box_bytes = static_cast<int>(expect_tx) - bytes;  // expect_tx is meant to be box + bulk bytes
    float* box = reinterpret_cast<float*>(smem);
    float* bulk = reinterpret_cast<float*>(smem + 32768);
    init_block_barriers({&bar, 1, 1});
    if (is_issuer()) {
        mbar_arrive_expect_tx(&bar, expect_tx);
        tma_load_2d(box, &map, blockIdx.x * box_w, y0, &bar);
        bulk_load(bulk, reinterpret_cast<const unsigned char*>(src) + static_cast<size_t>(blockIdx.x) * bytes,
                  bytes, &bar);
    }
    if (!mbar_wait(&bar, 0, status, 0, 0, 1)) return;
    for (int i = threadIdx.x; i < box_bytes / 4; i += blockDim.x) out_box[blockIdx.x * (box_bytes / 4) + i] = box[i];
    for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x) out_bulk[blockIdx.x * (bytes / 4) + i] = bulk[i];
}
