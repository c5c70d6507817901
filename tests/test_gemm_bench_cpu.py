"""`drvtma bench gemm` and its claim sweep on the CPU: the plumbing (operands, cuBLAS plan, verification, ABBA
timing, figure lines, CSV / Markdown) runs against a NumPy stand-in for the GPU, so a typo cannot wait for the
device. What it cannot show (speed, the driver) is for tests/test_gemm_gpu.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from drvtma.errors import GemmError
from drvtma.gemm import bench, claims
from drvtma.gemm.claims import CLAIMS
from drvtma.gemm.config import GemmConfig
from drvtma.gemm.reference import reference_gemm, value_dtype

_MEMORY: dict[int, np.ndarray] = {}


class FakeBuffer:
    """A DeviceBuffer made of host bytes (its .ptr is a key into _MEMORY)."""

    def __init__(self, nbytes: int):
        self.bytes = np.zeros(nbytes, np.uint8)
        self.ptr = id(self)
        _MEMORY[self.ptr] = self.bytes

    @classmethod
    def from_array(cls, arr):
        buf = cls(arr.nbytes)
        buf.bytes[:] = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        buf.array = arr
        return buf

    def fill_u32(self, word):
        self.bytes.view(np.uint32)[:] = word

    def download(self, dtype, shape):
        return self.bytes.view(dtype).reshape(shape).copy()

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def _product(a, b, c, m, n, k, dtype, out, alpha, wrong=False):
    got = reference_gemm(a.array, b.array, alpha=alpha, out_dtype=out)
    if wrong:
        got = got.copy()
        got.flat[0] = got.flat[0] + 1 + 2 * np.abs(got.astype(np.float32)).max()  # wrong whatever its value
    c.bytes[:] = got.view(np.uint8).reshape(-1)


class FakeCublas:
    def plan(self, a, b, c, m, n, k, dtype, out, alpha=1.0):
        def launch(stream=None):
            _product(a, b, c, m, n, k, dtype, out, alpha)

        launch.release = launch.close = lambda: None  # a plan's clean-up, under both names (gemm.cublas._Launch)
        return launch

    def describe(self):
        return "fake cuBLAS"

    def close(self):
        pass


class FakeGemm:
    wrong_for = ()  # configuration labels that compute a wrong element

    def __init__(self, config):
        self.config = config.check()

    def bind(self, a, b, c, m, n, k, *, alpha=1.0):
        cfg = self.config

        def run():
            _product(a, b, c, m, n, k, cfg.dtype, cfg.out_dtype, alpha, wrong=cfg.label() in FakeGemm.wrong_for)

        return _Ctx(_BoundOp(run, c, 0.64 if cfg.stmatrix else 0.8))


class _BoundOp:
    """Like BoundGemm: `launch` is a method, so each access gives a new bound-method object (as on the GPU). `ms`:
    what the fake timer says each run takes (the stmatrix epilogue is faster here, for --versus)."""

    def __init__(self, run, c, ms=0.8):
        self._run, self._c, self.ms = run, c, ms

    def launch(self):
        self._run()

    def run_checked(self):
        self._c.fill_u32(0x7FBA7FBA)
        self._run()


class _Ctx:
    def __init__(self, op):
        self.op = op

    def __enter__(self):
        return self.op

    def __exit__(self, *exc):
        pass


@pytest.fixture()
def fake_gpu(monkeypatch, tmp_path):
    import drvtma.gemm.cublas as cublas_mod
    import drvtma.gemm.launch as launch_mod
    import drvtma.runtime.driver as driver
    import drvtma.runtime.timing as timing

    calls = []

    def time_launches(launch, *, runs, warmups, flush=None, **_):
        for _ in range(warmups + runs):
            if flush is not None:
                flush()
            launch()
        calls.append(runs)
        cublas = getattr(launch, "release", None)
        ms = 1.0 if cublas else getattr(launch, "__self__").ms  # a drvtma launch: its configuration's time
        return timing.Timing(tuple([ms] * runs), retaken=0 if cublas else 1)

    monkeypatch.setattr(driver, "DeviceBuffer", FakeBuffer)
    monkeypatch.setattr(driver, "device_properties", lambda: SimpleNamespace(l2_bytes=1 << 12, sm_count=132))
    monkeypatch.setattr(timing, "time_launches", time_launches)
    monkeypatch.setattr(cublas_mod, "open_cublas", lambda backend=None: FakeCublas())
    monkeypatch.setattr(cublas_mod, "kernel_names", lambda run: ["fake_kernel"])
    monkeypatch.setattr(launch_mod, "Gemm", FakeGemm)
    monkeypatch.setattr(claims, "Gemm", FakeGemm)
    warmed: list = []  # the configurations each benchmark compiled ahead, at once
    monkeypatch.setattr(launch_mod, "warm_gemm_cache", lambda cfgs, **kw: warmed.append((list(cfgs), kw)))
    monkeypatch.setattr(claims, "warm_gemm_cache", lambda cfgs, **kw: warmed.append((list(cfgs), kw)))
    monkeypatch.setattr(bench, "read_smi", lambda: {"sm_mhz": "1980", "power_w": "500"})
    monkeypatch.setattr(claims, "read_smi", lambda: {"sm_mhz": "1980", "power_w": "500"})
    jsonl = tmp_path / "figures.jsonl"
    monkeypatch.setenv("DRVTMA_REPORT_JSONL", str(jsonl))
    FakeGemm.wrong_for = ()
    return SimpleNamespace(calls=calls, jsonl=jsonl, warmed=warmed)


def test_bench_verifies_times_abba_and_records_figures(fake_gpu, tmp_path):
    shapes = ((2048, 2048, 64), (16, 512, 128))
    result = bench.run_gemm_bench(GemmConfig(), dtypes=("bfloat16", "float8_e4m3fn"), shapes=shapes, runs=4,
                                  warmups=1, pairs=2)
    assert [p.verified for p in result.points] == [True] * 4
    # every configuration the points ran was compiled ahead, in one warm-up
    assert len(fake_gpu.warmed) == 1 and {c.label() for c in fake_gpu.warmed[0][0]} == {p.config for p in result.points}
    assert fake_gpu.calls == [1] * 32  # 2 ABBA pairs of 4 halves, one run each (4 runs per side), per point
    p = result.points[0]
    assert p.ms == 0.8 and p.cublas_ms == 1.0 and p.ratio == pytest.approx(1.25) and p.pair_ratios == (1.25, 1.25)
    assert p.cublas_kernels == ["fake_kernel"] and p.smi_before["sm_mhz"] == "1980"
    lines = [json.loads(x) for x in fake_gpu.jsonl.read_text().splitlines()]
    assert {tuple(sorted(f)) for f in lines} == {("bench", "config", "cublas_tflops", "dtype", "host_bound", "k", "m",
                                                  "n", "pair_ratios", "ratio", "retaken", "spread",
                                                  "tflops")}
    assert lines[0]["spread"] == {"drvtma": 1.0, "cublas": 1.0}  # the fake times every run alike
    assert lines[0]["retaken"] == {"drvtma": 4, "cublas": 0}  # summed over drvtma's four halves
    assert lines[0]["pair_ratios"] == [1.25, 1.25]
    assert lines[0]["host_bound"] == {"drvtma": 0, "cublas": 0}
    # every line names the configuration that ran: for_problem's choice for the skinny 16 x 512 (swapped A and B)
    assert [("swapped A and B" in f["config"]) for f in lines] == [False, True] * 2
    assert [f["dtype"] for f in lines] == ["bfloat16"] * 2 + ["float8_e4m3fn"] * 2
    assert lines[0]["tflops"] == round(2 * 2048 * 2048 * 64 / 0.8e-3 / 1e12, 1)
    csv = result.csv_text().splitlines()
    assert len(csv) == 5 and csv[0].startswith("dtype,m,n,k")
    # runs, pairs, and no variant (no --versus)
    assert csv[1].endswith(",0.8000|0.8000|0.8000|0.8000,1.0000|1.0000|1.0000|1.0000,1.2500|1.2500,,,,,,")
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in result.markdown("drvtma bench gemm").splitlines()
             if line.startswith("| ")]  # the Markdown table (tabulate pads its columns)
    assert ["bfloat16", "2048", "2048", "64"] in [row[:4] for row in cells]
    assert ["1.250", "1.250-1.250"] in [row[6:8] for row in cells]  # the median, then the pairs' range
    assert "fake cuBLAS" in result.text()


def test_versus_times_a_variant_in_the_same_rounds_and_reports_its_speedup(fake_gpu, monkeypatch):
    """--versus stmatrix=true: each point's configuration (for_problem's, swapped for the skinny one) and the same
    with the change, verified, then timed in rounds drvtma, variant, cuBLAS, cuBLAS, variant, drvtma; the variant's
    speed-up over drvtma and its own ratio to cuBLAS per round and as medians, in the text, CSV, Markdown and the
    figure line. A variant a rule refuses is named with the rule; a wrong one is not timed and fails the command."""
    shapes = ((2048, 2048, 64), (16, 512, 128))
    result = bench.run_gemm_bench(GemmConfig(), shapes=shapes, runs=4, warmups=0, pairs=2, versus={"stmatrix": True})
    assert fake_gpu.calls == [1] * 24  # 2 rounds of 6 halves, one run each, per point
    for p in result.points:
        assert "stmatrix epilogue" in p.versus_config and p.versus_config.startswith(p.config) and not p.versus_note
        assert p.versus_pair_speedups == (1.25, 1.25) and p.versus_speedup == pytest.approx(1.25)
        assert p.versus_pair_ratios == (1.5625, 1.5625) and p.ratio == pytest.approx(1.25)  # the base's unchanged
    assert "swapped A and B" in result.points[1].versus_config  # the change is made to for_problem's choice
    lines = [json.loads(x) for x in fake_gpu.jsonl.read_text().splitlines()]
    assert [f["versus"]["speedup"] for f in lines] == [1.25, 1.25] and lines[0]["versus"]["pair_speedups"] == [1.25] * 2
    assert "versus: x1.250 (1.250-1.250), ratio 1.562" in result.text() and "stmatrix=True" in result.text()
    head, first = result.csv_text().splitlines()[:2]
    assert head.endswith("versus_config,versus_ms,versus_ratio,versus_speedup,versus_pair_speedups,versus_note")
    assert first.endswith(",0.6400,1.562,1.250,1.2500|1.2500,")
    assert "x1.250 (1.250-1.250), ratio 1.562" in result.markdown("drvtma bench gemm --versus stmatrix=true")

    refused = bench.run_gemm_bench(GemmConfig(out_dtype="float32"), shapes=shapes[:1], runs=2, warmups=0, pairs=1,
                                   versus={"stmatrix": True})
    p = refused.points[0]
    assert p.verified and p.versus_note.startswith("refused: ") and "stmatrix_epilogue" in p.versus_note
    assert "with stmatrix=True" in p.versus_config and json.loads(
        fake_gpu.jsonl.read_text().splitlines()[-1])["versus"]["note"] == p.versus_note

    FakeGemm.wrong_for = (result.points[0].versus_config,)  # the variant of the first point computes a wrong value
    wrong = bench.run_gemm_bench(GemmConfig(), shapes=shapes[:1], runs=2, warmups=0, pairs=1,
                                 versus={"stmatrix": True})
    p = wrong.points[0]
    assert p.verified and p.versus_note.startswith("MISMATCH") and not p.versus_pair_speedups and p.ms == 0.8
    assert "versus: MISMATCH" in wrong.text()
    monkeypatch.setattr(bench, "run_gemm_bench", lambda *a, **k: wrong)
    from drvtma.cli.main import main
    assert main(["bench", "gemm", "--shapes", "2048x2048x64", "--versus", "stmatrix=true", "--quiet"]) == 1


def test_versus_is_checked_when_the_command_line_is_read(capsys):
    from drvtma.cli.main import main

    for argv, words in ((["--versus", "stmatrix=maybe"], "--versus 'stmatrix=maybe'"),
                        (["--versus", "colour=2"], "FIELD=VALUE with FIELD one of"),
                        (["--versus", "bn=abc"], "--versus 'bn=abc': bn wants a whole number, got 'abc'"),
                        (["--set", "bn=abc"], "--set bn wants a whole number, got 'abc'"),
                        (["--versus", "stmatrix=true", "--claims"], "not with --claims or --profile")):
        assert main(["bench", "gemm", *argv]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2, err


def test_bench_refuses_to_time_a_wrong_result(fake_gpu):
    FakeGemm.wrong_for = (GemmConfig().label(),)
    result = bench.run_gemm_bench(GemmConfig(), shapes=((64, 256, 64),), runs=2, warmups=0, auto=False)
    p = result.points[0]
    assert not p.verified and "MISMATCH" in p.note and fake_gpu.calls == []
    assert not fake_gpu.jsonl.exists() or not fake_gpu.jsonl.read_text()


def test_a_point_cublas_cannot_do_is_named_not_run_and_is_no_failure(fake_gpu, monkeypatch, capsys):
    """cuBLASLt has no e5m2 x e5m2 kernel: the point says so, the others run, and the command exits 0."""
    from drvtma.gemm.cublas import CublasUnsupported

    plan = FakeCublas.plan

    def plan_or_refuse(self, a, b, c, m, n, k, dtype, out, alpha=1.0):
        if dtype == "float8_e5m2":
            raise CublasUnsupported("cuBLASLt has no e5m2 x e5m2 kernel")
        return plan(self, a, b, c, m, n, k, dtype, out, alpha)

    monkeypatch.setattr(FakeCublas, "plan", plan_or_refuse)
    result = bench.run_gemm_bench(GemmConfig(), dtypes=("float8_e5m2", "bfloat16"), shapes=((64, 256, 64),), runs=2,
                                  warmups=0, auto=False)
    refused, ran = result.points
    assert not refused.verified and refused.note.startswith(bench.UNSUPPORTED) and "e5m2" in refused.note
    assert ran.verified and "not run" in result.text()
    monkeypatch.setattr(bench, "run_gemm_bench", lambda *a, **k: result)
    from drvtma.cli.main import main
    assert main(["bench", "gemm", "--dtypes", "float8_e5m2,bfloat16", "--shapes", "64x256x64", "--quiet"]) == 0


def test_claim_sweep_covers_every_claim(fake_gpu):
    result = claims.run_claims(shape=(64, 256, 128), runs=2, warmups=0)
    by_claim = {}
    for p in result.points:
        by_claim.setdefault(p.claim, []).append(p)
    assert set(by_claim) == set(CLAIMS)
    for claim, (_, values, _) in CLAIMS.items():
        assert [p.value for p in by_claim[claim]] == list(values)
    assert not [p for p in result.points if p.note]  # every value builds, 2-CTA multicast included
    assert len(fake_gpu.warmed) == 1 and {c.label() for c in fake_gpu.warmed[0][0]} == {p.label for p in result.points}
    timed = result.points
    # the fake times the stmatrix epilogue at 0.64 ms, every other configuration at 0.8, cuBLAS at 1.0
    assert all(p.tflops / p.cublas_tflops == pytest.approx(1 / (0.64 if "stmatrix" in p.label else 0.8)) for p in timed)
    md = result.markdown("drvtma bench gemm --claims")
    assert md.count("\n| ") == len(result.points) + 1
    spreads = result.spreads()
    assert len(spreads) == len(CLAIMS) and all(" 1.000" in line for line in spreads)  # the best is 1.000 of itself
    assert "## Per claim" in md


def test_set_changes_any_config_field_with_its_type():
    assert bench.config_changes(["cluster_m=2", "persistent=off", "bk=None", "swizzle=64B"]) == \
        {"cluster_m": 2, "persistent": False, "bk": None, "swizzle": "64B"}
    for bad in ("clusterm=2", "cluster_m", "persistent=maybe", "stages=four"):
        with pytest.raises(ValueError):
            bench.config_changes([bad])


def test_compare_counts_poison_as_infinitely_wrong():
    ref = np.arange(1, 17, dtype=np.float32).reshape(4, 4).astype(value_dtype("bfloat16"))
    assert bench.compare(ref, ref, "bfloat16") == 0.0
    bad = ref.copy()
    bad[1, 2] = np.nan
    assert bench.compare(bad, ref, "bfloat16") == float("inf")
    off = ref.astype(np.float32)
    off[0, 0] *= 1 + 2.0**-6  # twice the bf16 tolerance (2^-7 relative, ATOL below one element here)
    assert bench.compare(off, ref, "bfloat16") > 1.0
    # fp8 inputs allow the fp8-mode accumulator's error (2^-8 of the largest value), not more
    near_zero = np.zeros(8, np.float32)
    near_zero[0] = 1.0
    assert bench.compare(near_zero + np.float32(2.0**-9), near_zero, "bfloat16", "float8_e4m3fn") <= 1.0
    assert bench.compare(near_zero + np.float32(2.0**-9), near_zero, "bfloat16", "bfloat16") > 1.0
    assert bench.compare(near_zero + np.float32(2.0**-7), near_zero, "bfloat16", "float8_e4m3fn") > 1.0


def test_fp8_tolerance_widens_as_the_square_root_of_k_past_4096():
    """The fp8-mode accumulator's error against the largest value grows as sqrt(K): the floor with it, fp8 only."""
    assert bench.atol("float8_e4m3fn") == bench.atol("float8_e4m3fn", 4096) == bench.ATOL_FP8
    assert bench.atol("float8_e5m2", 16384) == 2 * bench.ATOL_FP8
    assert bench.atol("bfloat16", 1 << 20) == bench.ATOL
    near_zero = np.zeros(8, np.float32)
    near_zero[0] = 1.0
    off = near_zero + np.float32(1.5 * 2.0**-8)
    assert bench.compare(off, near_zero, "bfloat16", "float8_e4m3fn", 4096) > 1.0
    assert bench.compare(off, near_zero, "bfloat16", "float8_e4m3fn", 16384) <= 1.0
    assert bench.compare(off, near_zero, "bfloat16", "bfloat16", 16384) > 1.0
    assert bench.compare(near_zero + np.float32(2.5 * 2.0**-8), near_zero, "bfloat16", "float8_e4m3fn", 16384) > 1.0


@pytest.mark.parametrize("out", ["bfloat16", "float16", "float32"])
def test_compare_in_place_reads_what_the_float64_formula_reads(out):
    """The in-place fp32 comparison (fp64 for fp32 outputs) against the tolerance formula written out in fp64, on
    outputs off by up to twice the tolerance, an exact one and the poison; the input argument stays untouched."""
    rng = np.random.default_rng(4)
    ref = (rng.standard_normal((64, 96)) * 40).astype(value_dtype(out))
    r = ref.astype(np.float64)
    for in_dtype, k in (("bfloat16", 8192), ("float8_e4m3fn", 1024), ("float8_e4m3fn", 32768)):
        atol = bench.ATOL if in_dtype == "bfloat16" else bench.ATOL_FP8 * max(1.0, k / 4096) ** 0.5
        bound = bench.RTOL[out] * np.abs(r) + atol * np.abs(r).max()
        ours = (r + rng.uniform(-2, 2, r.shape) * bound).astype(value_dtype(out))
        kept = ours.copy()
        want = float((np.abs(ours.astype(np.float64) - r) / bound).max())
        assert bench.compare(ours, ref, out, in_dtype, k) == pytest.approx(want, rel=1e-5)
        assert np.array_equal(ours.view(np.uint8), kept.view(np.uint8))
    ours[3, 5] = np.nan
    assert bench.compare(ours, ref, out) == float("inf")


def test_ring_profile_reads_clock_issue_rate_stalls_and_tail():
    """Two CTAs: one ran 1000 ns at 2 GHz over 2 tiles, the other 500 ns (it finished early: half the span idle)."""
    from drvtma.gemm.profile import SLOTS, RingProfile

    cfg = GemmConfig()
    k = 64
    rows = [dict(empty_wait=200, full_wait=100, epilogue=50, consumer_cycles=2000, tiles=2, smid=0, start_ns=0,
                 end_ns=1000),
            dict(empty_wait=0, full_wait=400, epilogue=50, consumer_cycles=1000, tiles=1, smid=1, start_ns=0,
                 end_ns=500)]
    prof = RingProfile(cfg, 256, 256, k, np.array([[r[s] for s in SLOTS] for r in rows], dtype=np.uint64))
    assert prof.clock_mhz == pytest.approx(2000.0)
    assert prof.issue_rate == pytest.approx(3 * 2 * 128 * 256 * 64 / 3000 / 4096)
    assert prof.fraction("full_wait") == pytest.approx(500 / 3000)
    assert prof.fraction("empty_wait") == pytest.approx(200 / 3000)
    assert prof.tail == pytest.approx(0.25) and prof.span_ns == 1000
    s = prof.summary()
    assert s["bench"] == "gemm_profile" and s["tiles_per_cta"] == [1, 2] and "MHz" in prof.text()


@pytest.mark.slow
def test_profile_build_compiles_with_its_counters_and_the_plain_one_without():
    from drvtma.gemm.config import KERNEL_SOURCE
    from drvtma.runtime import sass
    from drvtma.runtime.compiler import compile_cubin

    for cfg in (GemmConfig(), GemmConfig(cluster_m=2)):
        plain = sass.instructions(compile_cubin(KERNEL_SOURCE, defines=cfg.defines()), "gemm_ws")
        profiled = sass.instructions(compile_cubin(KERNEL_SOURCE, defines={**cfg.defines(), "GEMM_PROFILE": 1}),
                                     "gemm_ws")
        clock = lambda ops: sum(v for op, v in ops.items() if op.startswith(("CS2R", "S2UR")))  # noqa: E731
        assert clock(profiled) > clock(plain)
        assert not any(op.startswith(("LDL", "STL")) for op in profiled)


def test_skinny_problems_get_a_swapped_or_small_tile_and_the_point_names_it(fake_gpu):
    big = GemmConfig()
    small = big.for_problem(16, 8192, 8192, 132)  # C^T = B . A^T: M = 16 is the tile's N, 64 rows of N a tile
    # four 128-byte panels of K a stage: (64 + 16) rows x 512 B = 40 KiB <= SKINNY_STAGE_BYTES
    assert (small.swap_ab, small.bm, small.bn, small.consumers, small.k_tile, small.stages) == (True, 64, 16, 1, 256, 5)
    assert small.prefetch_maps and not big.prefetch_maps  # one tile a CTA: the maps' first fetch is worth hiding
    # B (C's, the large operand) streams through the L2 once: evict_first; A, which every CTA reads, evict_last
    assert (small.evict_a, small.evict_b, big.evict_a, big.evict_b) == ("last", "first", "normal", "normal")
    assert small.defines()["GEMM_EVICT_A"] == 1 and small.defines()["GEMM_EVICT_B"] == 2  # swapped: C^T = B . A^T
    assert small.check() is small and small.kernel_extents(16, 8192) == (8192, 16)
    assert [big.for_problem(m, 8192, 8192, 132).bn for m in (1, 17, 64, 100, 128, 200, 256)] == [16, 32, 64, 128,
                                                                                                  128, 256, 256]
    # the widest K tile whose stage stays within 64 KiB: 4 panels for N 16 to 64, 2 for 128, 1 for 256
    assert [big.for_problem(m, 8192, 8192, 132).k_tile for m in (16, 32, 64, 128, 256)] == [256, 256, 256, 128, 64]
    assert big.for_problem(64, 4096, 4096, 132).stages == 3  # 4 x 16 KiB panels a stage
    fp8 = GemmConfig(dtype="float8_e4m3fn")
    assert [fp8.for_problem(m, 8192, 8192, 132).k_tile for m in (16, 64, 128)] == [512, 512, 256]
    # never a panel more than K needs: K = 64 takes one 64-element panel, K = 100 two, K = 193 four
    assert [big.for_problem(16, 8192, k, 132).k_tile for k in (64, 100, 193, 4096)] == [64, 128, 256, 256]
    # a 32-bit C cannot be swapped (its epilogue writes 16-bit rows): the small tile, as many stages as fit
    wide = GemmConfig(out_dtype="float32").for_problem(16, 8192, 8192, 132)
    assert (wide.swap_ab, wide.bm, wide.bn, wide.consumers, wide.stages, wide.prefetch_maps) == (False, 64, 128, 1, 8,
                                                                                               False)
    assert (wide.evict_a, wide.evict_b) == ("normal", "normal")  # not measured without the swap
    assert small.for_problem(16, 8192, 8192, 132) is small
    # one tile a CTA at most: the maps prefetched (the kernel lasts tens of microseconds); more tiles, not
    assert big.for_problem(2048, 2048, 2048, 132) == big.with_(prefetch_maps=True)
    assert big.for_problem(4224, 1024, 2048, 132).prefetch_maps  # 132 tiles: still one a CTA
    assert not big.for_problem(2112, 2048, 2048, 132).prefetch_maps  # 136 tiles: four CTAs take two
    # 15.5 waves and 128 K tiles: stream-K for the last wave; at K = 1024 (16 K tiles) the split's fix-up costs more.
    # From 8 waves (fp8: 2) a staging buffer per epilogue panel, so a tile's stores overlap the next main loop: the
    # four 8 KiB panels of each consumer's 64 x 256 leave room for 3 stages
    # (and A and B larger than the 60 MiB L2: 16 tile rows walked together)
    whole, wide = dict(epilogue_buffers=4, stages=3), dict(group_m=16)
    assert big.for_problem(8192, 8192, 8192, 132) == big.with_(streamk=True, **whole, **wide)
    assert big.for_problem(8192, 8192, 1024, 132) == big.with_(**whole)  # 32 MiB of A and B
    assert big.for_problem(8192, 4096, 8192, 132) == big.with_(**wide)  # 7.75 waves
    assert fp8.for_problem(8192, 8192, 8192, 132).streamk and not fp8.for_problem(8192, 8192, 4096, 132).streamk
    assert fp8.for_problem(4096, 4096, 4096, 132) == fp8.with_(**whole)  # 3.9 waves of fp8 tiles
    assert fp8.for_problem(2048, 2048, 2048, 132) == fp8.with_(prefetch_maps=True)  # one tile a CTA: no overlap
    for cfg in (big.for_problem(8192, 8192, 1024, 132), fp8.for_problem(8192, 8192, 8192, 132)):
        assert cfg.check().smem_bytes <= 232448 and cfg.epilogue_buffers == cfg.epilogue_panels
    # mma.sync was never timed or checked with them on the GPU: its double-buffered epilogue stays, and one wave of
    # its tiles does not prefetch the maps
    assert GemmConfig(mma="mma_sync").for_problem(8192, 8192, 1024, 132) == GemmConfig(mma="mma_sync")
    assert GemmConfig(mma="mma_sync").for_problem(2048, 2048, 2048, 132) == GemmConfig(mma="mma_sync")
    # no room for 3 stages beside eight staging buffers of fp32: the 4-stage ring stays
    assert GemmConfig(out_dtype="float32").for_problem(8192, 8192, 1024, 132) == GemmConfig(out_dtype="float32")
    # 66 x 32 = 2112 tiles = 16 whole waves: nothing to balance
    assert big.for_problem(8448, 8192, 8192, 132) == big.with_(**whole, **wide)
    assert big.with_(cluster_m=2).for_problem(8192, 8192, 8192, 132).streamk is False
    assert big.with_(**whole).for_problem(16, 8192, 8192, 132) == small  # the skinny tile stages its own way
    for pair in ("cluster_m", "cluster_n"):  # nor does it keep a pair of the large tile's
        assert big.with_(**{pair: 2}).for_problem(16, 8192, 8192, 132) == small
    assert fp8.for_problem(16, 8192, 8192, 132).smem_bytes <= 232448
    result = bench.run_gemm_bench(big, shapes=((16, 8192, 256), (1024, 8192, 256)), runs=2, warmups=0)
    # the bench hands for_problem the device's L2 (the fake one's 4 KiB: 1024 x 8192 x 256 outgrows it)
    assert result.points[0].config == small.label() and result.points[1].config == big.with_(**wide).label()
    assert result.chosen(result.points[0]) == small.label()
    assert result.chosen(result.points[1]) == big.with_(**wide).label()
    assert small.label() in result.markdown("drvtma bench gemm")


def test_a_type_cublas_cannot_take_is_verified_against_numpy_and_still_timed(fake_gpu, monkeypatch):
    """cuBLASLt has no e5m2 x e5m2 (CUBLAS_STATUS_NOT_SUPPORTED on the H200): that claim point is checked against
    NumPy's fp32 product and timed, its cuBLAS ratio left unknown, and the table says so."""
    from drvtma.gemm.cublas import CublasUnsupported

    plan, refusal = FakeCublas.plan, [CublasUnsupported("CUBLAS_STATUS_NOT_SUPPORTED")]

    def no_e5m2(self, a, b, c, m, n, k, dtype, out, alpha=1.0):
        if dtype == "float8_e5m2":
            raise refusal[0]
        return plan(self, a, b, c, m, n, k, dtype, out, alpha)

    monkeypatch.setattr(FakeCublas, "plan", no_e5m2)
    result = claims.run_claims(shape=(64, 256, 128), runs=2, warmups=0, claims=["FP8 1.5-2x FP16"])
    e5m2 = [p for p in result.points if p.value == "float8_e5m2"][0]
    assert e5m2.timed and e5m2.error <= 1.0 and "NumPy" in e5m2.note and np.isnan(e5m2.cublas_tflops)
    assert all(p.timed for p in result.points)
    assert "verified against NumPy" in result.markdown("x")
    FakeGemm.wrong_for = (e5m2.label,)
    result = claims.run_claims(shape=(64, 256, 128), runs=2, warmups=0, claims=["FP8 1.5-2x FP16"])
    assert [p.note for p in result.points if p.value == "float8_e5m2"][0].startswith("MISMATCH")
    refusal[0] = RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED")  # any other failure is not taken for "cannot"
    with pytest.raises(RuntimeError, match="EXECUTION_FAILED"):
        claims.run_claims(shape=(64, 256, 128), runs=2, warmups=0, claims=["FP8 1.5-2x FP16"])


def test_shapes_parse_or_name_the_option(capsys):
    from drvtma.cli.benches import SHAPES
    from drvtma.cli.main import main

    assert SHAPES("4096x4096x4096, 16X8192x8192") == ((4096, 4096, 4096), (16, 8192, 8192))
    for bad in ("4096x4096", "", "axbxc", "1x2x3x4", "1x2x3,4x5x6"):
        assert main(["bench", "gemm", "--claim-shape", bad]) == 2
        assert "--claim-shape" in capsys.readouterr().err


def test_claim_sweep_starts_from_the_given_base(fake_gpu):
    base = GemmConfig(group_m=4)
    result = claims.run_claims(shape=(64, 256, 128), runs=2, warmups=0, claims=["setmaxnreg"], base=base)
    assert [p.label for p in result.points] == [base.with_(setmaxnreg=v).label() for v in (False, True)]


def test_bound_gemm_keeps_its_launch_arguments_until_they_change():
    """BoundGemm.launch hands Kernel.launch the very same argument objects while nothing changed (its fast path);
    stream-K's epoch and an attached profile buffer make new ones."""
    from drvtma.gemm.launch import BoundGemm

    calls = []
    kernel = SimpleNamespace(launch=lambda *args, **kw: calls.append((args, kw)))
    op = BoundGemm.__new__(BoundGemm)
    op.gemm, op.kernel, op.maps = SimpleNamespace(config=GemmConfig()), kernel, ("ma", "mb", "mc")
    op.m, op.n, op.k, op.alpha, op.status, op.grid = 128, 256, 64, 1.0, "status", 132
    op.kernel_mn = (128, 256)
    op.profile = op.workspace = op.flags = None
    op.epoch, op.cluster, op._args = 0, None, None
    op._block, op._smem = GemmConfig().threads, GemmConfig().smem_bytes
    op.launch()
    op.launch()
    assert all(a is b for a, b in zip(calls[0][0], calls[1][0])) and calls[0][0][7:11] == ("status", 0, 0, 0)
    assert calls[0][1] == {"grid": 132, "block": 384, "shared_mem": GemmConfig().smem_bytes, "stream": None,
                           "cluster": None}
    assert all(calls[0][1][key] is calls[1][1][key] for key in calls[0][1])  # the launch shape too, by identity
    op.attach_profile("counters")
    op.launch()
    assert calls[2][0][8] == "counters"
    op.flags, op.workspace = "flags", "ws"
    op.launch()
    op.launch()
    assert [c[0][-1] for c in calls[3:]] == [1, 2] and calls[3][0][9:11] == ("ws", "flags")


def test_operands_larger_than_the_l2_walk_16_tile_rows_together():
    """4096^3: 64 MiB of bf16 A and B outgrow a 60 MiB L2, 32 MiB of e4m3 do not; the device's own L2 decides; a
    tile order the caller chose, another tile, a cluster or one CTA per tile keep theirs."""
    big, fp8 = GemmConfig(), GemmConfig(dtype="float8_e4m3fn")
    assert big.for_problem(4096, 4096, 4096, 132) == big.with_(group_m=16)
    assert big.for_problem(4096, 4096, 4096, 132, 80 << 20) is big  # a larger L2 holds them
    assert fp8.for_problem(4096, 4096, 4096, 132).group_m == 8
    assert fp8.for_problem(4096, 4096, 4096, 132, 16 << 20).group_m == 16
    for cfg in (big.with_(group_m=4), big.with_(bn=128), big.with_(cluster_m=2), big.with_(persistent=False)):
        assert cfg.for_problem(8192, 8192, 8192, 132).group_m == cfg.group_m
    with pytest.raises(GemmError) as e:
        big.for_problem(4096, 4096, 4096, 132, 0)
    assert e.value.rule == "shape_range" and e.value.parameter == "l2_bytes"


def test_warming_the_cache_compiles_every_configuration_once_on_several_processes(tmp_path, monkeypatch):
    """Two configurations (and a repeat, and one the rules refuse) warmed at once: afterwards each kernel comes
    from the disk cache, with NVRTC never called in this process."""
    from drvtma.gemm.config import KERNEL_SOURCE
    from drvtma.gemm.launch import warm_gemm_cache
    from drvtma.runtime import compiler

    monkeypatch.setenv("DRVTMA_CACHE_DIR", str(tmp_path))
    configs = [GemmConfig(), GemmConfig(stages=3), GemmConfig(), GemmConfig(consumers=3)]
    assert warm_gemm_cache(configs) == 2
    assert len(list(tmp_path.glob("*.cubin"))) == 2
    compiler.clear_memory_cache()

    def no_nvrtc(*args, **kwargs):
        raise AssertionError("compiled again: the warm-up did not fill the cache")

    monkeypatch.setattr(compiler, "_nvrtc_compile", no_nvrtc)
    for cfg in configs[:2]:
        assert compiler.compile_cubin(KERNEL_SOURCE, defines=cfg.defines())[:4] == b"\x7fELF"
    monkeypatch.setenv("DRVTMA_NO_CACHE", "1")  # no disk cache to fill: nothing to do
    assert warm_gemm_cache(configs) == 0
