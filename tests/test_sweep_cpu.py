"""CPU side of the sweeps: output in the article's format, the reference comparison, targets, timing
statistics, presets and the command line."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drvtma.b08.modes import ALL_MODES, ModeConfig
from drvtma.b08.sweep import (
    ARTICLE_FMA,
    REFERENCE_H200_MS,
    SweepConfig,
    SweepResult,
    SweepRow,
    csv_columns,
    csv_text,
    markdown_text,
    measurements_text,
    preset,
    reference_text,
    table_text,
)
from drvtma.cli.bench import config_from_args, sweep_parser
from drvtma.runtime.timing import Timing, percentile

ARTICLE_CSV_HEADER = ("fma_iters,sync_ms,bulk1d_ms,tensor2d_ms,pipe2_ms,speedup_bulk1d,speedup_tensor2d,"
                      "speedup_pipe2")


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


def test_measurements_name_the_best_ring_and_the_slow_modes():
    modes = ("sync", "bulk1d", "pipeN", "ws")
    cfg = SweepConfig(4_194_304, (1, 256), tuple(ModeConfig(m) for m in modes))
    rows = [SweepRow(1, {"sync": Timing((0.036,)), "bulk1d": Timing((0.042,)), "pipeN": Timing((0.015,)),
                         "ws": Timing((0.010,))}),
            SweepRow(256, {"sync": Timing((0.924,)), "bulk1d": Timing((0.9648,)), "pipeN": Timing((0.93,)),
                           "ws": Timing((0.92,))})]
    text = measurements_text(SweepResult(cfg, rows))
    assert "best ring mode ws at 3.60x sync\n" in text and "target" not in text
    assert "more than 5% slower than sync: none" in text
    rows[1].timings["pipeN"] = Timing((0.98,))
    rows[0].timings["ws"] = Timing((0.02,))
    text = measurements_text(SweepResult(cfg, rows))
    assert "best ring mode pipeN at 2.40x sync\n" in text and "pipeN (0.943x)" in text
    assert "cuMemcpyDtoD" not in text


def test_the_best_read_rate_is_stated_against_the_copy_rate():
    cfg = SweepConfig(1 << 28, (1, 256), tuple(ModeConfig(m) for m in ("sync", "bulk1d", "ws")))
    rows = [SweepRow(k, {"sync": Timing((0.31,)), "bulk1d": Timing((0.33,)), "ws": Timing((t,))})
            for k, t in ((1, 0.25), (256, 0.9))]
    result = SweepResult(cfg, rows, copy_gbs=4200.0)
    gbs = (1 << 30) / 0.25e-3 / 1e9
    assert f"best TMA mode ws reads {gbs:.0f} GB/s = {gbs / 4200:.3f}" in measurements_text(result)
    assert "cuMemcpyDtoD in the same run: 4200 GB/s" in markdown_text(result)
    result.copy_gbs = 4600.0
    assert f"= {gbs / 4600:.3f} of the cuMemcpyDtoD rate 4600 GB/s" in measurements_text(result)


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
