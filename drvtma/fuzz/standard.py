"""The standard campaigns: the seed and number of cases gpu-check runs for each `drvtma fuzz` target.

One table for both sides of the coverage promise: gpu-check runs exactly these campaigns on the GPU, recording
their coverage lines (`step`: its `drvtma fuzz` step, else the GPU test that runs it), and
tests/test_coverage_cpu.py builds the same cases on the CPU and checks that every class of each target's universe
is hit at least `coverage.MIN_HITS` times. A budget in cases, not seconds, so the cases (and their coverage) are the
same on every host.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Standard:
    target: str
    seed: int
    examples: int
    step: bool = True  # a `drvtma fuzz` step of gpu-check; False: a GPU test runs it (with the im2col probe tests)


STANDARD_CAMPAIGNS = (
    Standard("loads", 1, 2500),
    Standard("encode", 1, 12000),
    Standard("stores", 1, 12000),
    Standard("reductions", 1, 12000),
    Standard("im2col", 25, 2400, step=False),  # tests/test_im2col_gpu.py
    Standard("im2col_encode", 25, 10000, step=False),
)


def standard(target: str) -> Standard:
    """The standard campaign of `target`."""
    return next(c for c in STANDARD_CAMPAIGNS if c.target == target)
