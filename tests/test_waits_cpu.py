"""Uniform timeouts, in the SASS NVRTC makes (no GPU): the wgmma probe votes (BAR.RED.OR) after its bounded wait
and before its aligned wgmmas; the GEMM consumers never leave a k-loop early (a timeout raises the stop word) and
vote once after it, none inside; the edge builds the GPU tests run (tests/support/edge_timeouts.py) compile for every
configuration they use."""

from __future__ import annotations

import pytest

from drvtma.gemm.config import GemmConfig
from drvtma.runtime import sass
from drvtma.runtime.compiler import compile_cubin
from drvtma.wgmma.probe import PROBE_NS, PROBE_SOURCE

from support.edge_timeouts import EDGE_DEFINES, GEMM_EDGE_CONFIGS

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


EDGE_CONFIGS = {name: GemmConfig(**fields) for name, fields in GEMM_EDGE_CONFIGS.items()}


@pytest.mark.parametrize("edge", [False, True], ids=["plain", "edge build"])
@pytest.mark.parametrize("name", sorted(EDGE_CONFIGS))
def test_the_gemm_consumers_vote_after_each_k_loop_not_inside(name, edge):
    cfg = EDGE_CONFIGS[name]
    ops = sass.functions(compile_cubin("gemm/gemm_ws.cu", defines={**cfg.defines(),
                                                                     **(EDGE_DEFINES if edge else {})}))["gemm_ws"]
    mma = "HMMA" if cfg.mma == "mma_sync" else "HGMMA"
    votes = [i for i, op in enumerate(ops) if op.startswith(VOTE)]
    mmas = [i for i, op in enumerate(ops) if op.startswith(mma)]
    if cfg.streamk:  # two k-loops (whole tiles, split runs), the consumers' vote after each, one per partial slot
        assert len(votes) == 3, votes
        assert mmas[0] < votes[0] and votes[1] > mmas[-1], (votes, mmas[0], mmas[-1])
    elif cfg.pingpong:  # the turn wait's vote before the k-loop, the loop's after it
        assert len(votes) == 2 and votes[0] < mmas[0] and votes[1] > mmas[-1], (votes, mmas[0], mmas[-1])
    else:  # one vote a tile, after every mma of the k-loop
        assert len(votes) == 1 and votes[0] > mmas[-1], (votes, mmas[0], mmas[-1])
