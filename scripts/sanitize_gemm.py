#!/usr/bin/env python3
"""A small correct run of the GEMM for compute-sanitizer (scripts/sanitize.py family `gemm`): bf16 and fp8 on a
ragged problem (zero-filled loads, clipped stores), and the one-consumer, inflight, unswizzled, mma.sync, 2-CTA
cluster (B multicast) and stream-K (partial sums through a workspace) variants; every
result compared exactly with NumPy on integer data; exits non-zero on a mismatch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drvtma.gemm.config import GemmConfig  # noqa: E402
from drvtma.gemm.launch import Gemm  # noqa: E402
from drvtma.gemm.reference import exact_operands, reference_gemm  # noqa: E402
from drvtma.runtime.driver import context  # noqa: E402

CONFIGS = (GemmConfig(), GemmConfig(dtype="float8_e4m3fn"), GemmConfig(bm=64, consumers=1),
           GemmConfig(inflight=1, out_dtype="float32"), GemmConfig(swizzle="none", stages=2),
           GemmConfig(mma="mma_sync"), GemmConfig(cluster_m=2), GemmConfig(cluster_m=2, dtype="float8_e5m2"),
           GemmConfig(streamk=True))


def main() -> int:
    context()
    rng = np.random.default_rng(5)
    bad = 0
    for cfg in CONFIGS:
        a, b = exact_operands(rng, cfg.dtype, 200, 264, 144)
        got = Gemm(cfg).matmul(a, b)
        ok = np.array_equal(got.astype(np.float64), reference_gemm(a, b, out_dtype=cfg.out_dtype).astype(np.float64))
        bad += not ok
        print(f"gemm {cfg.label()}: {'ok' if ok else 'MISMATCH'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
