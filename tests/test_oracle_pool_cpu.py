"""The oracle on worker processes (`--oracle-workers`): the same images, the same campaign, nothing left behind."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import numpy as np
import pytest

from drvtma.errors import ArgumentError, TensorMapError
from drvtma.fuzz.campaign import WORKERS_PHASE, build_case, run_campaign
from drvtma.fuzz.loads import LoadsTarget
from drvtma.fuzz.oracle_pool import OraclePool
from drvtma.fuzz.targets import get_target

SEED = 5


@pytest.mark.parametrize("slot_bytes, room", [(32 << 20, "shm"), pytest.param(4096, "shm", marks=pytest.mark.slow),
                                              pytest.param(32 << 20, "tmp", marks=pytest.mark.slow),
                                              pytest.param(32 << 20, None, marks=pytest.mark.slow)])
def test_workers_prepare_the_campaigns_own_cases_and_leave_no_file(slot_bytes, room, monkeypatch, tmp_path):
    """Cases prepared by two workers, through the mapped slots, a batch's own file (a 4 KiB slot: every batch),
    the temporary directory (/dev/shm full) or the pipe (no room anywhere), are the cases, labels, coverage classes
    and images the campaign's own process makes; close() removes every file."""
    import drvtma.fuzz.oracle_pool as pool_module

    real = pool_module.shutil.disk_usage
    monkeypatch.setattr(pool_module.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(pool_module.shutil, "disk_usage", lambda path: SimpleNamespace(free=0) if (
        room is None or (room == "tmp" and str(path) == "/dev/shm")) else real(path))
    if slot_bytes < 1 << 20:  # every batch in a file of its own, beside the slots: here, where the test can look
        monkeypatch.setattr(pool_module, "slot_directory", lambda need: str(tmp_path))
    target = get_target("loads")
    options = target.configure(data_seed=SEED, max_boxes=12)
    host = np.random.default_rng(SEED).integers(0, 256, options["pool_bytes"], dtype=np.uint8)
    base = 0x7F00_0000_0000
    batches = [(b, 8 * b, 8 * b + 8) for b in range(3)]
    with OraclePool(2, seed=SEED, nbytes=options["pool_bytes"], slot_bytes=slot_bytes) as pool:
        assert pool.directory == {"shm": "/dev/shm", "tmp": str(tmp_path), None: None}[room] or slot_bytes < 1 << 20
        session = SimpleNamespace(pool_base=lambda: base)
        prepared = pool.prepared_batches(target, options, 3, iter(batches), session)
        seen = []
        for batch, first, last in prepared:
            seen.append((batch, first, last))
            built, answer = prepared.take()
            for i, (case, trace, extra), images in zip(range(first, last), built, answer):
                want_case, want_trace = build_case(target, options, 3, i)
                assert trace == want_trace and target.case_to_json(case) == target.case_to_json(want_case)
                assert extra == {"labels": target.labels(case), "classes": target.coverage.classes(case)}
                assert np.array_equal(images, target.expected(case, host, base))
        paths = [s.path for s in pool._slots]
        assert 0 < prepared.busy <= prepared.capacity  # the workers' seconds of work within their life
    assert seen == batches and (not paths if room is None else paths)
    assert not [p for p in paths if os.path.exists(p)]
    assert not list(tmp_path.iterdir())  # (in /dev/shm other processes' campaigns may hold files of their own)


def test_a_workers_error_comes_back_as_itself_and_no_slot_is_lost():
    target = get_target("loads")
    options = target.configure(data_seed=SEED) | {"pool_bytes": 1 << 12}  # too small for most cases' tensors
    with OraclePool(2, seed=SEED, nbytes=1 << 12) as pool:
        prepared = pool.prepared_batches(target, options, 3, iter([(0, 0, 8)]), SimpleNamespace(pool_base=lambda: 0))
        next(prepared)
        with pytest.raises(ValueError, match="global_bytes holds"):
            prepared.take()
        assert len(pool._free) == len(pool._slots) == 1


@pytest.mark.parametrize("name", ["loads", pytest.param("im2col", marks=pytest.mark.slow)])
def test_a_campaign_with_oracle_workers_is_the_same_campaign(name):
    target = get_target(name)
    options = target.configure()
    alone = run_campaign(target, options, seed=2, examples=48, fake=True, shrink=False)
    pooled = run_campaign(target, options, seed=2, examples=48, fake=True, shrink=False, oracle_workers=2)
    assert (pooled.cases, pooled.size, pooled.mismatches) == (alone.cases, alone.size, alone.mismatches)
    assert pooled.by_label == alone.by_label and pooled.coverage.counts == alone.coverage.counts
    # the workers' start is set-up; the batches' wait for them is their own part
    assert pooled.timing[WORKERS_PHASE] > 0 and pooled.timing["setup"] > 0 and "generate" not in pooled.timing


class SlowOracleLoads(LoadsTarget):
    """The loads target with an oracle that takes 0.1 s more a batch (importable: spawned workers unpickle it)."""

    def expected_batch(self, cases, pool, base):
        time.sleep(0.1)
        return super().expected_batch(cases, pool, base)


def test_bound_by_names_the_workers_when_they_are_slower_and_says_how_busy_they_were():
    """Workers slower than the campaign's own process: the wait for them is the largest part, and bound_by says the
    workers were busy nearly all their time (more workers would help)."""
    from drvtma.fuzz.campaign import bound_by

    target = SlowOracleLoads()
    result = run_campaign(target, target.configure(), seed=2, examples=48, fake=True, shrink=False,
                          oracle_workers=1)
    text = bound_by(result.timing)
    assert text.startswith(WORKERS_PHASE), text
    busy = int(text.split("the workers busy ")[1].split("%")[0])
    assert busy >= 50, text


def test_oracle_workers_are_refused_where_the_oracle_cannot_move(capsys):
    from drvtma.cli.main import main

    with pytest.raises(ArgumentError, match="oracle_workers"):
        get_target("encode").session(get_target("encode").configure(), oracle_workers=2)
    with pytest.raises(ArgumentError, match="oracle_workers"):
        OraclePool(0, seed=1, nbytes=16)
    assert main(["fuzz", "encode", "--oracle-workers", "2", "--examples", "4", "--no-db"]) == 2
    assert "--oracle-workers: loads, im2col, stores, reductions and your kernel's only" in capsys.readouterr().err


def test_rule_errors_cross_a_process_boundary_whole():
    """A refusal raised in a worker (or a shard) arrives as itself: same class, rule and message."""
    import pickle

    from drvtma.errors import GemmError, UnknownNameError
    from drvtma.fuzz.merge import MergeError

    for error in (TensorMapError("coord_alignment", "coordinates[0][1]", 3, "use 0 or 8", "why"),
                  GemmError("tile_n", "bn", 7, "use 8"), UnknownNameError("fuzz_target", "target", "x", "use loads"),
                  MergeError("reports", "no report", "run the shards first")):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error) and again.rule == error.rule


def test_a_campaign_that_stops_early_leaves_no_file(tmp_path, monkeypatch):
    """Batches prepared ahead and never taken (an error, a budget's end): their own files go at close()."""
    import drvtma.fuzz.oracle_pool as pool_module

    monkeypatch.setattr(pool_module, "slot_directory", lambda need: str(tmp_path))
    target = get_target("loads")
    options = target.configure(data_seed=SEED, max_boxes=12)
    with OraclePool(2, seed=SEED, nbytes=options["pool_bytes"], slot_bytes=4096) as pool:
        prepared = pool.prepared_batches(target, options, 3, iter([(b, 8 * b, 8 * b + 8) for b in range(4)]),
                                         SimpleNamespace(pool_base=lambda: 0x7F00_0000_0000))
        next(prepared)
        assert len(prepared.take()[0]) == 8  # the other three batches are in flight or done, never taken
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["stores", pytest.param("reductions", marks=pytest.mark.slow)])
def test_a_stores_campaign_with_oracle_workers_is_the_same_campaign(name, monkeypatch):
    """The workers' plans (data, poison, images, jobs, the oracle's buffer) are the session's own, byte for byte: a
    stand-in GPU that writes the oracle's answer and breaks every fifth case gives the same verdicts either way."""
    import drvtma.fuzz.stores as stores_module
    from drvtma.tma.stores.probe import StoreBatchResult, store_oracle

    def fake_gpu(plan, *, scratch=None, timing=None, laps=None, into=None):
        if plan.expected is None:
            store_oracle(plan)
        got = plan.expected.copy()
        for i, base in enumerate(plan.bases):
            if (plan.cases[i].smem_offset + i) % 5 == 0:
                got[base - 1] ^= 0x5A  # a stray write into the guard before the tensor
        cases = [CaseResult(c, plan.bases[i], np.flatnonzero(plan.expected[lo:hi] != got[lo:hi]) + lo,
                            plan.boxes[i]) for i, (c, (lo, hi)) in enumerate(zip(plan.cases, plan.regions))]
        return StoreBatchResult(cases, plan.memory, plan.expected, got, {})

    from drvtma.tma.stores.probe import CaseResult, plan_store_cases

    monkeypatch.setattr(stores_module, "run_store_plan", fake_gpu)
    monkeypatch.setattr(stores_module, "run_store_cases", lambda cases, rng, *, initial, sources, scratch, timing, into:
                        fake_gpu(plan_store_cases(cases, rng, initial=initial, sources=sources)))
    target = get_target(name)
    options = target.configure()
    alone = run_campaign(target, options, seed=3, examples=600, shrink=False)
    pooled = run_campaign(target, options, seed=3, examples=600, shrink=False, oracle_workers=2)
    assert alone.mismatches > 0 and [f.index for f in alone.failures] == [f.index for f in pooled.failures]
    assert [f.outcome.differences for f in alone.failures] == [f.outcome.differences for f in pooled.failures]
    assert (pooled.cases, pooled.size, pooled.by_label) == (alone.cases, alone.size, alone.by_label)
    assert pooled.coverage.counts == alone.coverage.counts and "prepare" not in pooled.timing


def test_a_campaign_whose_time_is_up_checks_no_batch_prepared_ahead(tmp_path, monkeypatch):
    """Batches are prepared well ahead; once the campaign's time is up the next one is not handed out (a `--seconds`
    budget ends where the campaign's own loop would end it), and their files still go at close()."""
    import drvtma.fuzz.oracle_pool as pool_module

    monkeypatch.setattr(pool_module, "slot_directory", lambda need: str(tmp_path))
    target = get_target("loads")
    options = target.configure(data_seed=SEED, max_boxes=12)
    taken = []
    with OraclePool(2, seed=SEED, nbytes=options["pool_bytes"], slot_bytes=4096) as pool:
        prepared = pool.prepared_batches(target, options, 3, iter([(b, 8 * b, 8 * b + 8) for b in range(6)]),
                                         SimpleNamespace(pool_base=lambda: 0), expired=lambda: len(taken) >= 2)
        for batch, _, _ in prepared:
            prepared.take()
            taken.append(batch)
    assert taken == [0, 1] and not list(tmp_path.iterdir())


@pytest.mark.parametrize("bug, direction", [("off_by_one", "loads"), ("off_by_one_batched", "loads"),
                                            ("store_skips_last_chunk", "stores"),
                                            pytest.param("store_skips_last_chunk_batched", "reductions",
                                                         marks=pytest.mark.slow)])
def test_your_kernels_campaign_with_oracle_workers_is_the_same_campaign(bug, direction):
    """Your kernel runs here; the workers draw the cases and make their data and the oracle's answers: the same
    verdicts, differences, counts and coverage, and neither data nor oracle timed in this process."""
    from drvtma.fuzz.user import fuzz_kernel

    from support import byo_kernels

    run = getattr(byo_kernels, bug)
    alone, _ = fuzz_kernel(run, direction=direction, examples=96, seed=2, shrink=False, check=False)
    pooled, _ = fuzz_kernel(run, direction=direction, examples=96, seed=2, shrink=False, check=False,
                            oracle_workers=2)
    assert alone.mismatches > 0 and [f.index for f in alone.failures] == [f.index for f in pooled.failures]
    assert [f.outcome.differences for f in alone.failures] == [f.outcome.differences for f in pooled.failures]
    assert (pooled.cases, pooled.size, pooled.by_label) == (alone.cases, alone.size, alone.by_label)
    assert pooled.coverage.counts == alone.coverage.counts
    assert {"data", "oracle", "generate"} <= set(alone.timing) and not {"data", "oracle", "generate"} & set(
        pooled.timing) and pooled.timing[WORKERS_PHASE] > 0


@pytest.mark.parametrize("name", ["loads", "im2col"])
def test_digests_from_workers_pass_equal_images_and_name_the_bytes_where_they_differ(name, monkeypatch):
    """A worker answers a loads or im2col case with the digests of the oracle's images; the session compares the
    GPU's digests (here the fake device's) and, where one differs, the images themselves: a planted oracle bug is
    reported byte for byte, and digests that differ over equal images are a failure naming drvtma's digest."""
    import drvtma.fuzz.loads as loads_module

    target = get_target(name)
    options = target.configure()
    case = next(c for c in (build_case(target, options, 3, i)[0] for i in range(40)) if len(c.coords) >= 2)
    with target.session(options, fake=True) as session:
        want = target.expected(case, session.host, session.pool_base())
        assert want.dtype == np.uint64 and want.shape == (len(case.coords),)
        assert session.check_one(case, want).ok
        wrong = want.copy()
        wrong[-1] ^= np.uint64(1)
        outcome = session.check_one(case, wrong)
        assert not outcome.ok and "a drvtma bug" in outcome.detail
        if name == "loads":  # an oracle that breaks the first image's last byte, on the worker and here alike
            true = loads_module.expected_images

            def planted(*args, **kwargs):
                images = true(*args, **kwargs).copy()
                images[0, -1] ^= 0x40
                return images

            monkeypatch.setattr(loads_module, "expected_images", planted)
            outcome = session.check_one(case, target.expected(case, session.host, session.pool_base()))
            assert not outcome.ok and outcome.bad == [0] and outcome.differences[0]["where"]
