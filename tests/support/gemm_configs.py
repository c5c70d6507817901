"""GEMM configurations both the CPU tests (they compile, their SASS and epilogue placement) and the GPU tests (exact
on the device) take, so the CPU side builds every one the device runs."""

from __future__ import annotations

from drvtma.gemm.config import GemmConfig

# the stmatrix epilogue: four 8x8 matrices of C a store (swapped: transposed), in each schedule it can join
STMATRIX_CONFIGS = {
    "stmatrix": GemmConfig(stmatrix=True),
    "stmatrix f16 whole-tile staging": GemmConfig(dtype="float16", out_dtype="float16", stmatrix=True,
                                                  epilogue_buffers=4, stages=3),
    "stmatrix e4m3 stream-K": GemmConfig(dtype="float8_e4m3fn", stmatrix=True, streamk=True),
    "stmatrix ping-pong 128x128": GemmConfig(pingpong=True, bn=128, stages=6, stmatrix=True),
    "stmatrix mma.sync": GemmConfig(mma="mma_sync", stmatrix=True),
    "stmatrix cluster 2": GemmConfig(cluster_m=2, stmatrix=True),
    "stmatrix swapped 64x16": GemmConfig(swap_ab=True, bm=64, bn=16, consumers=1, stages=8, stmatrix=True),
    "stmatrix swapped 128x32 f16": GemmConfig(swap_ab=True, bn=32, stages=8, dtype="float16", out_dtype="float16",
                                              stmatrix=True),
    "stmatrix swapped 64x128, 2 panels of K": GemmConfig(swap_ab=True, bm=64, bn=128, consumers=1, bk=128, stages=4,
                                                         prefetch_maps=True, stmatrix=True),
}
