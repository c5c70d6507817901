"""The oracle on worker processes (`--oracle-workers`): the same images, the same campaign, nothing left behind."""

from __future__ import annotations

import os

import numpy as np
import pytest

from drvtma.errors import ArgumentError, TensorMapError
from drvtma.fuzz.campaign import build_case, run_campaign
from drvtma.fuzz.loads import expected_images
from drvtma.fuzz.oracle_pool import OraclePool
from drvtma.fuzz.targets import get_target
from drvtma.tma.tiled import oracle

SEED, NBYTES = 5, 1 << 20


def test_the_pools_images_are_the_in_process_oracles_and_its_errors_come_back():
    """Loads cases' images from two workers, through the shared slots and (a slot too small) through the pipe,
    equal the oracle's here; a refused load raises its rule here; close() frees every slot."""
    target = get_target("loads")
    options = target.configure(data_seed=SEED, max_boxes=12) | {"pool_bytes": NBYTES}
    host = np.random.default_rng(SEED).integers(0, 256, NBYTES, dtype=np.uint8)
    cases = []
    for i in range(40):
        case = build_case(target, options, 3, i)[0]
        if case.spec.extent_bytes + case.offset <= NBYTES:
            cases.append(case)
    assert len(cases) >= 10
    for slot_bytes in (8 << 20, 4096):  # 4 KiB: most answers come back through the pipe
        with OraclePool(2, seed=SEED, nbytes=NBYTES, slot_bytes=slot_bytes) as pool:
            names = []
            for case in cases:
                spec = case.spec.replace(base_address=0x7F00_0000_0000 + case.offset)
                kw = {"box_offset": case.box_offset, "image_bytes": oracle.image_bytes_for(spec, case.box_offset),
                      "poison": case.poison}
                ticket = pool.submit(expected_images, spec, case.offset, spec.extent_bytes, case.coords, **kw)
                names.append(ticket.slot.name)
                want = expected_images(spec, host[case.offset:case.offset + spec.extent_bytes], case.coords, **kw)
                assert np.array_equal(pool.result(ticket), want)
            bad = cases[0].coords.copy()
            bad[0, -1] += 1  # off the 16-byte boundary for every type narrower than 16 B
            spec = cases[0].spec.replace(base_address=0x7F00_0000_0000)
            ticket = pool.submit(expected_images, spec, 0, spec.extent_bytes, bad, box_offset=0,
                                 image_bytes=oracle.image_bytes_for(spec, 0), poison=0)
            if spec.itemsize < 16:
                with pytest.raises(TensorMapError, match="coord_alignment"):
                    pool.result(ticket)
        assert not [n for n in set(names) if os.path.exists(f"/dev/shm/{n}")]  # unlinked at close


@pytest.mark.parametrize("name", ["loads", "im2col"])
def test_a_campaign_with_oracle_workers_is_the_same_campaign(name):
    target = get_target(name)
    options = target.configure()
    alone = run_campaign(target, options, seed=2, examples=48, fake=True, shrink=False)
    pooled = run_campaign(target, options, seed=2, examples=48, fake=True, shrink=False, oracle_workers=2)
    assert (pooled.cases, pooled.size, pooled.mismatches) == (alone.cases, alone.size, alone.mismatches)
    assert pooled.by_label == alone.by_label and pooled.coverage.counts == alone.coverage.counts
    assert pooled.timing["oracle"] > 0 and pooled.timing["setup"] > 0  # the workers' start is set-up, not oracle


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
