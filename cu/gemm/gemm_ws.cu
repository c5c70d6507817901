// drvtma GEMM: C[M, N] = alpha * A[M, K] . B[N, K]^T, both operands K-major (row-major with K contiguous).
// Warp-specialized and persistent: warpgroup 0 is the producer (one elected thread issues every TMA load into a
// ring of GEMM_STAGES shared-memory stages), warpgroups 1..GEMM_CONSUMERS each own GEMM_BM / GEMM_CONSUMERS rows
// of the tile and run wgmma.mma_async on the stages through descriptors the host built with
// drvtma.wgmma.descriptor_for (GEMM_DESC_A / GEMM_DESC_B: never written by hand here). Full barriers complete on
// the TMA bytes, empty barriers on one arrival per consumer warp; every wait is bounded (mbar_wait -> status), and
// a consumer warpgroup decides as one whether to go on: its wgmmas are warpgroup-aligned, so no thread leaves the
// k-loop early (a timeout raises the CTA's stop word, mbar_wait_or_stop) and the warpgroup votes after it.
// The epilogue scales by alpha, converts to the output type and stores through TMA from 128B-swizzled staging
// buffers (two per consumer warpgroup, 64 rows x 128 B each), so ragged M / N are clipped by the store and
// ragged K is zero-filled by the loads.
//
// GEMM_CLUSTER_M = 2: CTA pairs (a 2x1x1 cluster) compute tiles (2p, n) and (2p + 1, n), which need the same B
// tile. Each CTA loads its own A and half of B, multicast into both CTAs at the same offset, so B crosses L2 once
// per pair. A stage goes back to a producer only when the consumers of both CTAs are done with it (each consumer
// warp arrives on the empty barrier of every CTA of the pair), and every CTA's full barrier counts the bytes both
// halves land in it (the same GEMM_TX_BYTES as without the cluster). GEMM_CLUSTER_N = 2: the same with pairs
// along N, tiles (m, 2p) and (m, 2p + 1), sharing A (cuBLAS's plan for skinny C^T: the large operand crosses L2
// once per pair while twice as many SMs stream it).
//
// GEMM_PINGPONG = 1: the two consumer warpgroups take the CTA's tiles in turn, each a whole tile (BM rows), so one
// runs its epilogue while the other's main loop keeps the tensor cores busy. A warpgroup passes the stages of the
// other's tiles by on the ring, so it could wait on a stage two phases ahead of it, which a parity wait cannot tell
// from the phase before: it starts a tile only when the other has passed every full wait of the tile before (a
// turn barrier each, one arrival per tile, waited with the same bounded group wait as the stages).
// GEMM_SWAP_AB = 1 (16-bit C): the host passes B as A and A as B (C^T = B . A^T, for a small M that becomes wgmma's
// N); the epilogue writes the transposed tile, so C keeps its row-major layout.
// GEMM_PREFETCH_MAPS = 1: the producer prefetches the three tensor maps before its first load (the first copy
// through a map otherwise waits for the descriptor's fetch: a share of a skinny GEMM's few microseconds).
//
// GEMM_EVICT_A / GEMM_EVICT_B: the L2 eviction priority of each operand's loads (.L2::cache_hint): a skinny
// GEMM's large operand, read once, marked evict_first takes the place of its own spent lines in the L2, not of
// lines other work left there (dirty ones cost a write to memory besides).
//
// GEMM_STREAMK = 1: the last, partial wave of tiles is split into runs of k-blocks over all CTAs (StreamK below).
// GEMM_PROFILE = 1: per-CTA cycle counters (Stopwatch below; drvtma.gemm.profile reads them).
//
// Every parameter is a -D define that drvtma.gemm.config.GemmConfig.defines() computes (one per claim of the
// seed: stages, consumers, swizzle via the descriptors and panels, setmaxnreg, tile order, wgmma in flight,
// cluster multicast, stream-K).
#include <drvtma/cluster.cuh>
#include <drvtma/tma.cuh>
#include <drvtma/wgmma.cuh>

#if !defined(GEMM_BM) || !defined(GEMM_DESC_A) || !defined(GEMM_DESC_B) || !defined(GEMM_T)
#error "build through drvtma.gemm (GemmConfig.defines()): the tile, descriptors and types are compile-time defines"
#endif

constexpr int BM = GEMM_BM, BN = GEMM_BN, BK = GEMM_BK;
constexpr int STAGES = GEMM_STAGES, CONSUMERS = GEMM_CONSUMERS;
constexpr int THREADS = 128 * (1 + CONSUMERS);
#ifndef GEMM_PINGPONG
#define GEMM_PINGPONG 0
#endif
#ifndef GEMM_SWAP_AB
#define GEMM_SWAP_AB 0
#endif
#ifndef GEMM_PREFETCH_MAPS
#define GEMM_PREFETCH_MAPS 0
#endif
#ifndef GEMM_EVICT_A  // L2 priority of the kernel's A and B loads: kEvictNormal, kEvictFirst or kEvictLast (copy.cuh)
#define GEMM_EVICT_A 0
#endif
#ifndef GEMM_EVICT_B
#define GEMM_EVICT_B 0
#endif
constexpr int TILE_WGS = GEMM_PINGPONG ? 1 : CONSUMERS;  // consumer warpgroups that share one tile
constexpr int WG_ROWS = BM / TILE_WGS;    // rows of the tile one consumer warpgroup owns
constexpr int M_ATOMS = WG_ROWS / 64;     // m64 wgmmas per k-step per warpgroup
constexpr int ND = BN / 2;                // accumulator registers per m64 atom
constexpr int PANELS = GEMM_PANELS;       // TMA boxes per operand per stage (one per swizzle span of K)
constexpr int PANEL_ELEMS = GEMM_PANEL_ELEMS;
constexpr u32 A_BOX_BYTES = GEMM_A_BOX_BYTES, B_BOX_BYTES = GEMM_B_BOX_BYTES;
constexpr u32 A_BYTES = A_BOX_BYTES * PANELS, STAGE_BYTES = A_BYTES + B_BOX_BYTES * PANELS;
constexpr int STEPS = GEMM_STEPS;         // wgmma k-steps (32 B of K each) per stage
constexpr u32 OUT_BYTES = GEMM_OUT_BYTES;
constexpr int EPI_COLS = 128 / OUT_BYTES; // one 128-byte swizzle row of C per staging row
constexpr u32 EPI_BUF_BYTES = 64 * 128;
static_assert(WG_ROWS % 64 == 0 && M_ATOMS >= 1, "each consumer warpgroup owns whole m64 atoms");
static_assert(STAGE_BYTES % 1024 == 0 && A_BYTES % 1024 == 0, "stages keep the 1024-B swizzle phase");
// swapped: a staging buffer holds EPI_ROWS rows of C (columns of the kernel's tile) x 64 columns of C (128 B)
constexpr int EPI_ROWS = BN < 64 ? BN : 64;
static_assert(GEMM_SWAP_AB ? (OUT_BYTES == 2 && BN % EPI_ROWS == 0) : BN % EPI_COLS == 0,
              "the epilogue stores whole 128-byte panels");
constexpr int EPI_W = GEMM_SWAP_AB ? EPI_ROWS : EPI_COLS;  // columns of the tile one staging buffer takes
constexpr int EPI_PANELS = M_ATOMS * (BN / EPI_W);          // staging panels of one warpgroup's tile
#ifdef GEMM_EPI_PANELS  // the host's count (GemmConfig.epilogue_panels): its staging buffers and rules use it
static_assert(GEMM_EPI_PANELS == EPI_PANELS, "GemmConfig.epilogue_panels and the kernel count the same panels");
#endif
#ifndef GEMM_EPI_BUFS
#define GEMM_EPI_BUFS 2
#endif
constexpr int EPI_BUFS = GEMM_EPI_BUFS;  // staging buffers per consumer warpgroup
static_assert(EPI_BUFS >= 2, "a panel is written while the store of the one before reads its buffer");
// A buffer for every panel of the tile: one barrier pair and one bulk group per tile, and the stores drain while the
// warpgroup runs its next main loop (with fewer, two barriers per panel and a wait for the store EPI_BUFS back).
constexpr bool EPI_WHOLE_TILE = EPI_BUFS >= EPI_PANELS;

#ifndef GEMM_CLUSTER_M
#define GEMM_CLUSTER_M 1
#endif
#ifndef GEMM_CLUSTER_N
#define GEMM_CLUSTER_N 1
#endif
#define GEMM_CLUSTERED (GEMM_CLUSTER_M * GEMM_CLUSTER_N > 1)
constexpr int CLUSTER = GEMM_CLUSTER_M * GEMM_CLUSTER_N;  // CTAs sharing one operand tile: B along M, A along N
constexpr bool SHARE_A = GEMM_CLUSTER_N > 1;
constexpr u32 PART_BYTES = (SHARE_A ? A_BOX_BYTES : B_BOX_BYTES) / CLUSTER;  // the slice of each shared panel
constexpr int PART_ROWS = (SHARE_A ? BM : BN) / CLUSTER;                     // one CTA of the pair loads
constexpr int GROUP = GEMM_GROUP_M / GEMM_CLUSTER_M > 0 ? GEMM_GROUP_M / GEMM_CLUSTER_M : 1;  // in cluster rows
static_assert(CLUSTER == 1 || CLUSTER == 2, "pairs along M or along N, or no cluster");
static_assert(PART_ROWS % 8 == 0, "each multicast slice starts on a swizzle-pattern boundary (8 rows)");

// Barrier ids and call sites in DrvtmaStatus (drvtma.gemm.launch names them).
constexpr u32 kBarFull = 0, kBarEmpty = 1, kBarTurn = 4;
constexpr u32 kSiteConsumer = 1, kSiteProducer = 2, kSiteTurn = 4;

#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)
#define GEMM_OP GEMM_CAT(GEMM_CAT(GEMM_CAT(wgmma_ss_, GEMM_T), _n), GEMM_BN)
#if DRVTMA_WGMMA_TRANS
#define GEMM_MMA(d, da, db, sc) GEMM_OP<0, 0>(d, da, db, sc)  // both K-major: no transpose
#else
#define GEMM_MMA(d, da, db, sc) GEMM_OP(d, da, db, sc)
#endif

// ---- the mma.sync baseline (GEMM_MMA_SYNC=1, the async tensor-core article's "traditional mma" claim): the same producer, ring and
// epilogue; each consumer warp computes 64 rows x BN/4 columns from ldmatrix fragments with m16n8k16 (16-bit) or
// m16n8k32 (fp8) mma.sync. Its accumulators sit in the same per-thread order as wgmma's (see acc_col_block).
#ifndef GEMM_MMA_SYNC
#define GEMM_MMA_SYNC 0
#endif
constexpr int WARP_N = BN / 4;            // mma.sync: columns of one consumer warp
constexpr int NB = WARP_N / 8;            // its n8 blocks
static_assert(!GEMM_MMA_SYNC || (M_ATOMS == 1 && NB % 2 == 0), "mma.sync: 64 rows x BN/4 columns per warp");
constexpr u32 SPAN = GEMM_PANEL_ELEMS * GEMM_IN_BYTES;  // bytes of K one box row holds (16 without swizzle)
constexpr u32 SWIZZLE_MASK = SPAN == 128 ? 7 : SPAN == 64 ? 3 : SPAN == 32 ? 1 : 0;

// The shared address of byte `kbyte` of row `row` of an operand tile (panels of `box_bytes`, rows SPAN apart),
// after the swizzle TMA wrote it with (chunk bits 4..6 ^= address bits 7..9, on the 1024-aligned stage).
__device__ __forceinline__ u32 tile_byte(u32 tile, u32 box_bytes, int row, u32 kbyte) {
    const u32 a = tile + (kbyte / SPAN) * box_bytes + row * SPAN + kbyte % SPAN;
    return a ^ (((a >> 7) & SWIZZLE_MASK) << 4);
}
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
#if GEMM_IN == 0
#define GEMM_MMA_SYNC_PTX "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#elif GEMM_IN == 1
#define GEMM_MMA_SYNC_PTX "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#elif GEMM_IN == 2
#define GEMM_MMA_SYNC_PTX "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
#else
#define GEMM_MMA_SYNC_PTX "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"
#endif
// One m16n8 x (32 bytes of K) product: a = 4 registers (rows g, g + 8; K bytes 0-15 and 16-31), b = 2 (n = g).
__device__ __forceinline__ void mma_sync(float* d, const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile(GEMM_MMA_SYNC_PTX " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Where accumulator pair (i, i + 1) of a consumer thread sits in its warpgroup's 64-row slice: row
// 16 * (w or atom) + g + 8 * ((i >> 1) & 1), columns acc_col_block(i, w) + 2c + {0, 1}. wgmma: warp w owns rows
// 16w.., value i is in column block 8 (i >> 2). mma.sync: value i = 4 (mi NB + j) + r is m16 atom mi, n8 block j
// of warp w's columns.
__device__ __forceinline__ int acc_row(int i, int w, int g) {
    return (GEMM_MMA_SYNC ? 16 * ((i >> 2) / NB) : 16 * w) + g + 8 * ((i >> 1) & 1);
}
__device__ __forceinline__ int acc_col_block(int i, int w) {
    return GEMM_MMA_SYNC ? w * WARP_N + 8 * ((i >> 2) % NB) : 8 * (i >> 2);
}

// A CTA barrier among the 128 threads of one consumer warpgroup (ids 1.., 0 is __syncthreads); its vote after
// each k-loop (and ping-pong's turn waits, mbar_wait_group) use the same id.
__device__ __forceinline__ void warpgroup_bar(u32 id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

// Tile index -> (tile row, tile column): GROUP tile rows are walked column by column, so the CTAs running at the
// same time share A rows and B columns in L2 (1 = row-major order). With a cluster the walk is over cluster tiles
// (walk_coords: the CTA of rank r takes tile row or column 2c + r of cluster row or column c).
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_group = GROUP * tiles_n;
    const int group = tile / per_group;
    const int first_m = group * GROUP;
    const int rows = min(tiles_m - first_m, GROUP);
    const int in_group = tile - group * per_group;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
}

// The walk of one CTA over rows x cols cluster tiles: its cluster's index, then every (clusters)-th one.
// Read from the special registers where used (fewer live registers: the mma.sync consumers have none to spare).
__device__ __forceinline__ int first_tile() { return blockIdx.x / CLUSTER; }
__device__ __forceinline__ int tile_step() { return gridDim.x / CLUSTER; }
__device__ __forceinline__ u32 pair_rank() {
#if GEMM_CLUSTERED
    return cluster_ctarank();
#else
    return 0;
#endif
}
// A cluster tile -> this CTA's tile (pairs along M: tile rows 2r, 2r + 1; along N: tile columns). A tile past M
// or N (the odd one out) still loads its part of the shared operand for the peer.
__device__ __forceinline__ void walk_coords(int tile, int rows, int cols, int& tm, int& tn) {
    tile_coords(tile, rows, cols, tm, tn);
    tm = tm * GEMM_CLUSTER_M + (SHARE_A ? 0 : pair_rank());
    tn = tn * GEMM_CLUSTER_N + (SHARE_A ? pair_rank() : 0);
}

// ---- the work of one CTA (GEMM_STREAMK=0: whole tiles, its cluster's index and every (clusters)-th one after).
// GEMM_STREAMK=1 (persistent, no cluster): the tiles that fill whole waves go out whole; the rest (the last,
// partial wave, which would leave SMs idle) are cut into k-blocks and every CTA takes an equal run of them. A
// tile's run may span CTAs: the one that holds its first k-block (the head) owns it and adds the fp32 partial
// sums of the others, which each CTA writes for the first run of its range (the only one that can start inside
// a tile) into its own workspace slot, then raises its flag to this launch's epoch. An owner waits only on
// higher CTAs' first runs, which wait on nothing, so no CTA order or residency can deadlock it.
#ifndef GEMM_STREAMK
#define GEMM_STREAMK 0
#endif
static_assert(!GEMM_STREAMK || CLUSTER == 1, "stream-K runs without clusters");
struct StreamK {
    int tiles, kblocks, whole;  // whole: tiles handed out whole (wave-filling); the rest are split
    long long units;            // k-blocks of the split tiles
    __device__ __forceinline__ StreamK(int tiles_, int kblocks_) : tiles(tiles_), kblocks(kblocks_) {
        const int g = tile_step();
        whole = (GEMM_STREAMK && tiles % g != 0) ? tiles / g * g : tiles;
        units = (long long)(tiles - whole) * kblocks;
    }
    __device__ __forceinline__ long long begin(int cta) const { return units * cta / tile_step(); }
    // the CTA whose run holds split unit u: the largest c with begin(c) <= u
    __device__ __forceinline__ int cta_of(long long u) const { return (int)(((u + 1) * tile_step() - 1) / units); }
    // with fewer units than CTAs some ranges are empty: those CTAs hold no part of any tile
    __device__ __forceinline__ bool holds_units(int cta) const { return begin(cta + 1) > begin(cta); }
};

// Calls f(tile, kb0, kb1) for each run of k-blocks [kb0, kb1) of one tile this CTA computes, in order; stops
// when f returns false (a wait timed out).
template <typename F>
__device__ __forceinline__ void for_each_run(const StreamK& sk, F&& f) {
    for (int tile = first_tile(); tile < sk.whole; tile += tile_step())
        if (!f(tile, 0, sk.kblocks)) return;
#if GEMM_STREAMK
    const long long end = sk.begin(blockIdx.x + 1);
    for (long long u = sk.begin(blockIdx.x); u < end;) {
        const int tile = sk.whole + (int)(u / sk.kblocks), kb0 = (int)(u % sk.kblocks);
        const int kb1 = (int)min((long long)sk.kblocks, kb0 + (end - u));
        if (!f(tile, kb0, kb1)) return;
        u += kb1 - kb0;
    }
#endif
}

// GEMM_PROFILE=1 (drvtma.gemm.profile): SM cycles spent where the pipeline can stall, per CTA, in `profile`
// [CTA][PROFILE_SLOTS]: the producer's waits for an empty stage (the ring is full: the consumers bound the rate),
// the first consumer warpgroup's waits for a full stage (the loads bound it), its epilogues, its whole run, and
// the %globaltimer interval of that run (cycles / ns = the SM clock the run ran at). Off: all of it compiles away.
#ifndef GEMM_PROFILE
#define GEMM_PROFILE 0
#endif
enum ProfileSlot : int { kEmptyWait, kFullWait, kEpilogue, kConsumerCycles, kTiles, kSmId, kStartNs, kEndNs,
                         PROFILE_SLOTS };
struct Stopwatch {
#if GEMM_PROFILE
    u64 sum = 0, t = 0;
    __device__ __forceinline__ void start() { t = clock64(); }
    __device__ __forceinline__ void stop() { sum += clock64() - t; }
#else
    __device__ __forceinline__ void start() {}
    __device__ __forceinline__ void stop() {}
#endif
};
__device__ __forceinline__ void profile_put(u64* profile, int slot, u64 value) {
#if GEMM_PROFILE
    profile[blockIdx.x * PROFILE_SLOTS + slot] = value;
#endif
}

// Two outputs in a 16-bit output type, `lo` in the low half (the lower column).
__device__ __forceinline__ u32 pack_pair(float lo, float hi) {
    u32 packed;
#if GEMM_OUT == 0
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
#endif
    return packed;
}
// Two outputs (columns c, c + 1 of one row) in the output type: 4 bytes for 16-bit outputs, 8 for fp32.
__device__ __forceinline__ void store_pair(unsigned char* at, float lo, float hi) {
#if GEMM_OUT == 2
    *reinterpret_cast<float2*>(at) = make_float2(lo, hi);
#else
    *reinterpret_cast<u32*>(at) = pack_pair(lo, hi);
#endif
}

// The byte of a 128B-swizzled staging buffer (rows of 128 B) that holds byte `byte` of row `row`.
__device__ __forceinline__ u32 staged_at(int row, u32 byte) {
    return row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15));
}
// One output in the output type (the swapped epilogue's transposed writes; 16-bit outputs only).
__device__ __forceinline__ void store_one(unsigned char* at, float v) {
    unsigned short h;
#if GEMM_OUT == 0
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
#endif
    *reinterpret_cast<unsigned short*>(at) = h;
}

// GEMM_STMATRIX = 1 (16-bit C): the epilogue writes four 8x8 matrices of C per instruction (stmatrix .x4) instead of
// one pair (swapped: one value) per store. Lane l gives the address of row l % 8 of matrix l / 8; register j of
// thread t holds row t / 4, columns 2 (t % 4), +1 of matrix j: the m16n8 accumulator fragment, so the registers are
// the pairs as they are. .trans stores each matrix transposed (the swapped epilogue's C rows are tile columns).
#ifndef GEMM_STMATRIX
#define GEMM_STMATRIX 0
#endif
static_assert(!GEMM_STMATRIX || (OUT_BYTES == 2 && ND % 8 == 0), "stmatrix stores 16-bit C, 16 columns at a time");
__device__ __forceinline__ void stmatrix_x4(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3) {
#if GEMM_SWAP_AB
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
                 ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
#else
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
#endif
}

// One staged panel of C out through TMA: rows row0.. of the tile at its columns col0.. (swapped: the tile's rows
// are C's columns).
__device__ __forceinline__ void tma_store_panel(const CUtensorMap* map_c, unsigned char* buf, int row0, int col0) {
#if GEMM_SWAP_AB
    tma_store_2d(map_c, buf, row0, col0);
#else
    tma_store_2d(map_c, buf, col0, row0);
#endif
}

// The staging panels of a warpgroup's tile (tile tm, tn; the warpgroup's rows from `slot`) that lie inside C:
// panel(a, p, row0, col0) for atom a's panel p, atom by atom (unrolled: a and p are compile-time). Rows past M are
// not stored at all; the bounds are warpgroup-uniform. (A template, not a generic lambda: NVRTC 13.0 takes a generic
// lambda in device code for a host function.)
template <typename F>
__device__ __forceinline__ void for_each_panel(int tm, int tn, int slot, int M, int N, F&& panel) {
#pragma unroll
    for (int a = 0; a < M_ATOMS; ++a) {
        const int row0 = tm * BM + slot * WG_ROWS + a * 64;
        if (row0 >= M) break;
#pragma unroll
        for (int p = 0; p < BN / EPI_W; ++p) {
            if (tn * BN + p * EPI_W >= N) break;
            panel(a, p, row0, tn * BN + p * EPI_W);
        }
    }
}

// ---- GEMM_CONV = 1: an implicit-GEMM forward convolution, NHWC activations [N, H, W, C] through an im2col map (A),
// the filter [K, R, S, C] as a plain [K, R*S*C] operand (B), the output [N*P*Q, K] (C). Row m of A is output pixel
// (n, p, q); k-block kb is filter tap (r, s) = divmod(kb / CONV_C_BLOCKS, S) and channels c0 .. c0 + BK of it. One
// im2col load of BM pixels from the tile's first output pixel walks the following ones in (n, p, q) order (the map's
// bounding box and traversal strides are the convolution's), so it writes the bytes a tiled load of the explicit
// im2col matrix would (drvtma.gemm.conv proves it on the CPU with the oracles): the consumers do not change.
#ifndef GEMM_CONV
#define GEMM_CONV 0
#endif
#if GEMM_CONV
__device__ __forceinline__ void conv_load_a(unsigned char* stage, const CUtensorMap* map_a, int tm, int kb, u64* bar) {
    const int m0 = tm * BM, img = m0 / (CONV_P * CONV_Q), pq = m0 % (CONV_P * CONV_Q);
    const int tap = kb / CONV_C_BLOCKS, c0 = (kb % CONV_C_BLOCKS) * BK;
    const int r = tap / CONV_S, s = tap % CONV_S;
    const int h = (pq / CONV_Q) * CONV_STRIDE - CONV_PAD, w = (pq % CONV_Q) * CONV_STRIDE - CONV_PAD;
#pragma unroll
    for (int p = 0; p < PANELS; ++p)
        tma_load_im2col_4d(stage + p * A_BOX_BYTES, map_a, c0 + p * PANEL_ELEMS, w, h, img, (u16)(s * CONV_DIL),
                           (u16)(r * CONV_DIL), bar);
}
#endif

// One box of an operand panel into a stage: the whole box, or, for the operand a pair shares, this CTA's slice of
// its rows multicast into both CTAs at the same offset. EVICT: the L2 priority of the lines it brings in
// (GEMM_EVICT_A / _B; kEvictNormal is the plain load, without a policy operand).
template <int EVICT>
__device__ __forceinline__ void load_panel(unsigned char* dst, const CUtensorMap* map, int k, int row0, bool shared,
                                           u64* bar) {
#if GEMM_CLUSTERED
    if (shared) {
        dst += pair_rank() * PART_BYTES;
        row0 += pair_rank() * PART_ROWS;
        const u16 both = (u16)((1u << CLUSTER) - 1);
        if constexpr (EVICT == kEvictNormal) tma_load_multicast_2d(dst, map, k, row0, bar, both);
        else tma_load_multicast_2d_hint(dst, map, k, row0, bar, both, l2_evict_policy<EVICT>());
        return;
    }
#endif
    if constexpr (EVICT == kEvictNormal) tma_load_2d(dst, map, k, row0, bar);
    else tma_load_2d_hint(dst, map, k, row0, bar, l2_evict_policy<EVICT>());
}

__device__ __forceinline__ void produce(unsigned char* ring, u64* full, u64* empty, const CUtensorMap* map_a,
                                        const CUtensorMap* map_b, int rows, int cols, int K, volatile u32* stop,
                                        DrvtmaStatus* status, u64* profile) {
    RingCursor rc;
    Stopwatch empty_wait;
    for_each_run(StreamK(rows * cols, (K + BK - 1) / BK), [&](int tile, int kb0, int kb1) {
        int tm, tn;
        walk_coords(tile, rows, cols, tm, tn);
        for (int kb = kb0; kb < kb1; ++kb) {
            // parity phase ^ 1: a fresh barrier counts as released, so the first pass over the ring does not wait
            empty_wait.start();
            // (cluster or not, a CTA-scope wait, as CUTLASS's cluster pipelines wait: the peer's part of a stage
            // completes on this CTA's own barrier; mbar_wait_cluster's acquire would add an L1 invalidation)
            // (a timeout raises the stop word: the consumers stop waiting for stages that will not come)
            if (!mbar_wait_or_stop(&empty[rc.stage], rc.phase ^ 1u, stop, status, kBarEmpty, rc.stage, kSiteProducer))
                return false;
            empty_wait.stop();
            unsigned char* stage = ring + rc.stage * STAGE_BYTES;
            u64* bar = &full[rc.stage];
            // the peer's half of B may land before this arm: the barrier's tx-count goes below zero for a while,
            // and the phase cannot complete before this arrival
            mbar_arrive_expect_tx(bar, GEMM_TX_BYTES);
#if GEMM_CONV
            conv_load_a(stage, map_a, tm, kb, bar);
#else
#pragma unroll
            for (int p = 0; p < PANELS; ++p)
                load_panel<GEMM_EVICT_A>(stage + p * A_BOX_BYTES, map_a, kb * BK + p * PANEL_ELEMS, tm * BM, SHARE_A,
                                         bar);
#endif
#pragma unroll
            for (int p = 0; p < PANELS; ++p)
                load_panel<GEMM_EVICT_B>(stage + A_BYTES + p * B_BOX_BYTES, map_b, kb * BK + p * PANEL_ELEMS,
                                         tn * BN, !SHARE_A, bar);
            rc.advance(STAGES);
        }
        return true;
    });
#if GEMM_PROFILE
    profile_put(profile, kEmptyWait, empty_wait.sum);
#endif
}

// One warp lane per consumer warp releases a stage once the wgmmas that read it are complete: on its own empty
// barrier, and with a cluster on the peer's too (the peer's producer multicasts into this CTA's stage).
__device__ __forceinline__ void release(u64* empty, int stage) {
    if ((threadIdx.x & 31) != 0) return;
#if GEMM_CLUSTERED
#pragma unroll
    for (u32 r = 0; r < CLUSTER; ++r) mbar_remote_arrive_cta(&empty[stage], r);
#else
    mbar_arrive(&empty[stage]);
#endif
}

// ---- stream-K partial sums: slot `cta` of the workspace holds one tile's fp32 accumulators in register order
// ([consumer][atom][register][thread]: consecutive threads, consecutive words), flags[cta] the epoch it was
// written in. A named barrier over the consumer threads orders their writes before the flag's release (and the
// flag's acquire before their reads), as CUTLASS's GenericBarrier does.
constexpr u32 kBarPartial = 2, kSitePartial = 3;
#ifndef GEMM_TEST_DROP_FLAG
#define GEMM_TEST_DROP_FLAG 0
#endif
constexpr int PARTIAL_FLOATS = CONSUMERS * M_ATOMS * ND * 128;
constexpr u32 kConsumersBar = 3, kConsumerThreads = CONSUMERS * 128;  // named barrier of all consumer threads
__device__ __forceinline__ void consumers_bar() {
    asm volatile("bar.sync %0, %1;" ::"n"(kConsumersBar), "n"(kConsumerThreads) : "memory");
}
__device__ __forceinline__ float* partial_slot(float* workspace, int cta) {
    const int cw = threadIdx.x / 128 - 1, t = threadIdx.x % 128;
    return workspace + (long long)cta * PARTIAL_FLOATS + cw * M_ATOMS * ND * 128 + t;
}
__device__ __forceinline__ void save_partial(float (&acc)[M_ATOMS][ND], float* workspace, u32* flags, u32 epoch) {
    float* slot = partial_slot(workspace, blockIdx.x);
#pragma unroll
    for (int a = 0; a < M_ATOMS; ++a)
#pragma unroll
        for (int i = 0; i < ND; ++i) __stcg(slot + (a * ND + i) * 128, acc[a][i]);
    consumers_bar();
    if (threadIdx.x == 128 && !GEMM_TEST_DROP_FLAG) {  // (tests drop the flag: the owner's wait must time out)
        asm volatile("fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.u32 [%0], %1;" ::"l"(flags + blockIdx.x), "r"(epoch)
                     : "memory");
    }
}
__device__ __forceinline__ bool flag_reached(const u32* flag, u32 epoch) {
    u32 seen;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
    return seen == epoch;
}
__device__ __forceinline__ bool add_partials(float (&acc)[M_ATOMS][ND], float* workspace, u32* flags, u32 epoch,
                                             const StreamK& sk, int first, int last, DrvtmaStatus* status) {
    for (int cta = first; cta <= last; ++cta) {
        if (!sk.holds_units(cta)) continue;  // CTA-uniform: everyone skips the same slots
        // one thread waits (bounded, the shared helper) for the slot's epoch; the consumers' vote passes the
        // outcome on to all of them at once (and, a CTA barrier, orders its acquire before their reads)
        const bool late = threadIdx.x == 128 &&
                          !wait_bounded([&] { return flag_reached(flags + cta, epoch); }, status, kBarPartial, cta,
                                        epoch, kSitePartial);
        if (group_any(kConsumersBar, kConsumerThreads, late)) return false;
        const float* slot = partial_slot(workspace, cta);
#pragma unroll
        for (int a = 0; a < M_ATOMS; ++a)
#pragma unroll
            for (int i = 0; i < ND; ++i) acc[a][i] += __ldcg(slot + (a * ND + i) * 128);
    }
    return true;
}

__device__ __forceinline__ void consume(unsigned char* ring, unsigned char* staging, u64* full, u64* empty, u64* turns,
                                        volatile u32* stop, const CUtensorMap* map_c, int M, int N, int rows, int cols,
                                        int K, float alpha, DrvtmaStatus* status, u64* profile,
                                        float* workspace, u32* flags, u32 epoch) {
    const int cw = threadIdx.x / 128 - 1;  // consumer warpgroup 0..CONSUMERS-1
    const int slot = GEMM_PINGPONG ? 0 : cw;  // which WG_ROWS rows of its tiles the warpgroup computes
    const int t = threadIdx.x % 128, w = t / 32, g = (t % 32) / 4, c = t % 4;
    const bool store_issuer = t == 0;
    // Descriptors of warpgroup 0's atoms at stage 0 (start relative to the stage); warpgroup cw reads
    // GEMM_A_WG_BYTES * cw further on (the host checked that descriptor_for gives exactly that).
    const u64 desc_a[] = {GEMM_DESC_A};
    const u64 desc_b[] = {GEMM_DESC_B};
    unsigned char* my_staging = staging + cw * EPI_BUFS * EPI_BUF_BYTES;
    u32 stores = 0;
    float acc[M_ATOMS][ND];
#pragma unroll
    for (int a = 0; a < M_ATOMS; ++a)
#pragma unroll
        for (int i = 0; i < ND; ++i) acc[a][i] = 0.f;
    RingCursor rc;
    Stopwatch full_wait, epilogue;
#if GEMM_PROFILE
    const u64 cycles0 = clock64(), ns0 = globaltimer_ns();
    u32 tiles_done = 0;
#endif
    // from K here, not passed in: a kblocks computed before the role split would stay live through it and spill in
    // the mma.sync consumers (docs/gemm.md, Design)
    const int kblocks = (K + BK - 1) / BK;
    const StreamK sk(rows * cols, kblocks);
#if GEMM_PINGPONG
    u32 turn = 0, turns_waited = 0;  // the CTA's tiles so far; this warpgroup's waits for its turn
#endif
    for_each_run(sk, [&](int tile, int kb0, int kb1) {
#if GEMM_PINGPONG
        const u32 mine = turn++;
        if ((mine & 1u) != (u32)cw) {  // the other warpgroup's tile: its stages pass by on the ring
            rc.advance_by(kb1 - kb0, STAGES);
#if GEMM_PROFILE
            ++tiles_done;  // the profile counts the CTA's tiles, both warpgroups'
#endif
            return true;
        }
        if (mine > 0 && !mbar_wait_group(&turns[cw], turns_waited++ & 1u, status, kBarTurn, cw, kSiteTurn, 1 + cw, 128))
            return false;
#endif
        int tm, tn;
        walk_coords(tile, rows, cols, tm, tn);
        int previous = -1;
        for (int kb = kb0; kb < kb1; ++kb) {
            full_wait.start();
            // every thread goes on to the aligned wgmmas (mma.sync: ldmatrix / mma.sync per warp), whatever its
            // wait gave: a timeout raises the stop word, and the warpgroup decides after the loop
            // (mbarrier.cuh: mbar_wait_or_stop, why it cannot hang)
            mbar_wait_or_stop(&full[rc.stage], rc.phase, stop, status, kBarFull, rc.stage, kSiteConsumer);
            full_wait.stop();
#if GEMM_PINGPONG
            if (kb == kb1 - 1 && t == 0) mbar_arrive(&turns[cw ^ 1]);  // every full wait of the tile passed
#endif
            const u32 stage_base = smem_u32(ring) + rc.stage * STAGE_BYTES;
            const u32 a_base = stage_base + slot * GEMM_A_WG_BYTES;
#if GEMM_MMA_SYNC
            // lane l feeds row l & 7 of 8x8 matrix l >> 3: A matrices (rows 0-7 | 8-15) x (K bytes 0-15 | 16-31),
            // B matrices (K bytes 0-15 | 16-31) x (n 0-7 | 8-15)
            const int lane = t % 32, q = lane >> 3;
            if (kb == kb0) {
#pragma unroll
                for (int i = 0; i < ND; ++i) acc[0][i] = 0.f;
            }
#pragma unroll
            for (int s = 0; s < STEPS; ++s) {
                u32 af[4][4];
#pragma unroll
                for (int mi = 0; mi < 4; ++mi)
                    ldmatrix_x4(af[mi], tile_byte(a_base, A_BOX_BYTES, 16 * mi + (q & 1) * 8 + (lane & 7),
                                                  32 * s + (q >> 1) * 16));
#pragma unroll
                for (int jj = 0; jj < NB / 2; ++jj) {
                    u32 bf[4];
                    ldmatrix_x4(bf, tile_byte(stage_base + A_BYTES, B_BOX_BYTES,
                                              w * WARP_N + 16 * jj + (q >> 1) * 8 + (lane & 7), 32 * s + (q & 1) * 16));
#pragma unroll
                    for (int mi = 0; mi < 4; ++mi) {
                        mma_sync(&acc[0][4 * (mi * NB + 2 * jj)], af[mi], bf[0], bf[1]);
                        mma_sync(&acc[0][4 * (mi * NB + 2 * jj + 1)], af[mi], bf[2], bf[3]);
                    }
                }
            }
            release(empty, rc.stage);  // ldmatrix has read the stage into registers
#else
            wgmma_fence();
#pragma unroll
            for (int s = 0; s < STEPS; ++s) {
                const u64 db = wgmma_desc_at(desc_b[s], stage_base);
#pragma unroll
                for (int a = 0; a < M_ATOMS; ++a)
                    GEMM_MMA(acc[a], wgmma_desc_at(desc_a[a * STEPS + s], a_base), db, (kb > kb0 || s > 0) ? 1u : 0u);
            }
            wgmma_commit();
#endif
#if GEMM_MMA_SYNC
#elif GEMM_INFLIGHT
            // keep this k-block's group running; the previous one is complete, so its stage goes back
            wgmma_wait<1>();
            if (previous >= 0) release(empty, previous);
            previous = rc.stage;
#else
            wgmma_wait<0>();
            release(empty, rc.stage);
#endif
            rc.advance(STAGES);
        }
#if !GEMM_MMA_SYNC
        wgmma_wait<0>();  // warpgroup-uniform also after a timeout: no wgmma outlives its CTA's shared memory
        if (previous >= 0) release(empty, previous);
#endif
        // the vote (uniform: mbarrier.cuh). Stream-K: the consumer warpgroups meet at consumers_bar below (partial
        // sums), so they decide together; otherwise each warpgroup on its own.
#if GEMM_STREAMK
        if (group_any(kConsumersBar, kConsumerThreads, stop_raised(stop))) return false;
#else
        if (group_any(1 + cw, 128, stop_raised(stop))) return false;
#endif
#pragma unroll
        for (int a = 0; a < M_ATOMS; ++a)
#pragma unroll
            for (int i = 0; i < ND; ++i) wgmma_fence_operand(acc[a][i]);  // no read of acc before the wait
#if GEMM_STREAMK
        if (kb0 > 0) {  // another CTA owns this tile
            save_partial(acc, workspace, flags, epoch);
            return true;
        }
        if (kb1 < kblocks &&  // the owner of a split tile: the later k-blocks are in higher CTAs' slots
            !add_partials(acc, workspace, flags, epoch, sk, blockIdx.x + 1,
                          sk.cta_of((long long)(tile - sk.whole) * kblocks + kblocks - 1), status))
            return false;
#endif

        // Epilogue: 64 rows x EPI_COLS columns at a time through 128B-swizzled staging buffers (swapped: 64 rows x
        // EPI_ROWS columns of the tile, written transposed, are EPI_ROWS rows of C).
        // whole tile: panel (a, p) has a buffer of its own
        auto whole_tile_buffer = [&](int a, int p) { return my_staging + (a * (BN / EPI_W) + p) * EPI_BUF_BYTES; };
        epilogue.start();
        if (EPI_WHOLE_TILE) {
            if (store_issuer) bulk_wait_read<0>();  // the last tile's stores have read every buffer (a main loop ago)
            warpgroup_bar(1 + cw);
        }
        for_each_panel(tm, tn, slot, M, N, [&](int a, int p, int row0, int col0) {
            unsigned char* buf =
                EPI_WHOLE_TILE ? whole_tile_buffer(a, p) : my_staging + stores % EPI_BUFS * EPI_BUF_BYTES;
            if (!EPI_WHOLE_TILE) {
                if (store_issuer) bulk_wait_read<EPI_BUFS - 1>();  // the store that last read this buffer is done
                warpgroup_bar(1 + cw);
            }
#if GEMM_STMATRIX
            // pairs i0, i0 + 2, i0 + 4, i0 + 6 are four 8x8 matrices: rows 0-7 | 8-15 of column blocks b | b + 8
            const int lane = t % 32, mat = lane >> 3, mrow = lane & 7;
#pragma unroll
            for (int i0 = 0; i0 < ND; i0 += 8) {
                if (acc_col_block(i0, w) - p * EPI_W < 0 || acc_col_block(i0, w) - p * EPI_W >= EPI_W) continue;
                const int row = acc_row(i0 + 2 * mat, w, mrow);  // the row (swapped: column) this lane addresses
                const int block = acc_col_block(i0 + 2 * mat, w) - p * EPI_W;
#if GEMM_SWAP_AB
                const u32 at = staged_at(block + mrow, (row - mrow) * OUT_BYTES);  // a column of C^T's 8 rows
#else
                const u32 at = staged_at(row, block * OUT_BYTES);  // 8 columns of one row: 16 bytes
#endif
                float (&v)[ND] = acc[a];
                stmatrix_x4(smem_u32(buf) + at, pack_pair(v[i0] * alpha, v[i0 + 1] * alpha),
                            pack_pair(v[i0 + 2] * alpha, v[i0 + 3] * alpha),
                            pack_pair(v[i0 + 4] * alpha, v[i0 + 5] * alpha),
                            pack_pair(v[i0 + 6] * alpha, v[i0 + 7] * alpha));
            }
#else
#pragma unroll
            for (int i = 0; i < ND; i += 2) {  // accumulator pair (i, i + 1): one row, two columns
                const int row = acc_row(i, w, g);
                const int block = acc_col_block(i, w) - p * EPI_W;  // compile-time for wgmma
                if (block < 0 || block >= EPI_W) continue;
#if GEMM_SWAP_AB
#pragma unroll
                for (int e = 0; e < 2; ++e)  // column block + 2c + e of the tile: that row of the staged C
                    store_one(buf + staged_at(block + 2 * c + e, row * OUT_BYTES), acc[a][i + e] * alpha);
#else
                store_pair(buf + staged_at(row, (block + 2 * c) * OUT_BYTES), acc[a][i] * alpha,
                           acc[a][i + 1] * alpha);
#endif
            }
#endif
            if (!EPI_WHOLE_TILE) {
                fence_proxy_async_shared();  // generic-proxy writes -> the TMA store reads them
                warpgroup_bar(1 + cw);
                if (store_issuer) {
                    tma_store_panel(map_c, buf, row0, col0);
                    bulk_commit();
                }
                ++stores;
            }
        });
        if (EPI_WHOLE_TILE) {  // every panel written: one fence and barrier, then all the tile's stores
            fence_proxy_async_shared();
            warpgroup_bar(1 + cw);
            if (store_issuer) {
                for_each_panel(tm, tn, slot, M, N, [&](int a, int p, int row0, int col0) {
                    tma_store_panel(map_c, whole_tile_buffer(a, p), row0, col0);
                });
                bulk_commit();
            }
        }
        epilogue.stop();
#if GEMM_PROFILE
        ++tiles_done;
#endif
        return true;
    });
    if (store_issuer) bulk_wait<0>();  // staging must outlive the stores' reads; writes done before exit
#if GEMM_PROFILE
    if (cw == 0 && t == 0) {
        u32 smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        const u64 values[] = {full_wait.sum, epilogue.sum, clock64() - cycles0, tiles_done, smid, ns0,
                              globaltimer_ns()};
        for (int i = 0; i < 7; ++i) profile_put(profile, kFullWait + i, values[i]);
    }
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_ws(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
        const __grid_constant__ CUtensorMap map_c, int M, int N, int K, float alpha, DrvtmaStatus* status,
        u64* profile, float* workspace, u32* flags, u32 epoch) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ u64 full[STAGES], empty[STAGES], turns[2];  // turns: GEMM_PINGPONG's, one per consumer warpgroup
    __shared__ u32 stop;  // the stop word (mbar_wait_or_stop); the barriers' initialisation below publishes it
    if (threadIdx.x == 0) stop = 0u;
    unsigned char* ring = align_smem_1024(smem_raw);
    unsigned char* staging = ring + STAGES * STAGE_BYTES;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int rows = (tiles_m + GEMM_CLUSTER_M - 1) / GEMM_CLUSTER_M;  // cluster rows and columns of tiles
    const int cols = (tiles_n + GEMM_CLUSTER_N - 1) / GEMM_CLUSTER_N;
#if GEMM_CLUSTERED
    // every consumer warp of both CTAs releases each stage; the cluster barrier inside makes the barriers of
    // each CTA visible to the peer before any multicast or remote arrival reaches them
    init_cluster_barriers({full, STAGES, 1}, {empty, STAGES, 4 * TILE_WGS * CLUSTER}, {turns, 2, 1});
#else
    init_block_barriers({full, STAGES, 1}, {empty, STAGES, 4 * TILE_WGS}, {turns, 2, 1});
#endif
    if (threadIdx.x < 128) {
#if GEMM_PRODUCER_REGS
        setmaxnreg_dec<GEMM_PRODUCER_REGS>();
#endif
        if (threadIdx.x < 32 && elect_one()) {
#if GEMM_PREFETCH_MAPS
            prefetch_tensormap(&map_a);
            prefetch_tensormap(&map_b);
            prefetch_tensormap(&map_c);
#endif
            produce(ring, full, empty, &map_a, &map_b, rows, cols, K, &stop, status, profile);
        }
    } else {
#if GEMM_CONSUMER_REGS
        setmaxnreg_inc<GEMM_CONSUMER_REGS>();
#endif
        consume(ring, staging, full, empty, turns, &stop, &map_c, M, N, rows, cols, K, alpha, status, profile,
                workspace, flags, epoch);
    }
#if GEMM_CLUSTERED
    cluster_sync();  // the peer may still arrive on this CTA's empty barriers: stay until both are done
#endif
}
