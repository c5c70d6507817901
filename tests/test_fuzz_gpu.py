"""drvtma.fuzz on the H200: short campaigns of every target find nothing, a planted bug is shrunk to a reproducer
that `drvtma repro` replays to the same diff, and two (or four, merged from their reports) shards on one GPU give
one process's result.

Sizes: DRVTMA_FUZZ_SECONDS (default 3 per campaign), DRVTMA_FUZZ_SEED (default 1). Figures go to
DRVTMA_REPORT_JSONL when set.
"""

from __future__ import annotations

import json
import os

import pytest

from drvtma import settings
from drvtma.cli.main import main
from drvtma.fuzz import loads as fuzz_loads
from drvtma.fuzz.campaign import bound_by, run_campaign
from drvtma.fuzz.shard import run_sharded
from drvtma.fuzz.targets import get_target
from drvtma.runtime.figures import record_test as record

pytestmark = pytest.mark.gpu

SECONDS = settings.FUZZ_SECONDS.get()
SEED = settings.FUZZ_SEED.get()


@pytest.mark.timing  # runs for a fixed time: its case count and rate are the GPU's alone
@pytest.mark.parametrize("name", ["loads", "encode", "stores", "reductions"])
def test_short_campaign_finds_no_mismatch(ctx, name):
    target = get_target(name)
    result = run_campaign(target, target.configure(), seed=SEED, seconds=SECONDS, shrink=True, max_shrinks=2,
                          shrink_seconds=20)
    record("fuzz_gpu_campaign", target=name, cases=result.cases, size=result.size, unit=target.unit,
           seconds=round(result.seconds, 3), size_per_second=round(result.size_per_second),
           mismatches=result.mismatches, bound_by=bound_by(result.timing), timing=result.timing)
    details = "\n\n".join((f.shrunk_outcome or f.outcome).detail for f in result.failures[:3])
    assert result.mismatches == 0, f"{result.mismatches} of {result.cases} cases differ:\n{details}"
    assert result.cases > 0


@pytest.mark.parametrize("name", ["loads", "im2col"])
def test_a_campaign_with_oracle_workers_compares_the_gpus_digests_and_agrees_with_one_process(ctx, name):
    """With oracle workers the GPU's image digests are compared with the workers' (only a differing case's images
    come back): the same cases, sizes and verdicts as one process comparing every byte, and no mismatch."""
    target = get_target(name)
    options = target.configure()
    alone = run_campaign(target, options, seed=SEED, examples=64, shrink=False)
    pooled = run_campaign(target, options, seed=SEED, examples=64, shrink=False, oracle_workers=2)
    record("fuzz_gpu_digests", target=name, cases=pooled.cases, size=pooled.size, mismatches=pooled.mismatches,
           timing=pooled.timing)
    details = "\n\n".join(f.outcome.detail for f in pooled.failures[:3])
    assert pooled.mismatches == alone.mismatches == 0, details
    assert (pooled.cases, pooled.size, pooled.by_label) == (alone.cases, alone.size, alone.by_label)


def test_planted_bug_is_shrunk_and_replayed_on_the_gpu(ctx, monkeypatch, tmp_path, capsys):
    real = fuzz_loads.expected_images

    def buggy(spec, global_bytes, coords, *, box_offset, **kwargs):
        images = real(spec, global_bytes, coords, box_offset=box_offset, **kwargs).copy()
        images[:, [box_offset, box_offset + 1]] = images[:, [box_offset + 1, box_offset]]
        return images

    monkeypatch.setattr(fuzz_loads, "expected_images", buggy)
    # the planted campaigns' own fuzz_campaign lines (with their mismatches) stay out of gpu-check's figures
    figures = os.environ.pop("DRVTMA_REPORT_JSONL", None)
    try:
        rc = main(["fuzz", "loads", "--examples", "16", "--seed", str(SEED), "--quiet", "--out", str(tmp_path),
                   "--no-db", "--max-shrinks", "1"])
        assert rc == 1
        shrunk = [p for p in sorted(tmp_path.glob("repro-loads-*.json")) if json.loads(p.read_text())["shrunk"]]
        assert shrunk, capsys.readouterr().out
        repro = json.loads(shrunk[0].read_text())
        capsys.readouterr()
        assert main(["repro", str(shrunk[0])]) == 1  # the planted bug is still in place: the same diff
        out = capsys.readouterr().out
    finally:
        if figures is not None:
            os.environ["DRVTMA_REPORT_JSONL"] = figures
    record("fuzz_planted_bug_gpu", shrunk_boxes=len(repro["case"]["coordinates"]),
           shrunk_spec=repro["case"]["spec"], shrink=repro["shrink"],
           same_diff="same diff as recorded" in out)
    assert "same diff as recorded" in out, out
    assert len(repro["case"]["coordinates"]) == 1


def test_two_shards_on_one_gpu_give_one_process_result(ctx):
    options = fuzz_loads.LOADS.configure(max_boxes=16)
    whole = run_campaign(fuzz_loads.LOADS, options, seed=SEED, examples=64, shrink=False)
    merged = run_sharded("loads", options, ["0", "0"], seed=SEED, examples=64, shrink=False)
    record("fuzz_two_shards_one_gpu", cases=merged.cases, size=merged.size, mismatches=merged.mismatches,
           same=(merged.by_label == whole.by_label and merged.size == whole.size))
    assert (merged.cases, merged.size, merged.mismatches, merged.by_label) == \
        (whole.cases, whole.size, whole.mismatches, whole.by_label)


@pytest.mark.timing  # four shard processes share the GPU: their rate is the point
def test_four_shards_on_one_gpu_merge_to_the_unsharded_campaign(ctx, tmp_path):
    """`drvtma fuzz loads --shard K/4` as four processes on the one GPU, merged as `drvtma fuzz merge` merges."""
    import subprocess
    import sys

    from drvtma.fuzz.merge import merge_reports
    from drvtma.testing.children import child_env

    examples = 2000
    whole = run_campaign(fuzz_loads.LOADS, fuzz_loads.LOADS.configure(), seed=SEED, examples=examples, shrink=False)
    argv = [sys.executable, "-m", "drvtma", "fuzz", "loads", "--seed", str(SEED), "--examples", str(examples),
            "--no-db", "--no-shrink", "--quiet"]
    procs = [subprocess.Popen([*argv, "--shard", f"{k}/4", "--out", str(tmp_path / f"shard{k}")],
                              env=child_env(DRVTMA_REPORT_JSONL=""), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for k in range(4)]
    outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    assert all(proc.returncode in (0, 1) for proc in procs), "\n".join(outputs)
    merged = merge_reports([tmp_path / f"shard{k}" for k in range(4)])
    record("fuzz_shards", target="loads", shards=4, cases=merged.cases, unsharded_cases=whole.cases,
           mismatches=merged.mismatches, per_second=round(merged.per_second, 1),
           unsharded_per_second=round(whole.per_second, 1),
           shard_per_second=[row["per_second"] for row in merged.per_shard])
    assert merged.mismatches == 0 == whole.mismatches, "\n".join(outputs)
    assert (merged.cases, merged.size, merged.by_label) == (whole.cases, whole.size, whole.by_label)
