"""Timeouts at the edge of the bound, made certain (DRVTMA_TEST_GIVE_UP_BARRIER, cu/include/drvtma/mbarrier.cuh):
warp 1 of every warpgroup reports a timeout on the chosen barrier after the phase completed, while its sibling
warps see the phase complete. A per-thread exit would leave the siblings inside a warpgroup-aligned wgmma for
ever; the uniform decision takes the whole group out (the wgmma probe's vote at its wait; the GEMM's stop word, with
which warp 1 goes on through the k-loop beside its siblings, and the vote after the loop) and the launch ends in
BarrierTimeout. Each launch runs in a child process, so a regression ends in the child's timeout, not in a hung
test run."""

from __future__ import annotations

import json

from drvtma.testing.children import run_child

GIVE_UP_BARRIER = 0  # the full barrier in the GEMM, the probe's only barrier
EDGE_DEFINES = {"DRVTMA_TEST_GIVE_UP_BARRIER": GIVE_UP_BARRIER, "DRVTMA_WAIT_TIMEOUT_NS": "20000000ull"}
# The GEMM schedules whose consumers the edge build takes out (GemmConfig fields): the GPU tests run each in a
# child, and tests/test_waits_cpu.py checks the vote in each one's SASS.
GEMM_EDGE_CONFIGS = {"wgmma": {}, "mma.sync": {"mma": "mma_sync"}, "stream-K": {"streamk": True},
                     "ping-pong": {"pingpong": True, "bn": 128}}

_REPORT = r'''
def report(run):
    import json
    from drvtma.errors import BarrierTimeout
    try:
        run()
        out = {"raised": None}
    except BarrierTimeout as exc:
        out = {"raised": type(exc).__name__, "count": exc.count, "message": str(exc),
               "waits": [{"block": w.block, "thread": w.thread, "barrier": w.barrier, "stage": w.stage,
                          "where": w.where} for w in exc.waits]}
    except Exception as exc:  # any other failure names itself
        out = {"raised": type(exc).__name__, "message": str(exc)}
    print("RESULT " + json.dumps(out), flush=True)
'''

# One launch of the wgmma probe (bf16, N = 128, two cases: two one-warpgroup CTAs) in the edge build.
WGMMA_SCRIPT = _REPORT + r'''
import json, sys
import numpy as np
from drvtma.runtime.driver import context
from drvtma.wgmma import cases as wc
from drvtma.wgmma.dtypes import BF16
from drvtma.wgmma.probe import WgmmaProbe

context()
group = wc.random_group(np.random.default_rng(3), BF16, n=128, cases=2, wrong_fraction=0.0,
                        config={"steps": 2, "rs": False, "major_a": "K", "major_b": "K", "swizzle_a": 3,
                                "swizzle_b": 3})
with WgmmaProbe(extra_defines=json.loads(sys.argv[1])) as probe:
    report(lambda: probe.run(group))
'''

# One GEMM (GemmConfig(**argv[2])) of 128 x 256 x 128 (one tile, two k-blocks), or of argv[3]'s [M, N, K], in
# the edge build.
GEMM_SCRIPT = _REPORT + r'''
import json, sys
import numpy as np
from drvtma.runtime.driver import context
from drvtma.gemm.config import GemmConfig
from drvtma.gemm.launch import Gemm
from drvtma.gemm.reference import exact_operands

context()
cfg = GemmConfig(**json.loads(sys.argv[2]))
gemm = Gemm(cfg, extra_defines=json.loads(sys.argv[1]))
a, b = exact_operands(np.random.default_rng(1), cfg.dtype, *(json.loads(sys.argv[3]) if len(sys.argv) > 3 else
                                                             (128, 256, 128)))
report(lambda: gemm.matmul(a, b))
'''


def run_edge_child(script: str, *args: str, timeout: float = 180, defines: dict | None = None) -> dict:
    """Run `script` with the edge defines (or `defines`) as argv[1] (and `args` after) in a child; its RESULT as a
    dict."""
    proc = run_child(script, json.dumps(EDGE_DEFINES if defines is None else defines), *args, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"child exited {proc.returncode} without a result:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1].split(" ", 1)[1])


def given_up_waits(result: dict) -> list[dict]:
    """The recorded waits, after checking the launch ended in BarrierTimeout and every one is a give-up of warp 1
    of a warpgroup on the chosen barrier."""
    assert result["raised"] == "BarrierTimeout", result
    waits = result["waits"]
    assert waits and result["count"] >= len(waits) and result["count"] % 32 == 0, result
    for w in waits:
        assert w["barrier"] == GIVE_UP_BARRIER and (w["thread"] // 32) % 4 == 1, result
    return waits
