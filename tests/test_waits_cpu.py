"""Uniform timeouts, in the SASS NVRTC makes (no GPU): the wgmma probe and the GEMM consumers vote (BAR.RED.OR)
after their bounded wait and before the first aligned wgmma; the GEMM pays one vote per k-block, no more; the
edge builds the GPU tests run (tests/edge_timeouts.py) compile for every configuration they use."""

from __future__ import annotations

import pytest

from drvtma.gemm.config import GemmConfig
from drvtma.runtime import sass
from drvtma.runtime.compiler import compile_cubin
from drvtma.wgmma.probe import PROBE_NS, PROBE_SOURCE

from edge_timeouts import EDGE_DEFINES

VOTE = "BAR.RED.OR"


def _first(ops: list[str], prefix: str) -> int:
    return next(i for i, op in enumerate(ops) if op.startswith(prefix))


@pytest.mark.parametrize("edge", [False, True], ids=["plain", "edge build"])
def test_the_wgmma_probe_votes_before_its_wgmmas(edge):
    defines = {"DRVTMA_WGMMA_BF16": 1, "WG_T": "bf16", **(EDGE_DEFINES if edge else {})}
    funcs = sass.functions(compile_cubin(PROBE_SOURCE, defines=defines))
    for n in PROBE_NS:
        ops = funcs[f"wgmma_probe_n{n}"]
        votes = [op for op in ops if op.startswith(VOTE)]
        assert len(votes) == 1, (n, votes)  # the block's one vote on its one wait
        assert _first(ops, VOTE) < _first(ops, "HGMMA"), n


EDGE_CONFIGS = {"wgmma": GemmConfig(), "mma.sync": GemmConfig(mma="mma_sync"), "stream-K": GemmConfig(streamk=True)}


@pytest.mark.parametrize("edge", [False, True], ids=["plain", "edge build"])
@pytest.mark.parametrize("name", sorted(EDGE_CONFIGS))
def test_the_gemm_consumers_vote_once_per_k_block(name, edge):
    cfg = EDGE_CONFIGS[name]
    ops = sass.functions(compile_cubin("gemm/gemm_ws.cu", defines={**cfg.defines(),
                                                                     **(EDGE_DEFINES if edge else {})}))["gemm_ws"]
    votes = sum(op.startswith(VOTE) for op in ops)
    if cfg.streamk:  # two k-loops (whole tiles, split runs), a consumers' vote after each, one per partial slot
        assert votes >= 4, votes
    else:  # the k-loop is not unrolled: one vote in it is one vote per k-block
        assert votes == 1, votes
    assert _first(ops, VOTE) < _first(ops, "HMMA" if cfg.mma == "mma_sync" else "HGMMA")
