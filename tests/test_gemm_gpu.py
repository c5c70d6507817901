"""The GEMM on the H200 (run in its own pytest process by scripts/gpu-check, step gemm_tests, so a device fault here
cannot poison the main run).

- exact: integer operands (every partial sum exact in fp32) for every input and output type, small, ragged and
  more tiles than SMs, C poisoned before each launch, compared bit for bit with NumPy (ml_dtypes);
- every claim configuration (swizzle, stages, consumers, setmaxnreg, inflight, tile order, persistence) exact on
  a ragged and a many-tile shape;
- a protocol that can never complete ends in BarrierTimeout naming the full barrier, not in a hang, and so does a
  timeout at the edge of the bound (one warp gives up, its siblings see the stage full: all leave together);
- the poison shows tiles nobody wrote;
- large random shapes against cuBLAS within bench.RTOL / ATOL (skipped without nvmath-python or torch), and one
  timing figure per dtype at 4096^3.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from drvtma import settings
from drvtma.errors import BarrierTimeout
from drvtma.gemm import bench
from drvtma.gemm.config import GemmConfig
from drvtma.gemm.launch import Gemm
from drvtma.gemm.reference import exact_operands, random_operands, reference_gemm, value_dtype
from drvtma.runtime.figures import record_test as record

from support.edge_timeouts import EDGE_DEFINES, GEMM_EDGE_CONFIGS, GEMM_SCRIPT, given_up_waits, run_edge_child
from support.gemm_configs import STMATRIX_CONFIGS

pytestmark = [pytest.mark.gpu, pytest.mark.needs("wgmma", "setmaxnreg")]

SEED = settings.FUZZ_SEED.get()
TYPES = [("bfloat16", "bfloat16"), ("bfloat16", "float32"), ("float16", "float16"), ("float16", "float32"),
         ("float8_e4m3fn", "bfloat16"), ("float8_e5m2", "bfloat16")]
# (M, N, K): one exact tile; the smallest legal problem; ragged in every dimension; deep K; two ragged tiles each
# way; 17 x 9 = 153 tiles on 132 SMs (persistent CTAs take a second tile).
SHAPES = [(128, 256, 64), (1, 8, 16), (129, 264, 80), (64, 512, 1024), (300, 776, 208), (2176, 2056, 128)]
CLAIMS = {
    "swizzle none": GemmConfig(swizzle="none"), "swizzle 32B": GemmConfig(swizzle="32B"),
    "swizzle 64B": GemmConfig(swizzle="64B"), "1 stage": GemmConfig(stages=1), "2 stages": GemmConfig(stages=2),
    "1 consumer": GemmConfig(bm=64, consumers=1),
    "1 consumer 2 atoms": GemmConfig(bm=128, bn=128, consumers=1, consumer_regs=240, producer_regs=24),
    "128x128": GemmConfig(bn=128), "setmaxnreg off": GemmConfig(setmaxnreg=False),
    "inflight 1": GemmConfig(inflight=1), "tile per CTA": GemmConfig(persistent=False),
    "row-major order": GemmConfig(group_m=1), "e4m3 swizzle 64B": GemmConfig(dtype="float8_e4m3fn", swizzle="64B"),
    "mma.sync": GemmConfig(mma="mma_sync"),
    "mma.sync f16->f32 128x128 none": GemmConfig(mma="mma_sync", dtype="float16", out_dtype="float32", bn=128,
                                                 swizzle="none"),
    # 2-CTA clusters, B multicast: both shapes have an odd number of tile rows (the last pair's second CTA only
    # loads its half of B), the second one more cluster tiles (81) than clusters (66)
    "cluster 2": GemmConfig(cluster_m=2), "cluster 2 e4m3": GemmConfig(cluster_m=2, dtype="float8_e4m3fn"),
    "cluster 2 tile per CTA": GemmConfig(cluster_m=2, persistent=False),
    "cluster 2 128x128 none f32": GemmConfig(cluster_m=2, bn=128, swizzle="none", out_dtype="float32"),
    "cluster 2 mma.sync": GemmConfig(cluster_m=2, mma="mma_sync"),
    # stream-K: 12 tiles x 4 k-blocks over 132 CTAs (most ranges empty, tiles split over up to 3 CTAs) and 153
    # tiles (132 whole, 21 split in 42 runs): owners add partials that other CTAs wrote through the workspace
    "stream-K": GemmConfig(streamk=True), "stream-K f32 out": GemmConfig(streamk=True, out_dtype="float32"),
    "stream-K e4m3": GemmConfig(streamk=True, dtype="float8_e4m3fn"),
    "stream-K 1 consumer": GemmConfig(streamk=True, bm=64, consumers=1),
    "stream-K mma.sync": GemmConfig(streamk=True, mma="mma_sync"),
}


def _alpha(dtype: str) -> float:
    return 0.5 * 0.25 if dtype.startswith("float8") else 1.0  # fp8: per-tensor scales, powers of two (exact)


def _check_exact(gemm: Gemm, m: int, n: int, k: int, rng) -> None:
    cfg = gemm.config
    a, b = exact_operands(rng, cfg.dtype, m, n, k)
    alpha = _alpha(cfg.dtype)
    got = gemm.matmul(a, b, alpha=alpha)
    want = reference_gemm(a, b, alpha=alpha, out_dtype=cfg.out_dtype)
    bad = ~(got.astype(np.float64) == want.astype(np.float64))
    assert not bad.any(), (f"{cfg.label()} {m}x{n}x{k}: {int(bad.sum())} of {bad.size} wrong, first at "
                           f"{np.argwhere(bad)[0].tolist()}: {got[bad][:4]} vs {want[bad][:4]}")


@pytest.mark.parametrize("dtype, out", TYPES, ids=[f"{a}->{b}" for a, b in TYPES])
def test_exact_on_small_and_ragged_shapes(ctx, dtype, out):
    gemm = Gemm(GemmConfig(dtype=dtype, out_dtype=out))
    rng = np.random.default_rng(SEED)
    for m, n, k in SHAPES:
        _check_exact(gemm, m, n, k, rng)
    record("gemm_exact", dtype=dtype, out_dtype=out, shapes=len(SHAPES), config=gemm.config.label())


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_every_claim_configuration_is_exact(ctx, name):
    gemm = Gemm(CLAIMS[name])
    rng = np.random.default_rng(SEED + 1)
    for m, n, k in ((300, 776, 208), (2176, 2056, 128)):
        _check_exact(gemm, m, n, k, rng)


@pytest.mark.parametrize("k", [128, 640])
@pytest.mark.parametrize("cluster_m, cluster_n, pingpong", [(1, 1, False), (2, 1, False), (1, 2, False),
                                                        (1, 1, True)])
def test_a_stage_that_never_fills_ends_in_barrier_timeout(ctx, cluster_m, cluster_n, pingpong, k):
    """Expect 16 bytes more than the loads deliver: no full wait completes. The waits run out (20 ms), the stop word
    ends the rest of the k-loop at once, and the kernel leaves (with a cluster along M or N, both CTAs of each pair
    reach the closing cluster barrier; ping-pong: the warpgroup waiting for its turn runs out too).
    K = 128 is 2 k-blocks, inside the 4-stage ring: the producer never waits, and the first wait to begin is a
    consumer's at stage 0. K = 640 is 10: the producer waits for stage 0 to come back, and the consumers, once
    stopped, release stages whose full phase never completed, so the producer goes on loading; the launch still
    ends in the timeout. There the first to begin may be that producer wait: with a CTA pair it began about 3 us
    before the consumers' (H200)."""
    cfg = GemmConfig(cluster_m=cluster_m, cluster_n=cluster_n, pingpong=pingpong, bn=128 if pingpong else 256)
    gemm = Gemm(cfg, extra_defines={"GEMM_TX_BYTES": cfg.tx_bytes + 16, "DRVTMA_WAIT_TIMEOUT_NS": "20000000ull"})
    a, b = exact_operands(np.random.default_rng(SEED), cfg.dtype, 256, 512, k)
    with pytest.raises(BarrierTimeout) as exc:
        gemm.matmul(a, b)
    first = exc.value.waits[0]
    consumer_full = (first.barrier, first.where) == (0, 1)
    producer_empty = (first.barrier, first.where) == (1, 2)
    assert first.stage == 0 and (consumer_full or (k > 128 and producer_empty)), exc.value
    assert ("full barrier" if consumer_full else "empty barrier") in str(exc.value)
    record("gemm_timeout", cluster_m=cluster_m, cluster_n=cluster_n, pingpong=pingpong, k=k, count=exc.value.count,
           first=str(first))


@pytest.mark.parametrize("name", sorted(GEMM_EDGE_CONFIGS))
def test_a_consumer_timeout_at_the_edge_takes_the_whole_warpgroup_out(ctx, name):
    """Warp 1 of each consumer warpgroup gives up on its first full-barrier wait after the stage filled; warps 0, 2
    and 3 see it full. Warp 1 raises the stop word and goes on through the k-loop with its siblings (the aligned
    wgmmas have the whole warpgroup); the vote after the loop takes all four out before the epilogue's warpgroup
    barriers (stream-K: before the consumers' partial-sum barriers). BarrierTimeout naming the full barrier and the
    consumer's wait at stage 0 only (once stopped, nobody gives up again), in a child process, not a hang."""
    result = run_edge_child(GEMM_SCRIPT, json.dumps(GEMM_EDGE_CONFIGS[name]))
    waits = given_up_waits(result)
    assert all(w["where"] == 1 and w["stage"] == 0 and w["thread"] >= 128 for w in waits), result
    assert "full barrier" in result["message"] and "consumer waits for a full stage" in result["message"], result
    record("gemm_edge_timeout", config=name, count=result["count"], first=waits[0])


# Ping-pong and swapped operands on shapes where both warpgroups take several tiles of a CTA and K is deeper than the
# ring (a warpgroup that skipped the other's tile would wait two phases ahead without its turn), small and ragged.
SCHEDULES = {
    "ping-pong 128x128": GemmConfig(pingpong=True, bn=128, stages=6),
    "ping-pong 128x128 inflight 1 f16->f32": GemmConfig(pingpong=True, bn=128, stages=5, inflight=1,
                                                         dtype="float16", out_dtype="float32"),
    "ping-pong 64x256 e4m3": GemmConfig(pingpong=True, bm=64, bn=256, dtype="float8_e4m3fn"),
    "ping-pong 256x64 inflight 1": GemmConfig(pingpong=True, bm=256, bn=64, inflight=1),
    "ping-pong cluster 2": GemmConfig(pingpong=True, bn=128, stages=6, cluster_m=2),
    "swapped 64x16": GemmConfig(swap_ab=True, bm=64, bn=16, consumers=1, stages=8),
    "swapped 128x32 f16": GemmConfig(swap_ab=True, bn=32, stages=8, dtype="float16", out_dtype="float16"),
    "swapped 64x64 e4m3": GemmConfig(swap_ab=True, bm=64, bn=64, consumers=1, stages=8, dtype="float8_e4m3fn"),
    "swapped 128x128 stream-K": GemmConfig(swap_ab=True, bn=128, stages=6, streamk=True),
    "swapped 64x256": GemmConfig(swap_ab=True, bm=64, bn=256, consumers=1),
    # for_problem's skinny tiles (maps prefetched): K tiles of 2 and 4 panels (deeper than K in the small shapes), the
    # 16-stage ring
    "swapped 64x16, 4 panels of K": GemmConfig(swap_ab=True, bm=64, bn=16, consumers=1, bk=256, stages=5,
                                                 prefetch_maps=True),
    "swapped 64x32 e4m3, 4 panels of K": GemmConfig(swap_ab=True, bm=64, bn=32, consumers=1, bk=512, stages=4,
                                                     dtype="float8_e4m3fn", prefetch_maps=True),
    "swapped 64x128, 2 panels of K": GemmConfig(swap_ab=True, bm=64, bn=128, consumers=1, bk=128, stages=4,
                                                  prefetch_maps=True),
    "swapped 64x16, 16 stages": GemmConfig(swap_ab=True, bm=64, bn=16, consumers=1, stages=16),
    "swapped 64x64, maps prefetched": GemmConfig(swap_ab=True, bm=64, bn=64, consumers=1, bk=128, stages=6,
                                                 prefetch_maps=True),
    # L2 eviction priorities (for_problem's skinny tiles: C's B evict_first, A evict_last), plain and multicast loads
    "swapped 64x128, 2 panels of K, L2 evict": GemmConfig(swap_ab=True, bm=64, bn=128, consumers=1, bk=128, stages=4,
                                                          prefetch_maps=True, evict_a="last", evict_b="first"),
    "cluster along N, L2 evict": GemmConfig(cluster_n=2, evict_a="first", evict_b="last"),
    "swapped 64x64, 4 panels of K, L2 evict": GemmConfig(swap_ab=True, bm=64, bn=64, consumers=1, bk=256, stages=3,
                                                        prefetch_maps=True, evict_a="last", evict_b="first"),
    "maps prefetched, stream-K": GemmConfig(streamk=True, prefetch_maps=True),
    # the loads' L2 promotion changes the maps, not the kernel: the same exact answers
    "L2 promotion 256B": GemmConfig(l2_promotion="256B"),
    "swapped 64x64, L2 promotion 128B": GemmConfig(swap_ab=True, bm=64, bn=64, consumers=1, bk=128, stages=6,
                                                   prefetch_maps=True, l2_promotion="128B"),
    # a staging buffer per panel: the stores of one tile drain while the next tile's main loop runs (CTAs take two
    # or more tiles at 2176 x 2056), or three buffers in turn
    "whole-tile staging": GemmConfig(epilogue_buffers=4, stages=3),
    "whole-tile staging e4m3 stream-K": GemmConfig(dtype="float8_e4m3fn", epilogue_buffers=4, stages=3,
                                                   streamk=True),
    "whole-tile staging f16->f32": GemmConfig(dtype="float16", out_dtype="float32", epilogue_buffers=8, stages=2),
    "whole-tile staging cluster 2": GemmConfig(cluster_m=2, epilogue_buffers=4, stages=3),
    "ping-pong 128x128 whole-tile staging": GemmConfig(pingpong=True, bn=128, stages=4, epilogue_buffers=4),
    "3 staging buffers": GemmConfig(epilogue_buffers=3, stages=3),
    # pairs along N sharing A (an odd number of tile columns at 2056, 776 and 520: the last pair's second CTA only
    # loads its half of A); swapped, the shared A is C's B, the large operand (the skinny tiles' cluster)
    "cluster along N": GemmConfig(cluster_n=2),
    "cluster along N e4m3 tile per CTA": GemmConfig(cluster_n=2, persistent=False, dtype="float8_e4m3fn"),
    "swapped 64x32 cluster along N, 4 panels of K": GemmConfig(swap_ab=True, bm=64, bn=32, consumers=1, bk=256,
                                                                stages=4, prefetch_maps=True, cluster_n=2),
    "swapped 128x64 e4m3 cluster along N": GemmConfig(swap_ab=True, bm=128, bn=64, consumers=1, bk=256, stages=4,
                                                      dtype="float8_e4m3fn", prefetch_maps=True, cluster_n=2),
    **STMATRIX_CONFIGS,
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_pingpong_and_swapped_configurations_are_exact(ctx, name):
    gemm = Gemm(SCHEDULES[name])
    rng = np.random.default_rng(SEED + 2)
    for m, n, k in ((2176, 2056, 1024), (300, 776, 208), (16, 520, 256), (1, 8, 16), (1100, 2104, 1040)):
        _check_exact(gemm, m, n, k, rng)
    record("gemm_exact", config=gemm.config.label(), shapes=5)


def test_a_pingpong_turn_that_times_out_takes_both_warpgroups_out(ctx):
    """Ping-pong: warp 1 of the warpgroup whose turn came gives up on the turn barrier (DRVTMA_TEST_GIVE_UP_BARRIER),
    the vote takes its warpgroup out, and the other warpgroup then waits for a turn that never comes, bounded:
    BarrierTimeout naming the turn barrier (in a child process: a regression is the child's timeout, not a hang).
    1536 x 1536: 144 tiles of 128 x 128 on 132 CTAs, so some CTAs give both warpgroups a tile."""
    defines = {**EDGE_DEFINES, "DRVTMA_TEST_GIVE_UP_BARRIER": 4}
    result = run_edge_child(GEMM_SCRIPT, json.dumps({"pingpong": True, "bn": 128, "stages": 6}),
                            json.dumps([1536, 1536, 256]), defines=defines)
    assert result["raised"] == "BarrierTimeout", result
    waits = result["waits"]
    assert any(w["barrier"] == 4 and w["where"] == 4 and (w["thread"] // 32) % 4 == 1 for w in waits), result
    assert {w["barrier"] for w in waits} <= {1, 4}, result  # turns, and producers left with stages nobody freed
    assert "ping-pong turn barrier" in result["message"], result
    record("gemm_turn_timeout", count=result["count"], first=waits[0])


def test_a_partial_sum_that_never_comes_ends_in_barrier_timeout(ctx):
    """Stream-K with the partial's flag dropped: the owner's bounded wait on another CTA's slot runs out (20 ms)."""
    cfg = GemmConfig(streamk=True)
    gemm = Gemm(cfg, extra_defines={"GEMM_TEST_DROP_FLAG": 1, "DRVTMA_WAIT_TIMEOUT_NS": "20000000ull"})
    a, b = exact_operands(np.random.default_rng(SEED), cfg.dtype, 300, 776, 208)
    with pytest.raises(BarrierTimeout) as exc:
        gemm.matmul(a, b)
    assert {w.barrier for w in exc.value.waits} == {2} and {w.where for w in exc.value.waits} == {3}
    assert "partial" in str(exc.value)
    record("gemm_streamk_timeout", count=exc.value.count, first=str(exc.value.waits[0]))


def test_streamk_runs_again_on_the_same_workspace(ctx):
    """Each launch raises the flags to a new epoch: a second and third run on the same bound problem (stale
    partials from the run before sit in the slots) are exact too."""
    from drvtma.runtime.driver import DeviceBuffer

    cfg = GemmConfig(streamk=True)
    m, n, k = 300, 776, 208
    rng = np.random.default_rng(SEED + 7)
    out = value_dtype(cfg.out_dtype)
    with DeviceBuffer(m * k * 2) as da, DeviceBuffer(n * k * 2) as db, DeviceBuffer(m * n * out.itemsize) as dc, \
            Gemm(cfg).bind(da, db, dc, m, n, k) as op:
        for _ in range(3):
            a, b = exact_operands(rng, cfg.dtype, m, n, k)
            da.upload(a), db.upload(b)
            op.run_checked()
            np.testing.assert_array_equal(dc.download(out, (m, n)).astype(np.float32),
                                          reference_gemm(a, b, out_dtype=cfg.out_dtype).astype(np.float32))
        assert op.epoch == 3


def test_stores_clip_at_m_and_poison_shows_what_nobody_wrote(ctx):
    """C holds 512 rows, the problem 200: rows 0..199 are exact, the 312 rows past M keep the poison (NaN), so the
    clipped TMA stores of the last tile row wrote nothing past the edge."""
    from drvtma.runtime.driver import DeviceBuffer

    cfg = GemmConfig()
    gemm = Gemm(cfg)
    rows, m, n, k = 512, 200, 512, 64
    a, b = exact_operands(np.random.default_rng(SEED), cfg.dtype, rows, n, k)
    out = value_dtype(cfg.out_dtype)
    with DeviceBuffer.from_array(a) as da, DeviceBuffer.from_array(b) as db, \
            DeviceBuffer(rows * n * out.itemsize) as dc, gemm.bind(da, db, dc, m, n, k) as op:
        op.run_checked()
        got = dc.download(out, (rows, n)).astype(np.float32)
    want = reference_gemm(a[:m], b, out_dtype=cfg.out_dtype).astype(np.float32)
    np.testing.assert_array_equal(got[:m], want)
    assert np.isnan(got[m:]).all()


@pytest.fixture(scope="module")
def cublas(ctx):
    from drvtma.gemm.cublas import NoCublasError, open_cublas

    try:
        lib = open_cublas()
    except NoCublasError as exc:
        pytest.skip(str(exc))
    yield lib
    lib.close()


@pytest.mark.parametrize("dtype, m, n, k, streamk", [
    ("bfloat16", 4096, 4096, 4096, False), ("bfloat16", 16, 8192, 8192, False), ("bfloat16", 1000, 3000, 2056, False),
    ("float8_e4m3fn", 4096, 4096, 4096, False), ("float16", 2048, 2048, 2048, False),
    # stream-K sums a split tile's halves apart, so fp8's accumulator error shows: 0.91-1.08 of the tolerance
    # without its sqrt(K) widening here (1.32-1.36 at K = 32768)
    ("float8_e4m3fn", 4096, 4096, 16384, True)])
def test_large_random_shapes_match_cublas(cublas, dtype, m, n, k, streamk):
    from drvtma.runtime.driver import DeviceBuffer

    cfg = GemmConfig(dtype=dtype, out_dtype="float16" if dtype == "float16" else "bfloat16", streamk=streamk)
    gemm = Gemm(cfg)
    a, b = random_operands(np.random.default_rng(SEED), dtype, m, n, k)
    alpha = _alpha(dtype)
    out = value_dtype(cfg.out_dtype)
    with DeviceBuffer.from_array(a) as da, DeviceBuffer.from_array(b) as db, \
            DeviceBuffer(m * n * out.itemsize) as dc, DeviceBuffer(m * n * out.itemsize) as dref, \
            gemm.bind(da, db, dc, m, n, k, alpha=alpha) as op:
        theirs = cublas.plan(da, db, dref, m, n, k, dtype, cfg.out_dtype, alpha)
        try:
            err = bench.error_against_cublas(op, theirs, dc, dref, cfg, m, n, k)
        finally:
            theirs.release()
    record("gemm_vs_cublas", dtype=dtype, m=m, n=n, k=k, streamk=streamk, error_in_tolerances=round(err, 3),
           cublas=cublas.describe())
    assert err <= 1.0, f"{dtype} {m}x{n}x{k}: worst element {err:.3g} x the tolerance away from cuBLAS"


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_speed_figure_at_4096(cublas, dtype):
    """Verified, then timed against cuBLAS (ABBA, L2 flushed): one figure line; no target asserted here."""
    from drvtma.runtime.driver import DeviceBuffer, device_properties

    gemm = Gemm(GemmConfig(dtype=dtype))
    with DeviceBuffer(2 * device_properties().l2_bytes) as flush_buf:
        p = bench.bench_point(gemm, cublas, dtype, 4096, 4096, 4096, runs=10, warmups=2,
                              flush=lambda: flush_buf.fill_u32(0x5A5A5A5A), rng=np.random.default_rng(SEED),
                              alpha=_alpha(dtype))
    assert p.verified, p.note
    record("gemm_speed", **p.figure(), sm_mhz=p.smi_after.get("sm_mhz"), power_w=p.smi_after.get("power_w"),
           cublas=p.cublas_algo, cublas_kernels=p.cublas_kernels[:3])
