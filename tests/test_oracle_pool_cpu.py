"""The oracle on worker processes (`--oracle-workers`): the same images, the same campaign, nothing left behind."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

from drvtma.errors import ArgumentError, TensorMapError
from drvtma.fuzz.campaign import WORKERS_PHASE, build_case, run_campaign
from drvtma.fuzz.oracle_pool import OraclePool
from drvtma.fuzz.targets import get_target

SEED = 5


@pytest.mark.parametrize("slot_bytes, shm_free", [(8 << 20, None), pytest.param(4096, None, marks=pytest.mark.slow),
                                                  pytest.param(8 << 20, 0, marks=pytest.mark.slow)])
def test_workers_prepare_the_campaigns_own_cases_and_free_every_slot(slot_bytes, shm_free, monkeypatch):
    """Cases prepared by two workers, through the shared slots or the pipe (a 4 KiB slot: most answers; /dev/shm
    full: every one), are the cases, labels, coverage classes and images the campaign's own process makes; close()
    frees every slot."""
    import drvtma.fuzz.oracle_pool as pool_module

    if shm_free is not None:
        monkeypatch.setattr(pool_module.shutil, "disk_usage", lambda path: SimpleNamespace(free=shm_free))
    target = get_target("loads")
    options = target.configure(data_seed=SEED, max_boxes=12)
    host = np.random.default_rng(SEED).integers(0, 256, options["pool_bytes"], dtype=np.uint8)
    base = 0x7F00_0000_0000
    batches = [(b, 8 * b, 8 * b + 8) for b in range(3)]
    with OraclePool(2, seed=SEED, nbytes=options["pool_bytes"], slot_bytes=slot_bytes) as pool:
        session = SimpleNamespace(pool_base=lambda: base)
        prepared = pool.prepared_batches(target, options, 3, iter(batches), session)
        seen = []
        for batch, first, last in prepared:
            seen.append((batch, first, last))
            for i, (case, trace, extra, images) in zip(range(first, last), prepared.take()):
                want_case, want_trace = build_case(target, options, 3, i)
                assert trace == want_trace and target.case_to_json(case) == target.case_to_json(want_case)
                assert extra == {"labels": target.labels(case), "classes": target.coverage.classes(case)}
                assert np.array_equal(images, target.expected(case, host, base))
        names = [s.name for s in pool._slots]
    assert seen == batches and (not names if shm_free == 0 else names)
    assert not [n for n in names if os.path.exists(f"/dev/shm/{n}")]  # unlinked at close


def test_a_workers_error_comes_back_as_itself_and_no_slot_is_lost():
    target = get_target("loads")
    options = target.configure(data_seed=SEED) | {"pool_bytes": 1 << 12}  # too small for most cases' tensors
    with OraclePool(2, seed=SEED, nbytes=1 << 12) as pool:
        prepared = pool.prepared_batches(target, options, 3, iter([(0, 0, 8)]), SimpleNamespace(pool_base=lambda: 0))
        next(prepared)
        with pytest.raises(ValueError, match="global_bytes holds"):
            prepared.take()
        assert len(pool._free) == len(pool._slots) == 8


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


def test_oracle_workers_are_refused_where_the_oracle_cannot_move(capsys):
    from drvtma.cli.main import main

    with pytest.raises(ArgumentError, match="oracle_workers"):
        get_target("stores").session(get_target("stores").configure(), oracle_workers=2)
    with pytest.raises(ArgumentError, match="oracle_workers"):
        OraclePool(0, seed=1, nbytes=16)
    assert main(["fuzz", "encode", "--oracle-workers", "2", "--examples", "4", "--no-db"]) == 2
    assert "--oracle-workers: loads and im2col only" in capsys.readouterr().err


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
