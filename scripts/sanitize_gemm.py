#!/usr/bin/env python3
"""A small correct run of the GEMM for compute-sanitizer (scripts/sanitize.py family `gemm`): bf16 and fp8 on a ragged
problem (zero-filled loads, clipped stores), and the one-consumer, inflight, unswizzled, mma.sync, 2-CTA clusters (B
multicast along M, A along N, plain and swapped), stream-K (partial sums through a workspace) and swapped-operand
variants (the skinny ones with L2 eviction hints on their loads, plain and multicast), the maps prefetched
(for_problem's choice for one wave of tiles), the stmatrix epilogue (plain and swapped: transposed), ping-pong
warpgroups on 144 tiles (some CTAs give each warpgroup a tile, K deeper than the ring: the turn barriers), a staging
buffer per panel on 153 tiles (a tile's stores still draining while the CTA's next tile runs), and the convolution
build (A through an im2col map, padded and strided, a ragged last tile); every result compared exactly with NumPy on
integer data; exits non-zero on a mismatch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drvtma.gemm.config import GemmConfig  # noqa: E402
from drvtma.gemm.conv import Conv2d, ConvShape, reference_conv  # noqa: E402
from drvtma.gemm.launch import Gemm  # noqa: E402
from drvtma.gemm.reference import exact_operands, reference_gemm, value_dtype  # noqa: E402
from drvtma.runtime.driver import context  # noqa: E402

CONFIGS = (GemmConfig(), GemmConfig(dtype="float8_e4m3fn"), GemmConfig(bm=64, consumers=1),
           GemmConfig(inflight=1, out_dtype="float32"), GemmConfig(swizzle="none", stages=2),
           GemmConfig(mma="mma_sync"), GemmConfig(cluster_m=2), GemmConfig(cluster_m=2, dtype="float8_e5m2"),
           GemmConfig(streamk=True), GemmConfig(swap_ab=True, bm=64, bn=16, consumers=1, stages=8),
           GemmConfig(swap_ab=True, bm=64, bn=16, consumers=1, bk=256, stages=5, prefetch_maps=True,
                      evict_a="last", evict_b="first"),
           GemmConfig(swap_ab=True, bm=64, bn=64, consumers=1, bk=256, stages=3, prefetch_maps=True,
                      evict_a="last", evict_b="first", dtype="float8_e4m3fn"),
           GemmConfig(cluster_n=2), GemmConfig(swap_ab=True, bm=64, bn=32, consumers=1, bk=256, stages=4,
                                               prefetch_maps=True, cluster_n=2, evict_a="last", evict_b="first"),
           GemmConfig(prefetch_maps=True, dtype="float8_e4m3fn"), GemmConfig(stmatrix=True),
           GemmConfig(swap_ab=True, bm=64, bn=32, consumers=1, stages=8, stmatrix=True))
SHAPE = (200, 264, 144)
PINGPONG = (GemmConfig(pingpong=True, bn=128, stages=6, inflight=1), (1536, 1536, 448))
WHOLE_TILE_STAGING = (GemmConfig(epilogue_buffers=4, stages=3), (2176, 2056, 192))


def main() -> int:
    context()
    rng = np.random.default_rng(5)
    bad = 0
    for cfg, shape in [(c, SHAPE) for c in CONFIGS] + [PINGPONG, WHOLE_TILE_STAGING]:
        a, b = exact_operands(rng, cfg.dtype, *shape)
        got = Gemm(cfg).matmul(a, b)
        ok = np.array_equal(got.astype(np.float64), reference_gemm(a, b, out_dtype=cfg.out_dtype).astype(np.float64))
        bad += not ok
        print(f"gemm {cfg.label()}: {'ok' if ok else 'MISMATCH'}")
    shape = ConvShape(n=2, h=9, w=11, c=64, k=128, r=3, s=3, pad=1, stride=2)
    x = rng.integers(-3, 4, (shape.n, shape.h, shape.w, shape.c)).astype(np.float32).astype(value_dtype("bfloat16"))
    w = rng.integers(-3, 4, (shape.k, shape.r, shape.s, shape.c)).astype(np.float32).astype(value_dtype("bfloat16"))
    ok = np.array_equal(Conv2d(shape)(x, w).astype(np.float64), reference_conv(x, w, shape).astype(np.float64))
    bad += not ok
    print(f"conv {shape.describe()}: {'ok' if ok else 'MISMATCH'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
