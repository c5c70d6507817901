// wgmma probe: each CTA (one warpgroup) is one case. It fills its shared region with a background the host
// chose, TMA-loads the A and B boxes on top through drvtma tensor maps, runs `steps` wgmma.mma_async with the
// case's descriptors (start addresses relative to the region), and writes the raw accumulator fragments.
// Build with -DDRVTMA_WGMMA_<TYPE> -DWG_T=<type suffix> (bf16 when neither is given); one kernel per N in
// PROBE_NS (wgmma_probe_n<N>).
#ifndef WG_T
#define WG_T bf16
#define DRVTMA_WGMMA_BF16 1
#endif
#include <drvtma/tma.cuh>
#include <drvtma/wgmma.cuh>

#define WG_MAX_STEPS 8
#define WG_MAX_BOXES 4

// Host mirror: drvtma.wgmma.probe.CASE_DTYPE (tests/test_wgmma_cpu.py checks the layout).
struct WgCase {
    u64 desc_a[WG_MAX_STEPS];  // relative start; ignored when A comes from registers
    u64 desc_b[WG_MAX_STEPS];
    int a_coords[WG_MAX_BOXES][4];  // dim 0 first
    int b_coords[WG_MAX_BOXES][4];
    u32 a_dst[WG_MAX_BOXES];  // bytes into the region, multiples of 128
    u32 b_dst[WG_MAX_BOXES];
    u32 a_boxes, b_boxes, steps, flags, tx_bytes, a_rank, b_rank, pad;
};
#define WG_FLAG_RS 1u        // A from registers (a_regs)
#define WG_FLAG_SCALE_D 2u   // the first step accumulates into c_init (else it ignores it)
#define WG_FLAG_TRANS_A 4u   // imm-trans-a = 1 (f16/bf16, SS only)
#define WG_FLAG_TRANS_B 8u   // imm-trans-b = 1 (f16/bf16)

#define WG_CAT3_(a, b, c) a##b##c
#define WG_CAT3(a, b, c) WG_CAT3_(a, b, c)
#define WG_OP(form, n) WG_CAT3(wgmma_##form##_, WG_T, _n##n)

#ifdef DRVTMA_WGMMA_ACC_F32
typedef float acc_t;
#else
typedef int acc_t;
#endif

template <int ND> __device__ __forceinline__ void store_acc(u32* out, acc_t (&d)[ND]) {
    for (int i = 0; i < ND; ++i) out[i] = reinterpret_cast<u32&>(d[i]);
}

// One wgmma of the case: the form and transposes are warp-uniform run-time choices among immediates.
#if DRVTMA_WGMMA_TRANS
#define WG_STEP(n)                                                                                           \
    if (rs) {                                                                                                \
        if (tb) WG_OP(rs, n)<1>(d, a, db, sc); else WG_OP(rs, n)<0>(d, a, db, sc);                           \
    } else if (ta) {                                                                                         \
        if (tb) WG_OP(ss, n)<1, 1>(d, da, db, sc); else WG_OP(ss, n)<1, 0>(d, da, db, sc);                   \
    } else {                                                                                                 \
        if (tb) WG_OP(ss, n)<0, 1>(d, da, db, sc); else WG_OP(ss, n)<0, 0>(d, da, db, sc);                   \
    }
#else
#define WG_STEP(n)                                                                                           \
    if (rs) WG_OP(rs, n)(d, a, db, sc); else WG_OP(ss, n)(d, da, db, sc);
#endif

#define WG_KERNEL(n)                                                                                         \
extern "C" __global__ void __launch_bounds__(128) wgmma_probe_n##n(                                          \
        const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,                \
        const WgCase* cases, const u32* a_regs, const u32* c_init, const u32* background, u32 region_bytes,  \
        u32* out, u32* region_addr, DrvtmaStatus* status) {                                                  \
    extern __shared__ unsigned char smem_raw[];                                                              \
    __shared__ u64 bar;                                                                                      \
    constexpr int ND = n / 2;                                                                                \
    unsigned char* region = align_smem_1024(smem_raw);                                                       \
    const WgCase& cs = cases[blockIdx.x];                                                                    \
    const u32 t = threadIdx.x;                                                                               \
    u32* region_words = reinterpret_cast<u32*>(region);                                                      \
    for (u32 i = t; i < region_bytes / 4; i += blockDim.x) region_words[i] = background[i];                  \
    /* background by the generic proxy, boxes and wgmma reads by the async proxy: order them */              \
    fence_proxy_async_shared();                                                                              \
    init_block_barriers({&bar, 1, 1});                                                                       \
    if (is_issuer()) {                                                                                       \
        mbar_arrive_expect_tx(&bar, cs.tx_bytes);                                                            \
        for (u32 b = 0; b < cs.a_boxes; ++b) tma_load(region + cs.a_dst[b], &map_a, cs.a_rank, cs.a_coords[b], &bar); \
        for (u32 b = 0; b < cs.b_boxes; ++b) tma_load(region + cs.b_dst[b], &map_b, cs.b_rank, cs.b_coords[b], &bar); \
    }                                                                                                        \
    /* the block is the warpgroup: all of it goes on to the aligned wgmmas, or all of it leaves */         \
    if (!mbar_wait_cta(&bar, 0, status, 0, 0, blockIdx.x)) return;                                           \
    const u32 base = smem_u32(region);                                                                       \
    if (t == 0) region_addr[blockIdx.x] = base;                                                              \
    acc_t d[ND];                                                                                             \
    const u32* c_mine = c_init + (static_cast<size_t>(blockIdx.x) * 128 + t) * ND;                           \
    for (int i = 0; i < ND; ++i) reinterpret_cast<u32&>(d[i]) = c_mine[i];                                   \
    const bool rs = cs.flags & WG_FLAG_RS, ta = cs.flags & WG_FLAG_TRANS_A, tb = cs.flags & WG_FLAG_TRANS_B;  \
    for (int i = 0; i < ND; ++i) wgmma_fence_operand(d[i]);                                                  \
    for (u32 s = 0; s < cs.steps; ++s) {                                                                     \
        u32 a[4];                                                                                            \
        const u32* a_mine = a_regs + ((static_cast<size_t>(blockIdx.x) * WG_MAX_STEPS + s) * 128 + t) * 4;    \
        if (rs) for (int i = 0; i < 4; ++i) a[i] = a_mine[i];                                                \
        const u64 da = wgmma_desc_at(cs.desc_a[s], base), db = wgmma_desc_at(cs.desc_b[s], base);            \
        const u32 sc = (s > 0 || (cs.flags & WG_FLAG_SCALE_D)) ? 1u : 0u;                                    \
        /* this thread wrote a (and, before step 0, d): order those writes before the wgmma reads them */   \
        wgmma_fence();                                                                                       \
        WG_STEP(n)                                                                                           \
        /* the next step rewrites a: this wgmma must have read it first (a probe, not a pipeline) */         \
        wgmma_commit();                                                                                      \
        wgmma_wait<0>();                                                                                     \
    }                                                                                                        \
    for (int i = 0; i < ND; ++i) wgmma_fence_operand(d[i]);                                                  \
    store_acc(out + (static_cast<size_t>(blockIdx.x) * 128 + t) * ND, d);                                    \
}

WG_KERNEL(8)
WG_KERNEL(16)
WG_KERNEL(24)
WG_KERNEL(32)
WG_KERNEL(48)
WG_KERNEL(80)
WG_KERNEL(128)
WG_KERNEL(256)
