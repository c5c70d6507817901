"""CPU side of the B-08 modes: kernels compile and use the right copy instructions, the checksum reference and its
comparison catch wrong bytes, sweep output has the article's format, configurations and inputs are guarded, and
the ring model (parities, simulation, trace check) behaves."""

from __future__ import annotations

import csv
import io
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drvtma.runtime import compiler
from drvtma.runtime import sass
from drvtma.b08 import ring
from drvtma.cli.bench import config_from_args, floors_parser, sweep_parser
from drvtma.errors import DrvtmaError, LaunchError
from drvtma.b08.floors import FloorRow, FloorsResult, check_probe_sums, ring_label
from drvtma.b08.modes import (ALL_MODES, FAULTS_BY_MODE, MODES, RING_MODEL_FAULT, ModeConfig, check_alignment,
                              check_problem_size, predicted_timeouts, tiles_x_for)
from drvtma.b08.roof import RoofPoint, blocks_by_registers, knees, ring_configs
from drvtma.b08.sweep import (ARTICLE_FMA, REFERENCE_H200_MS, SweepConfig, SweepResult, SweepRow, csv_columns,
                              csv_text, markdown_text, preset, reference_text, table_text, targets_text)
from drvtma.runtime.timing import HEAD_START_NS, Timing, percentile
from drvtma.b08.verify import (SUMS_POISON, ChecksumMismatch, Reference, TileInput, burn_fma, check_same_total,
                               check_tile_sums, fma_f32, make_input, reference_sums)

ARTICLE_CSV_HEADER = ("fma_iters,sync_ms,bulk1d_ms,tensor2d_ms,pipe2_ms,speedup_bulk1d,speedup_tensor2d,"
                      "speedup_pipe2")


# ------------------------------------------------------------------------------------------ kernels and SASS

@pytest.fixture(scope="module")
def modes_cubin():
    return compiler.compile_cubin("b08/b08_modes.cu", defines={"B08_THREADS": 256})


@pytest.fixture(scope="module")
def rings_cubin():
    return compiler.compile_cubin("b08/pipelines.cu", defines={"B08_THREADS": 256})


COPY_OPS = ("UBLKCP", "UTMALDG")


@pytest.mark.parametrize("kernel,want", [("b08_bulk1d", "UBLKCP"), ("b08_pipe2", "UBLKCP"),
                                         ("b08_tensor2d", "UTMALDG")])
def test_tma_modes_use_their_copy_instruction(modes_cubin, kernel, want):
    ops = sass.instructions(modes_cubin, kernel)
    assert sass.has_opcode(ops, want), f"{kernel} has no {want}: {sorted(ops)}"
    other = [op for op in COPY_OPS if op != want and sass.has_opcode(ops, op)]
    assert not other, f"{kernel} also uses {other}"
    assert sass.has_opcode(ops, "SYNCS.PHASECHK.TRANS64.TRYWAIT")


def test_tensor2d_issues_a_2d_tensor_load(modes_cubin):
    assert "UTMALDG.2D" in sass.instructions(modes_cubin, "b08_tensor2d")


def test_sync_uses_ordinary_loads_only(modes_cubin):
    ops = sass.instructions(modes_cubin, "b08_sync")
    assert not any(sass.has_opcode(ops, op) for op in COPY_OPS), sorted(ops)
    assert not any(op.startswith("SYNCS") for op in ops), "sync must not touch an mbarrier"
    assert any(op.startswith("LDG") for op in ops)


@pytest.mark.parametrize("kernel", ["pipe_ring", "ws_ring"])
def test_ring_kernels_use_bulk_copies(rings_cubin, kernel):
    ops = sass.instructions(rings_cubin, kernel)
    assert sass.has_opcode(ops, "UBLKCP")
    assert not sass.has_opcode(ops, "UTMALDG")


def test_roof_read_kernel_uses_16_byte_loads():
    ops = sass.instructions(compiler.compile_cubin("b08/roof.cu"), "roof_read_vec4")
    assert any(op.startswith("LDG") and ".128" in op for op in ops), sorted(ops)


@pytest.mark.parametrize("threads", [32, 96, 512, 992])
def test_kernels_compile_for_other_block_sizes(threads):
    for source in ("b08/b08_modes.cu", "b08/pipelines.cu"):
        assert compiler.compile_cubin(source, defines={"B08_THREADS": threads})


@pytest.mark.parametrize("threads", [32, 256, 512])
def test_ring_kernels_compile_with_warp_owned_tiles(threads):
    cfg = ModeConfig("ws", threads=threads, split="warp")
    assert cfg.defines()["B08_WARP_TILES"] == 1
    funcs = sass.functions(compiler.compile_cubin("b08/pipelines.cu", defines=cfg.defines()))
    for kernel in ("pipe_ring", "ws_ring"):
        assert "UBLKCP.S.G" in funcs[kernel]


@pytest.mark.parametrize("mode", ["pipeN", "ws"])
@pytest.mark.parametrize("split", ["thread", "warp"])
def test_ring_halves_keep_only_their_half(mode, split):
    """The floors probes: copies without the consumers' arithmetic, arithmetic without copies."""
    full = ModeConfig(mode, split=split)
    kernel = full.spec.kernel
    ops = {part: sass.instructions(compiler.compile_cubin("b08/pipelines.cu", defines=full.with_(part=part).defines()),
                                   kernel) for part in ("full", "copy_only", "compute_only")}
    assert sass.has_opcode(ops["full"], "UBLKCP") and sass.has_opcode(ops["full"], "FFMA")
    assert sass.has_opcode(ops["copy_only"], "UBLKCP") and not sass.has_opcode(ops["copy_only"], "FFMA")
    assert not sass.has_opcode(ops["copy_only"], "LDS")  # consumers never read the ring
    assert not sass.has_opcode(ops["compute_only"], "UBLKCP") and sass.has_opcode(ops["compute_only"], "FFMA")
    for part in ("copy_only", "compute_only"):  # every wait stays bounded
        assert sass.has_opcode(ops[part], "SYNCS.PHASECHK.TRANS64.TRYWAIT")


def test_ring_parts_are_checked():
    assert ModeConfig("ws", part="copy_only").defines()["DRVTMA_RING_PART"] == 1
    assert "DRVTMA_RING_PART" not in ModeConfig("ws").defines()
    assert "compute only" in ModeConfig("pipeN", part="compute_only").describe()
    with pytest.raises(LaunchError, match="part must be one of"):
        ModeConfig("ws", part="half")
    with pytest.raises(LaunchError, match="splits a working ring"):
        ModeConfig("sync", part="copy_only")
    with pytest.raises(LaunchError, match="splits a working ring"):
        ModeConfig("ws", part="copy_only", fault="expect_tx_low")


def test_probe_sums_must_show_what_the_half_did():
    poisoned = np.full((4, 1, 2), SUMS_POISON, np.uint32)
    written = np.arange(8, dtype=np.uint32).reshape(4, 1, 2)
    copy_only, compute_only = ModeConfig("ws", part="copy_only"), ModeConfig("ws", part="compute_only")
    check_probe_sums(copy_only, poisoned)
    check_probe_sums(compute_only, written)
    with pytest.raises(DrvtmaError, match="must compute nothing"):
        check_probe_sums(copy_only, written)
    half = written.copy()
    half[2] = SUMS_POISON
    with pytest.raises(DrvtmaError, match="1 checksum pair"):
        check_probe_sums(compute_only, half)


def test_floor_rows_name_the_bound():
    row = FloorRow("ws", 1, 0.0028, 0.0064, 0.0147, 0.0155, 0.0287)
    assert row.bound_ms == 0.0147 and row.limit == "compute"
    assert row.best_speedup == pytest.approx(0.0287 / 0.0147) and row.speedup == pytest.approx(0.0287 / 0.0155)
    result = FloorsResult("H200", preset("article"), [row])
    assert "compute" in result.text() and "14.70" in result.text()
    assert result.csv_text().splitlines()[1].startswith("ws,1,0.002800,0.006400,0.014700")


def test_floors_cli_takes_the_sweep_options():
    args = floors_parser().parse_args(["--stages", "2", "--tiles-per-stage", "16", "--split", "warp",
                                       "--ring-threads", "512"])
    cfg = config_from_args(args)
    rings = [m for m in cfg.modes if m.spec.ring]
    assert rings and all((m.stages, m.tiles_per_stage, m.split, m.threads) == (2, 16, "warp", 512) for m in rings)
    assert all(m.threads == 256 for m in cfg.modes if not m.spec.ring)
    assert ring_label(rings[0]) == "pipeN 2x16 warp, 512 thr, 64 tiles/block"
    assert not hasattr(args, "flush_l2") and cfg.flush_l2 is False


@pytest.mark.parametrize("mode,fault", [(m, f) for m, fs in FAULTS_BY_MODE.items() for f in fs])
def test_broken_variants_compile_and_differ(mode, fault, rings_cubin):
    cfg = ModeConfig(mode, fault=fault, wait_timeout_ns=50_000_000)
    cubin = compiler.compile_cubin(cfg.spec.source, defines=cfg.defines())
    kernel = cfg.spec.kernel
    assert sass.functions(cubin)[kernel] != sass.functions(rings_cubin)[kernel]


# ------------------------------------------------------------------------------------------ exact fma

def _exact_fma_f32(a, b, c) -> np.float32:
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    r = np.float32(float(exact))
    cands = [r, np.nextafter(r, np.float32(np.inf)), np.nextafter(r, np.float32(-np.inf))]
    # nearest, ties to the even significand
    return min(cands, key=lambda x: (abs(Fraction(float(x)) - exact), int(np.float32(x).view(np.uint32)) & 1))


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-(2.0**60), max_value=2.0**60)


@given(finite32, finite32, finite32)
def test_fma_f32_rounds_once(a, b, c):
    got = fma_f32(np.float32(a), np.float32(b), np.float32(c))
    want = _exact_fma_f32(np.float32(a), np.float32(b), np.float32(c))
    assert np.float32(got).view(np.uint32) == np.float32(want).view(np.uint32) or (got == 0 and want == 0)


def test_fma_f32_avoids_double_rounding():
    a = np.float32(2**-12 * (1 + 2**-23))
    b = np.float32(2**-12 * (1 - 2**-23))
    c = np.float32(1 + 2**-23)
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive != np.float32(1 + 2**-23)  # the case is real: rounding twice goes wrong here
    assert fma_f32(a, b, c) == np.float32(1 + 2**-23)


def test_burn_fma_matches_its_definition():
    x = np.array([0.5, -0.25, 0.9], dtype=np.float32)
    assert np.all(burn_fma(x, 0) == 0)
    assert np.all(burn_fma(x, 1) == 1)
    assert np.array_equal(burn_fma(x, 2), (x + 1).astype(np.float32))
    assert np.array_equal(burn_fma(x, 3), fma_f32(x, (x + 1).astype(np.float32), np.ones(3, np.float32)))


# ------------------------------------------------------------------------------------------ checksums

def emulate_kernel(inp: TileInput, threads: int, fma_iters: int, tiling: str = "linear", tiles_x: int | None = None,
                   split: str = "thread") -> np.ndarray:
    """What a correct kernel writes: sums[tile, slot, 2]; with the thread split each warp sums its own elements
    (element idx belongs to thread idx % threads), with the warp split one slot holds the whole tile."""
    data = inp.data
    num_tiles = data.size // 1024
    if tiling == "linear":
        tiles = data.reshape(num_tiles, 1024)
        gidx = np.arange(data.size, dtype=np.uint32).reshape(num_tiles, 1024)
    else:
        width = tiles_x * 32
        view = data.reshape(-1, 32, tiles_x, 32).transpose(0, 2, 1, 3)
        tiles = view.reshape(num_tiles, 1024)
        gi = np.arange(data.size, dtype=np.uint32).reshape(-1, 32, tiles_x, 32).transpose(0, 2, 1, 3)
        gidx = gi.reshape(num_tiles, 1024)
        assert width * (data.size // width) == data.size
    bits = tiles.view(np.uint32)
    result = burn_fma(tiles, fma_iters).view(np.uint32)
    with np.errstate(over="ignore"):
        in_terms = (bits ^ (gidx * np.uint32(0x9E3779B9))) * np.uint32(0x85EBCA6B)
        out_terms = (result ^ (gidx * np.uint32(0x7FEB352D))) * np.uint32(0x846CA68B)
    warps = 1 if split == "warp" else threads // 32
    warp_of = np.zeros(1024, int) if split == "warp" else (np.arange(1024) % threads) // 32
    raw = np.zeros((num_tiles, warps, 2), dtype=np.uint32)
    for w in range(warps):
        sel = warp_of == w
        raw[:, w, 0] = in_terms[:, sel].sum(axis=1, dtype=np.uint32)
        raw[:, w, 1] = out_terms[:, sel].sum(axis=1, dtype=np.uint32)
    return raw


@pytest.fixture(scope="module")
def small_input():
    return make_input(32 * 1024, seed=3, pool_size=4096)


@pytest.mark.parametrize("threads", [32, 96, 256, 1024])
@pytest.mark.parametrize("tiling", ["linear", "box"])
def test_reference_matches_an_emulated_kernel(small_input, threads, tiling):
    tiles_x = tiles_x_for(32) if tiling == "box" else None
    exp_in, exp_out = Reference(small_input).sums(5, tiling=tiling, tiles_x=tiles_x)
    raw = emulate_kernel(small_input, threads, 5, tiling, tiles_x)
    check_tile_sums("emulated", raw, exp_in, exp_out, fma_iters=5)


def test_warp_owned_tiles_fold_to_the_same_sums(small_input):
    exp_in, exp_out = Reference(small_input).sums(4)
    raw = emulate_kernel(small_input, 256, 4, split="warp")
    assert raw.shape[1] == 1 == ModeConfig("ws", split="warp").sum_slots
    check_tile_sums("ws", raw, exp_in, exp_out)


def test_reference_from_a_plain_array_equals_the_pooled_one(small_input):
    a = reference_sums(small_input, [0, 7])
    b = reference_sums(TileInput.from_array(small_input.data.copy()), [0, 7])
    assert np.array_equal(a[0], b[0]) and all(np.array_equal(a[1][k], b[1][k]) for k in (0, 7))


def test_every_tiling_has_the_same_total(small_input):
    lin = reference_sums(small_input, [1])[0]
    box = reference_sums(small_input, [1], tiling="box", tiles_x=8)[0]
    assert not np.array_equal(lin, box)  # different tiles...
    assert lin.sum(dtype=np.uint32) == box.sum(dtype=np.uint32)  # ...same bytes
    check_same_total({"sync": emulate_kernel(small_input, 256, 1),
                      "tensor2d": emulate_kernel(small_input, 256, 1, "box", 8)})


def _expected(inp, fma=2):
    return Reference(inp).sums(fma)


def test_a_flipped_bit_names_mode_tile_expected_and_got(small_input):
    raw = emulate_kernel(small_input, 256, 2)
    raw[17, 3, 0] ^= 1 << 9
    with pytest.raises(ChecksumMismatch) as exc:
        check_tile_sums("bulk1d", raw, *_expected(small_input), fma_iters=2)
    text = str(exc.value)
    assert text.startswith("bulk1d:") and "tile 17" in text and "expected 0x" in text and "got 0x" in text
    assert exc.value.tiles == [17]


def test_wrong_bytes_are_caught(small_input):
    exp = _expected(small_input)
    # the data a kernel would have consumed had it read one tile too far
    shifted = TileInput.from_array(np.roll(small_input.data, -1024))
    with pytest.raises(ChecksumMismatch, match="wrong input bytes"):
        check_tile_sums("pipe2", emulate_kernel(shifted, 256, 2), *exp)
    # two elements swapped inside one tile: same bytes, wrong places
    swapped = small_input.data.copy()
    swapped[[5 * 1024 + 3, 5 * 1024 + 700]] = swapped[[5 * 1024 + 700, 5 * 1024 + 3]]
    with pytest.raises(ChecksumMismatch) as exc:
        check_tile_sums("tensor2d", emulate_kernel(TileInput.from_array(swapped), 256, 2), *exp)
    assert exc.value.tiles == [5]


def test_wrong_fma_results_are_caught(small_input):
    exp_in, exp_out = Reference(small_input).sums(3)
    with pytest.raises(ChecksumMismatch, match="wrong FMA results"):
        check_tile_sums("ws", emulate_kernel(small_input, 128, 2), exp_in, exp_out, fma_iters=3)


def test_an_unwritten_tile_keeps_the_poison_and_is_named(small_input):
    raw = emulate_kernel(small_input, 256, 2)
    raw[31, 6, :] = SUMS_POISON
    with pytest.raises(ChecksumMismatch, match=r"tile 31: .*warp\(s\) \[6\] never wrote this tile"):
        check_tile_sums("sync", raw, *_expected(small_input))


def test_disagreeing_totals_are_caught(small_input):
    good = emulate_kernel(small_input, 256, 1)
    bad = good.copy()
    bad[0, 0, 0] += np.uint32(1)
    with pytest.raises(ChecksumMismatch, match="disagree on the total"):
        check_same_total({"sync": good, "bulk1d": bad})


def test_make_input_has_no_zeros_and_stays_finite():
    inp = make_input(4096, seed=9)
    assert np.all(inp.data != 0) and np.all(np.abs(inp.data) < 1)
    assert np.all(np.isfinite(burn_fma(inp.pool[:64], 256)))
    assert np.array_equal(inp.pool[inp.codes], inp.data)


# ------------------------------------------------------------------------------------------ sweep format

def synthetic_result(modes=ALL_MODES, fma=(1, 2, 256)) -> SweepResult:
    cfg = SweepConfig(4_194_304, tuple(fma), tuple(ModeConfig(m) for m in modes), runs=3, warmups=1,
                      preset="article")
    rows = []
    for k in fma:
        timings = {m: Timing((0.01 * k * (i + 1), 0.012 * k * (i + 1), 0.011 * k * (i + 1)))
                   for i, m in enumerate(modes)}
        rows.append(SweepRow(k, timings))
    return SweepResult(cfg, rows, device="synthetic", verified=True)


def test_csv_of_the_article_modes_has_the_article_header():
    text = csv_text(synthetic_result(("sync", "bulk1d", "tensor2d", "pipe2")))
    header = text.splitlines()[0]
    assert header.startswith(ARTICLE_CSV_HEADER + ",")
    assert header.split(",")[8:] == ["sync_p95_ms", "bulk1d_p95_ms", "tensor2d_p95_ms", "pipe2_p95_ms"]


def test_csv_with_new_modes_keeps_the_article_columns_first():
    header = csv_text(synthetic_result()).splitlines()[0].split(",")
    assert ",".join(header[:8]) == ARTICLE_CSV_HEADER
    assert header[8:12] == ["pipeN_ms", "ws_ms", "speedup_pipeN", "speedup_ws"]


def test_csv_adds_new_modes_and_computes_speedups_vs_sync():
    result = synthetic_result(("ws", "sync", "pipe2", "pipeN"))  # any order in, article order out
    rows = list(csv.DictReader(io.StringIO(csv_text(result))))
    # article modes in the article's order, then the others in the order they ran
    assert csv_columns(result)[:8] == ["fma_iters", "sync_ms", "pipe2_ms", "speedup_pipe2", "ws_ms", "pipeN_ms",
                                       "speedup_ws", "speedup_pipeN"]
    assert [r["fma_iters"] for r in rows] == ["1", "2", "256"]
    for r, row in zip(rows, result.rows):
        for m in ("pipe2", "ws", "pipeN"):
            assert float(r[f"speedup_{m}"]) == pytest.approx(float(r["sync_ms"]) / float(r[f"{m}_ms"]), rel=1e-3)
        assert float(r["ws_ms"]) == pytest.approx(row.timings["ws"].median, abs=1e-6)
        assert float(r["ws_p95_ms"]) == pytest.approx(row.timings["ws"].p95, abs=1e-6)
    assert "speedup_sync" not in rows[0]


def test_csv_without_sync_has_no_speedups():
    assert not any(c.startswith("speedup") for c in csv_columns(synthetic_result(("ws", "pipeN"))))


def test_table_and_markdown_show_every_mode_and_speedup():
    result = synthetic_result()
    table = table_text(result)
    for m in ALL_MODES:
        assert f"{m} ms" in table
    assert "x ws" in table and "x sync" not in table
    md = markdown_text(result)
    assert md.startswith("# drvtma sweep --preset article")
    assert "| fma_iters" in md and "per-tile checksums" in md and "p95" in md
    assert f"{result.rows[0].timings['sync'].median / result.rows[0].timings['ws'].median:.3f}" in md


def reference_like_result(scale: dict[str, float], n: int = 4_194_304) -> SweepResult:
    modes = ("sync", "bulk1d", "tensor2d", "pipe2")
    cfg = SweepConfig(n, ARTICLE_FMA, tuple(ModeConfig(m) for m in modes), preset="article")
    rows = [SweepRow(k, {m: Timing((ms * scale.get(m, 1.0),)) for m, ms in zip(modes, REFERENCE_H200_MS[k])})
            for k in ARTICLE_FMA]
    return SweepResult(cfg, rows, verified=True)


def test_reference_comparison_flags_modes_off_by_more_than_10_percent():
    same = reference_text(reference_like_result({"pipe2": 1.05}))
    assert "(0 such cell(s))" in same and "1.050" in same
    off = reference_text(reference_like_result({"tensor2d": 0.85}))
    assert "(9 such cell(s))" in off and "0.850 *" in off
    assert "0.850 *" in markdown_text(reference_like_result({"tensor2d": 0.85}))
    assert "5090 pipe2" in markdown_text(reference_like_result({}))


def test_targets_name_the_best_ring_and_the_slow_modes():
    modes = ("sync", "bulk1d", "pipeN", "ws")
    cfg = SweepConfig(4_194_304, (1, 256), tuple(ModeConfig(m) for m in modes))
    rows = [SweepRow(1, {"sync": Timing((0.036,)), "bulk1d": Timing((0.042,)), "pipeN": Timing((0.015,)),
                         "ws": Timing((0.010,))}),
            SweepRow(256, {"sync": Timing((0.924,)), "bulk1d": Timing((0.9648,)), "pipeN": Timing((0.93,)),
                           "ws": Timing((0.92,))})]
    text = targets_text(SweepResult(cfg, rows))
    assert "best ring mode ws at 3.60x sync (meets the 3x target)" in text
    assert "more than 5% slower than sync: none" in text
    rows[1].timings["pipeN"] = Timing((0.98,))
    rows[0].timings["ws"] = Timing((0.02,))
    text = targets_text(SweepResult(cfg, rows))
    assert "best ring mode pipeN at 2.40x sync (misses" in text and "pipeN (0.943x)" in text
    assert "cuMemcpyDtoD" not in text


def test_targets_compare_the_best_read_rate_with_the_copy_rate():
    cfg = SweepConfig(1 << 28, (1, 256), tuple(ModeConfig(m) for m in ("sync", "bulk1d", "ws")))
    rows = [SweepRow(k, {"sync": Timing((0.31,)), "bulk1d": Timing((0.33,)), "ws": Timing((t,))})
            for k, t in ((1, 0.25), (256, 0.9))]
    result = SweepResult(cfg, rows, copy_gbs=4200.0)
    gbs = (1 << 30) / 0.25e-3 / 1e9
    assert f"best TMA mode ws reads {gbs:.0f} GB/s = {gbs / 4200:.3f}" in targets_text(result)
    assert "meets the 95% target" in targets_text(result)
    assert "cuMemcpyDtoD in the same run: 4200 GB/s" in markdown_text(result)
    result.copy_gbs = 4600.0
    assert "misses the 95% target" in targets_text(result)


def test_reference_comparison_only_for_the_reference_configuration():
    assert reference_text(reference_like_result({}, n=1 << 20)) == ""


@given(st.lists(st.floats(0.001, 100, allow_nan=False), min_size=1, max_size=40), st.sampled_from([0, 50, 95, 100]))
def test_percentile_is_numpys_linear_percentile(samples, p):
    assert percentile(samples, p) == pytest.approx(float(np.percentile(samples, p)), rel=1e-9, abs=1e-12)


def test_timing_median_and_p95():
    t = Timing((5.0, 1.0, 3.0, 2.0, 4.0))
    assert t.median == 3.0 and t.p95 == pytest.approx(4.8) and t.best == 1.0


# ------------------------------------------------------------------------------------------ presets and CLI

def test_article_preset_is_the_articles_configuration():
    cfg = preset("article")
    assert cfg.n == 4_194_304 and cfg.fma_list == ARTICLE_FMA and cfg.runs == 7 and cfg.warmups == 2
    for m in cfg.modes:
        assert m.threads == 256 and m.tiles_per_block == 64 and m.grid(cfg.n // 1024) == 64
    assert [m.mode for m in cfg.modes][:4] == ["sync", "bulk1d", "tensor2d", "pipe2"]


def test_hbm_preset_reads_1_gib_over_every_sm():
    cfg = preset("hbm", sm_count=132)
    assert cfg.n * 4 == 1 << 30
    tiles = cfg.n // 1024
    for m in cfg.modes:
        if m.spec.ring:
            assert 132 < m.grid(tiles) <= 132 * 2  # every SM, two blocks each (the roof's best shape)
            assert (m.grid(tiles) - 1) * m.tiles_per_block < tiles <= m.grid(tiles) * m.tiles_per_block
            assert m.split == "warp" and m.tiles_per_stage == m.consumer_warps  # no consumer warp idles
        else:
            assert m.grid(tiles) == 4096
    assert cfg.measure_copy and not preset("article").measure_copy


def test_cli_options_override_the_preset():
    args = sweep_parser().parse_args(["--modes", "sync,ws", "--fma", "1,8", "--runs", "3", "--stages", "5",
                                      "--tiles-per-stage", "3", "--threads", "128", "--flush-l2", "--n", "1048576"])
    cfg = config_from_args(args)
    assert cfg.fma_list == (1, 8) and cfg.runs == 3 and cfg.flush_l2 and cfg.n == 1 << 20
    ws = cfg.modes[1]
    assert (ws.mode, ws.stages, ws.tiles_per_stage, ws.threads, ws.block_threads) == ("ws", 5, 3, 128, 160)
    assert cfg.modes[0].threads == 128


def test_cli_rejects_unknown_modes():
    with pytest.raises(SystemExit):
        sweep_parser().parse_args(["--modes", "sync,warp9"])


# ------------------------------------------------------------------------------------------ guards

def test_n_must_be_whole_tiles():
    assert check_problem_size(4096) == 4
    with pytest.raises(LaunchError, match=r"not a multiple of the 1024-element tile.*pass 4096 or 5120"):
        check_problem_size(4096 + 100)
    with pytest.raises(LaunchError):
        check_problem_size(0)


@pytest.mark.parametrize("mode", ["bulk1d", "pipe2", "pipeN", "ws", "tensor2d"])
def test_tma_modes_refuse_addresses_off_16_bytes(mode):
    check_alignment(mode, 0x7F0000000000)
    for off in (4, 8, 12):
        with pytest.raises(LaunchError, match="16-byte|multiple of 16"):
            check_alignment(mode, 0x7F0000000000 + off)


def test_sync_needs_only_4_byte_alignment():
    check_alignment("sync", 0x7F0000000004)
    with pytest.raises(LaunchError):
        check_alignment("sync", 0x7F0000000002)


def test_mode_config_checks():
    assert ModeConfig("pipe2").stages == 2 and ModeConfig("sync").stages == 1
    assert ModeConfig("ws").block_threads == 288 and ModeConfig("ws", stages=3, tiles_per_stage=2).smem_bytes == 24576
    with pytest.raises(LaunchError, match="only pipeN and ws"):
        ModeConfig("pipe2", stages=3)
    with pytest.raises(LaunchError, match="shared memory"):
        ModeConfig("ws", stages=16, tiles_per_stage=4)
    with pytest.raises(LaunchError, match="multiple of 32"):
        ModeConfig("sync", threads=100)
    with pytest.raises(LaunchError, match="exceed 1024"):
        ModeConfig("ws", threads=1024)
    with pytest.raises(LaunchError, match="no fault"):
        ModeConfig("bulk1d", fault="expect_tx_low")
    with pytest.raises(LaunchError, match="no fault"):
        ModeConfig("pipeN", fault="wrong_parity")
    with pytest.raises(LaunchError, match="unknown mode"):
        ModeConfig("pipe3")
    with pytest.raises(LaunchError, match="only pipeN and ws take split"):
        ModeConfig("pipe2", split="warp")
    assert ModeConfig("pipeN", threads=128).sum_slots == 4 and ModeConfig("pipeN", split="warp").sum_slots == 1


def test_tiles_x_follows_the_article():
    assert tiles_x_for(4096) == 64  # 2048 x 2048
    assert tiles_x_for(262144) == 512
    assert tiles_x_for(6) == 2 and tiles_x_for(7) == 1


def test_every_mode_is_described():
    for name, m in MODES.items():
        assert m.name == name and m.summary and m.tiling in ("linear", "box")


# ------------------------------------------------------------------------------------------ ring model

@given(st.integers(1, 16), st.integers(0, 500))
def test_wait_formulas(stages, i):
    f, e = ring.full_wait(i, stages), ring.empty_wait(i, stages)
    assert f.stage == e.stage == i % stages
    assert f.parity == (i // stages) % 2 and e.parity == 1 - f.parity
    if i >= stages:  # a stage's parity flips once per lap
        assert ring.full_wait(i - stages, stages).parity != f.parity


def test_fresh_barrier_reports_phase_1_complete():
    bar = ring.MBarrier(2)
    assert bar.try_wait(1) and not bar.try_wait(0)
    bar.arrive()
    assert not bar.try_wait(0)
    bar.arrive()
    assert bar.try_wait(0) and not bar.try_wait(1)


def test_mbarrier_needs_both_arrivals_and_bytes():
    bar = ring.MBarrier(1)
    bar.arrive_expect_tx(64)
    assert not bar.try_wait(0)
    bar.complete_tx(48)
    assert not bar.try_wait(0)
    bar.complete_tx(16)
    assert bar.try_wait(0)


ring_shapes = st.tuples(st.integers(1, 8), st.integers(0, 20), st.integers(1, 4), st.integers(1, 4))


def _run(sim: ring.RingSimulation, data) -> ring.Outcome:
    return sim.run(lambda options: data.draw(st.sampled_from(options)))


@settings(max_examples=200)
@given(ring_shapes, st.data())
def test_correct_ring_consumes_every_tile_once_in_order(shape, data):
    stages, count, per_stage, consumers = shape
    out = _run(ring.RingSimulation(stages, count, per_stage, consumers, tile_bytes=64, first_tile=7), data)
    assert out.status == "ok", out.detail
    fills = [7 + i * per_stage for i in range(ring.iterations(count, per_stage))]
    assert out.consumed == [fills] * consumers
    assert out.producer_trace == ring.expected_trace("producer", 7, count, stages, per_stage)
    assert out.consumer_trace == [ring.expected_trace("consumer", 7, count, stages, per_stage)] * consumers


HANG_FAULTS = ("expect_tx_low", "expect_tx_high", "missing_release", "missing_arrive", "producer_parity")


@settings(max_examples=200)
@given(ring_shapes.filter(lambda s: ring.iterations(s[1], s[2]) > s[0]), st.sampled_from(HANG_FAULTS), st.data())
def test_each_broken_protocol_hangs_in_every_interleaving(shape, fault, data):
    stages, count, per_stage, consumers = shape
    out = _run(ring.RingSimulation(stages, count, per_stage, consumers, tile_bytes=64, fault=fault), data)
    assert out.status == "deadlock", (out.status, out.detail)
    assert out.stuck and all(bar in ("full", "empty") for bar, _, _ in out.stuck)


def test_missing_release_is_invisible_when_the_ring_never_wraps():
    out = ring.RingSimulation(4, 3, 1, 2, tile_bytes=64, fault="missing_release").run(lambda o: o[0])
    assert out.status == "ok"


def test_consumers_on_the_wrong_parity_read_stale_data():
    outcomes = set()
    for seed in range(50):
        rng = random.Random(seed)
        out = ring.RingSimulation(2, 6, 1, 1, tile_bytes=64, fault="consumer_parity").run(rng.choice)
        outcomes.add(out.status)
    assert "ok" not in outcomes and "hazard" in outcomes


def test_announcing_16_bytes_too_few_can_complete_early():
    """Why the kernels' broken variants miss by 8: a deficit of whole granules can end the phase mid-copy."""
    sim = ring.RingSimulation(1, 2, 1, 1, tile_bytes=64)
    sim.full[0].arrive_expect_tx(48)  # what a 16-byte deficit would announce for the first fill
    sim.full[0].complete_tx(48)  # three of the four granules landed
    assert sim.full[0].try_wait(0)  # the consumers would read a partial tile


def _trace_array(blocks, roles, capacity, records):
    raw = np.full((blocks, roles, capacity, 2), 0xFFFFFFFF, dtype=np.uint32)
    for (b, r), recs in records.items():
        for i, rec in enumerate(recs):
            raw[b, r, i] = (rec.stage | rec.parity << 16, rec.tile)
    return raw


def _model_trace(num_tiles, tpb, stages, per_stage, consumers, producer):
    blocks = -(-num_tiles // tpb)
    capacity = -(-tpb // per_stage)
    records = {}
    for b in range(blocks):
        first, count = ring.block_tiles(b, num_tiles, tpb)
        for r in range(consumers):
            records[(b, r)] = ring.expected_trace("consumer", first, count, stages, per_stage)
        if producer:
            records[(b, consumers)] = ring.expected_trace("producer", first, count, stages, per_stage)
    return _trace_array(blocks, consumers + producer, capacity, records)


TRACE_KW = dict(stages=3, tiles_per_stage=2, num_tiles=23, tiles_per_block=10, consumer_roles=2, producer=True)


def test_a_model_trace_passes():
    ring.check_trace(_model_trace(23, 10, 3, 2, 2, True), **TRACE_KW)


@pytest.mark.parametrize("damage,match", [
    (lambda raw: raw[1, 0, 2].__setitem__(0, raw[1, 0, 2, 0] ^ (1 << 16)), "block 1 consumer 0 iteration 2"),
    (lambda raw: raw[0, 2, 4].__setitem__(1, 999), "block 0 producer 2 iteration 4"),
    (lambda raw: raw[2, 1, 1].__setitem__(slice(None), 0xFFFFFFFF), "recorded nothing"),
    (lambda raw: raw[2, 1, 3].__setitem__(slice(None), 5), "recorded after its 2 iterations"),
])
def test_trace_damage_is_named(damage, match):
    raw = _model_trace(23, 10, 3, 2, 2, True)
    damage(raw)
    with pytest.raises(ring.TraceMismatch, match=match):
        ring.check_trace(raw, **TRACE_KW)


def test_every_kernel_fault_has_a_model():
    assert {(m, f) for m, fs in FAULTS_BY_MODE.items() for f in fs} == set(RING_MODEL_FAULT)


@pytest.mark.parametrize("mode,fault", sorted(RING_MODEL_FAULT))
def test_predicted_timeouts_of_the_gpu_tests_broken_shape(mode, fault):
    cfg = ModeConfig(mode, fault=fault, stages=2, tiles_per_stage=1, tiles_per_block=5, threads=128)
    predicted = predicted_timeouts(cfg, 18)
    assert predicted and all(bar in (0, 1) and 0 <= s < 2 and p in (0, 1) for bar, s, p in predicted)
    if mode == "pipeN":
        assert predicted == {(0, 0, 0)}  # the first fill of stage 0 never completes
    if fault == "wrong_parity":
        assert (1, 0, 0) in predicted  # the producer waits on phase 0 of a fresh empty barrier
    assert predicted_timeouts(cfg.with_(fault=None), 18) == set()


# ------------------------------------------------------------------------------------------ roof helpers

def test_ring_configs_fit_an_sm():
    configs = ring_configs(262144, 132)
    assert {c.mode for c, _ in configs} == {"pipeN", "ws"} and {c.split for c, _ in configs} == {"thread", "warp"}
    for cfg, bps in configs:
        assert bps * (cfg.smem_bytes + 2048) <= 228 * 1024 and bps * cfg.block_threads <= 2048
        assert cfg.grid(262144) <= 132 * bps
        if cfg.split == "warp":
            assert cfg.tiles_per_stage % cfg.consumer_warps == 0  # no idle consumer warp
    shapes = {(c.mode, c.split, c.stages, c.tiles_per_stage, bps) for c, bps in configs}
    assert ("ws", "warp", 2, 8, 2) in shapes and ("pipeN", "warp", 2, 16, 1) in shapes


def test_knees_are_per_mode_and_split():
    pts = [RoofPoint("a", "ws", 2, 8, 1, kib * 1024, 1.0, gbs, split=split) for kib, gbs, split in
           ((32, 3000, "thread"), (64, 3900, "thread"), (64, 4200, "warp"), (128, 4250, "warp"))]
    k = knees(pts)
    assert set(k) == {"ws (thread split)", "ws (warp split)"}
    assert k["ws (thread split)"].in_flight_per_sm == 64 * 1024 and k["ws (warp split)"].in_flight_per_sm == 64 * 1024


def test_knee_is_the_least_in_flight_near_the_best():
    pts = [RoofPoint("a", "ws", 2, 1, 1, kib * 1024, 1.0, gbs) for kib, gbs in
           ((8, 1000), (16, 2500), (32, 3700), (64, 3900), (128, 4000))]
    assert knees(pts)["ws"].in_flight_per_sm == 32 * 1024


def test_blocks_by_registers():
    assert blocks_by_registers(43, 288) == 65536 // (9 * 1536)  # 43 -> 48 per thread, 1536 per warp, 9 warps
    assert blocks_by_registers(32, 256) == 8 and blocks_by_registers(255, 1024) == 0


def test_sweep_times_behind_a_stream_hold_unless_asked_not_to():
    assert config_from_args(sweep_parser().parse_args([])).head_start_ns == HEAD_START_NS > 0
    assert config_from_args(sweep_parser().parse_args(["--hold-us", "0"])).head_start_ns == 0
    assert "stream hold" in markdown_text(SweepResult(preset("article")))
