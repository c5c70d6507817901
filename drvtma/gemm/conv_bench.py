"""`drvtma bench conv`: the implicit-GEMM convolution against cuDNN (torch's conv2d, channels-last bf16) in one
process, on ResNet-50 layers: each layer's output checked against cuDNN's, then both timed in ABBA halves (drvtma,
cuDNN, cuDNN, drvtma: clock drift under power hits both alike) on the legacy stream, medians of CUDA-event timings
behind the same stream hold for both, each side's slowest / fastest run recorded as its spread."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from ..runtime.figures import record_figure
from ..runtime.timing import time_abba, timing_figure
from .conv import Conv2d, ConvShape
from .reference import value_dtype

LAYERS = (  # ResNet-50 at batch 32: a 3x3 of each early stage, the stride-2 3x3, a 1x1
    ConvShape(n=32, h=56, w=56, c=64, k=64, r=3, s=3, pad=1),
    ConvShape(n=32, h=28, w=28, c=128, k=128, r=3, s=3, pad=1),
    ConvShape(n=32, h=28, w=28, c=128, k=128, r=3, s=3, pad=1, stride=2),
    ConvShape(n=32, h=56, w=56, c=64, k=256, r=1, s=1),
)
CHECK_TOLERANCE = 2.0 ** -6  # relative (absolute below 1): a couple of bf16 steps, as in tests/test_conv_gpu.py


@dataclass(frozen=True)
class ConvRow:
    shape: ConvShape
    ms: float
    cudnn_ms: float
    worst: float  # the largest |drvtma - cuDNN| in tolerances
    timings: dict = field(default_factory=dict)  # {"drvtma" | "cudnn": runtime.timing.Timing}

    @property
    def tflops(self) -> float:
        return self.shape.flops / (self.ms * 1e-3) / 1e12

    @property
    def cudnn_tflops(self) -> float:
        return self.shape.flops / (self.cudnn_ms * 1e-3) / 1e12

    @property
    def ratio(self) -> float:
        return self.cudnn_ms / self.ms

    def figure(self) -> dict:
        s = self.shape
        return {"bench": "conv", "n": s.n, "h": s.h, "w": s.w, "c": s.c, "k": s.k, "r": s.r, "s": s.s,
                "stride": s.stride, "pad": s.pad, "tflops": round(self.tflops, 1),
                "cudnn_tflops": round(self.cudnn_tflops, 1), "ratio": round(self.ratio, 3),
                "check_in_tolerances": round(self.worst, 3),
                **timing_figure(self.timings)}


def run_layer(shape: ConvShape, *, runs: int = 10, warmups: int = 3, seed: int = 0, config=None) -> ConvRow:
    """One layer: random bf16 operands, drvtma's output against cuDNN's, then both timed (`config`: the GEMM's
    configuration, default Conv2d's choice for the shape)."""
    import torch

    from ..runtime.driver import DeviceBuffer

    torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest algorithm in the warm-ups
    rng = np.random.default_rng(seed)
    bf16 = value_dtype("bfloat16")
    x = rng.standard_normal((shape.n, shape.h, shape.w, shape.c)).astype(bf16)
    w = (rng.standard_normal((shape.k, shape.r, shape.s, shape.c)) / np.sqrt(shape.r * shape.s * shape.c)).astype(bf16)
    conv = Conv2d(shape, config)
    y_bytes = shape.n * shape.p * shape.q * shape.k * 2
    tx = torch.from_numpy(x.astype(np.float32)).to("cuda", torch.bfloat16).permute(0, 3, 1, 2)
    tw = torch.from_numpy(w.astype(np.float32)).to("cuda", torch.bfloat16).permute(0, 3, 1, 2)
    tx, tw = tx.contiguous(memory_format=torch.channels_last), tw.contiguous(memory_format=torch.channels_last)
    run_cudnn = lambda: torch.nn.functional.conv2d(tx, tw, stride=shape.stride, padding=shape.pad)  # noqa: E731
    ref = run_cudnn().permute(0, 2, 3, 1).float().cpu().numpy()
    with DeviceBuffer.from_array(x) as dx, DeviceBuffer.from_array(w) as dw, DeviceBuffer(y_bytes) as dy, \
            conv.bind(dx, dw, dy) as op:
        op.run_checked()
        got = dy.download(bf16, (shape.n, shape.p, shape.q, shape.k)).astype(np.float32)
        worst = float((np.abs(got - ref) / (CHECK_TOLERANCE * np.maximum(np.abs(ref), 1.0))).max())
        # both behind the same stream hold (torch launches on the legacy stream drvtma's events record on):
        # timed without it, cuDNN's runs held torch's host dispatch
        timings = time_abba({"drvtma": op.launch, "cudnn": run_cudnn}, runs=runs, warmups=warmups)
    return ConvRow(shape, timings["drvtma"].median, timings["cudnn"].median, worst, timings)


def run_conv_bench(layers=LAYERS, *, runs: int = 10, warmups: int = 3, progress=sys.stderr) -> list[ConvRow]:
    rows = []
    for shape in layers:
        if progress:
            print(f"conv {shape.describe()} ...", file=progress, flush=True)
        row = run_layer(shape, runs=runs, warmups=warmups)
        record_figure(row.figure())
        rows.append(row)
    return rows


HEADER = ["layer", "drvtma ms", "cuDNN ms", "drvtma TFLOP/s", "cuDNN TFLOP/s", "ratio", "check"]


def table_rows(rows: list[ConvRow]) -> list[list]:
    return [[r.shape.describe(), f"{r.ms:.4f}", f"{r.cudnn_ms:.4f}", f"{r.tflops:.1f}", f"{r.cudnn_tflops:.1f}",
             f"{r.ratio:.3f}", "ok" if r.worst <= 1.0 else f"off by {r.worst:.2f} tolerances"] for r in rows]
