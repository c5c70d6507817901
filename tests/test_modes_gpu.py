"""The B-08 modes on a Hopper GPU: every mode verified against NumPy, wrong bytes and misaligned inputs refused,
a small sweep, each deliberately broken ring ending in BarrierTimeout (and the context still working), and the
ring's phase bookkeeping checked with hypothesis against drvtma.ring's model, trace by trace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from drvtma.b08 import ring
from drvtma.b08.modes import ALL_MODES, BARRIER_NAMES, RING_MODEL_FAULT, B08Runner, ModeConfig, predicted_timeouts
from drvtma.b08.sweep import SweepConfig, csv_columns, csv_text, run_sweep
from drvtma.b08.verify import ChecksumMismatch, Reference, TileInput, check_same_total, make_input
from drvtma.errors import BarrierTimeout, LaunchError
from drvtma.runtime.status import STATUS_SLOTS

pytestmark = pytest.mark.gpu

# 1000 tiles: 16 blocks of 64 (the last one 40), and a 2D view of 25 x 40 boxes for tensor2d
N_TILES = 1000


@pytest.fixture(scope="module")
def runner(ctx):
    r = B08Runner.upload(make_input(N_TILES * 1024, seed=11))
    yield r
    r.close()


def default_config(mode: str, **kw) -> ModeConfig:
    if ModeConfig(mode).spec.ring:
        kw.setdefault("stages", 3)
        kw.setdefault("tiles_per_stage", 2)
    return ModeConfig(mode, **kw)


@pytest.mark.parametrize("fma_iters", [0, 1, 5, 64])
@pytest.mark.parametrize("mode", ALL_MODES)
def test_every_mode_matches_numpy(runner, mode, fma_iters):
    runner.run_checked(default_config(mode), fma_iters)


@pytest.mark.parametrize("mode", ["pipeN", "ws"])
def test_warp_owned_tiles_match_numpy(runner, mode):
    runner.run_checked(default_config(mode, split="warp", stages=4, tiles_per_stage=8), 7)


def test_all_modes_consumed_the_same_bytes(runner):
    check_same_total({m: runner.run_checked(default_config(m), 3) for m in ALL_MODES})


@pytest.mark.parametrize("mode", ["sync", "bulk1d", "ws"])
def test_a_mode_reading_the_wrong_bytes_fails_loudly(ctx, mode):
    from drvtma.runtime.driver import DeviceBuffer

    inp = make_input(64 * 1024, seed=5)
    data = np.concatenate([inp.data, make_input(1024, seed=6).data])
    with DeviceBuffer.from_array(data) as buf:
        # the kernel reads from one tile further than the reference assumes
        shifted = B08Runner(buf, inp.n, offset_bytes=4096, reference=Reference(inp))
        with pytest.raises(ChecksumMismatch, match=rf"^{mode}: 64 of 64 tiles fail .*wrong input bytes"):
            shifted.run_checked(default_config(mode, tiles_per_block=16), 2)
        shifted.close()


def test_misaligned_input_is_refused_before_launch_and_sync_still_runs(ctx):
    from drvtma.runtime.driver import DeviceBuffer

    host = make_input(16 * 1024 + 1, seed=8).data
    view = TileInput.from_array(host[1:])
    with DeviceBuffer.from_array(host) as buf:
        r = B08Runner(buf, view.n, offset_bytes=4, reference=Reference(view))
        for mode in ("bulk1d", "tensor2d", "pipe2", "pipeN", "ws"):
            with pytest.raises(LaunchError, match="16"):
                r.run_checked(default_config(mode, tiles_per_block=4), 1)
        r.run_checked(ModeConfig("sync", tiles_per_block=4), 1)  # ordinary loads need 4 bytes only
        r.close()


def test_n_off_the_tile_is_refused(ctx):
    from drvtma.runtime.driver import DeviceBuffer

    with DeviceBuffer(8192 * 4) as buf:
        with pytest.raises(LaunchError, match="not a multiple of the 1024-element tile"):
            B08Runner(buf, 5000)


def test_small_sweep(ctx):
    modes = tuple(default_config(m, tiles_per_block=8) for m in ALL_MODES)
    cfg = SweepConfig(n=128 * 1024, fma_list=(1, 4), modes=modes, runs=2, warmups=1, flush_l2=True)
    result = run_sweep(cfg, progress=None)
    assert [r.fma_iters for r in result.rows] == [1, 4] and result.verified
    lines = csv_text(result).splitlines()
    assert lines[0].split(",") == csv_columns(result) and len(lines) == 3
    for row in result.rows:
        assert all(t.median > 0 and len(t.samples) == 2 for t in row.timings.values())


@pytest.mark.parametrize("mode", ["pipeN", "ws"])
@pytest.mark.parametrize("split", ["thread", "warp"])
def test_ring_halves_do_their_half(runner, mode, split):
    """Copy-only leaves every sum poisoned, compute-only writes them all (check_probe_sums), neither times out,
    and the runner refuses to verify a half."""
    from drvtma.b08.floors import check_probe_sums

    for part in ("copy_only", "compute_only"):
        cfg = default_config(mode, split=split, part=part)
        check_probe_sums(cfg, runner.run_checked(cfg, 3, verify=False))
        with pytest.raises(LaunchError, match="no checkable sums"):
            runner.run_checked(cfg, 3)
    runner.run_checked(default_config(mode, split=split), 3)  # the full ring, same shape, verifies


def test_floors_of_a_small_configuration(ctx):
    from drvtma.b08.floors import run_floors

    modes = (ModeConfig("sync", tiles_per_block=8),
             ModeConfig("ws", tiles_per_block=8, stages=2, tiles_per_stage=4))
    result = run_floors(SweepConfig(n=128 * 1024, fma_list=(1, 16), modes=modes, runs=3, warmups=1), progress=None)
    assert [(r.ring.split()[0], r.fma_iters) for r in result.rows] == [("ws", 1), ("ws", 16)]
    for r in result.rows:
        assert min(r.launch_ms, r.copy_ms, r.compute_ms, r.full_ms, r.sync_ms) > 0
    assert "best x sync" in result.text()


# ------------------------------------------------------------------------------------------ broken rings

BROKEN_SHAPE = dict(stages=2, tiles_per_stage=1, tiles_per_block=5, threads=128)
BROKEN_TILES = 18  # 4 blocks; the last has 3 tiles: every block laps its 2-stage ring


@pytest.fixture(scope="module")
def broken_runner(ctx):
    r = B08Runner.upload(make_input(BROKEN_TILES * 1024, seed=2))
    yield r
    r.close()


@pytest.mark.parametrize("mode,fault", sorted(RING_MODEL_FAULT))
def test_broken_ring_ends_in_barrier_timeout(broken_runner, mode, fault):
    cfg = ModeConfig(mode, fault=fault, wait_timeout_ns=100_000_000, **BROKEN_SHAPE)
    with pytest.raises(BarrierTimeout) as exc:
        broken_runner.run_checked(cfg, 1)
    e = exc.value
    assert cfg.spec.kernel in e.kernel and e.count >= 1
    assert 0 <= e.block < cfg.grid(BROKEN_TILES)
    predicted = predicted_timeouts(cfg, BROKEN_TILES)
    assert 1 <= len(e.waits) <= min(e.count, STATUS_SLOTS)
    assert [w.since_ns for w in e.waits] == sorted(w.since_ns for w in e.waits)
    for w in e.waits:  # every recorded wait, not just the first, is one the model says hangs
        assert (w.barrier, w.stage, w.parity) in predicted, (
            f"reported {BARRIER_NAMES.get(w.barrier)}[{w.stage}] parity {w.parity}; the model's stuck waits: "
            f"{sorted(predicted)}")
        assert 0 <= w.block < cfg.grid(BROKEN_TILES) and 0 <= w.thread < cfg.block_threads
    assert (e.barrier, e.stage, e.parity) == e.waits[0][2:5] and "the first to begin" in str(e)
    # the context survived: the same shape without the fault runs and verifies
    broken_runner.run_checked(cfg.with_(fault=None), 1)


# ------------------------------------------------------------------------------------------ phase properties

@st.composite
def ring_launches(draw):
    mode = draw(st.sampled_from(["pipeN", "ws"]))
    stages = draw(st.integers(1, 8))
    per_stage = draw(st.integers(1, 4))
    threads = draw(st.sampled_from([32, 64, 128, 256]))
    tiles_per_block = draw(st.integers(1, 24))
    blocks = draw(st.integers(1, 4))
    last = draw(st.integers(1, tiles_per_block))
    num_tiles = (blocks - 1) * tiles_per_block + last
    fma = draw(st.integers(0, 3))
    cfg = ModeConfig(mode, threads=threads, tiles_per_block=tiles_per_block, stages=stages,
                     tiles_per_stage=per_stage, split=draw(st.sampled_from(["thread", "warp"])))
    return cfg, num_tiles, fma, draw(st.integers(0, 2**16))


def _launch(mode, stages, per_stage, tiles_per_block, num_tiles, threads=128, split="thread"):
    cfg = ModeConfig(mode, threads=threads, tiles_per_block=tiles_per_block, stages=stages,
                     tiles_per_stage=per_stage, split=split)
    return cfg, num_tiles, 1, 7


@given(ring_launches())
@example(_launch("ws", 8, 1, 3, 7))  # fewer fills than stages, last block shorter
@example(_launch("ws", 3, 2, 13, 26, split="warp"))  # 7 fills per block: not a multiple of 3, last one partial
@example(_launch("pipeN", 1, 1, 9, 9))  # a one-stage ring flips parity every fill
@example(_launch("pipeN", 5, 3, 24, 96, threads=32, split="warp"))
def test_ring_phases_follow_the_model(ctx, launch):
    cfg, num_tiles, fma, seed = launch
    r = B08Runner.upload(make_input(num_tiles * 1024, seed=seed, pool_size=1024))
    try:
        trace = r.new_trace(cfg)
        r.run_checked(cfg, fma, trace=trace)  # every tile consumed, right data, no timeout
        ring.check_trace(trace.download(), stages=cfg.stages, tiles_per_stage=cfg.tiles_per_stage,
                         num_tiles=num_tiles, tiles_per_block=cfg.tiles_per_block,
                         consumer_roles=cfg.consumer_warps, producer=cfg.spec.producer_warp)
        trace.buffer.close()
    finally:
        r.close()
