"""The CPU ring model: parity formulas, the barrier simulation and the trace check the GPU tests rely on."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drvtma.b08 import ring
from drvtma.b08.modes import FAULTS_BY_MODE, RING_MODEL_FAULT, ModeConfig, predicted_timeouts
from drvtma.b08.roof import RoofPoint, blocks_by_registers, knees, ring_configs
from drvtma.b08.sweep import SweepResult, markdown_text, preset
from drvtma.cli.bench import config_from_args, sweep_parser
from drvtma.runtime.timing import HEAD_START_NS

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


@pytest.mark.slow
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
