"""The implicit-GEMM convolution on the GPU (passes on the H200): bit for bit against the NumPy reference with
integer operands (every partial sum exact in fp32), the output poisoned first; and against torch's conv2d (cuDNN)
on random data within the GEMM's tolerance, when torch is installed."""

from __future__ import annotations

import numpy as np
import pytest

from drvtma import settings
from drvtma.gemm.conv import Conv2d, ConvShape, reference_conv
from drvtma.gemm.reference import EXACT_BOUND, value_dtype
from drvtma.runtime.figures import record_test as record

pytestmark = [pytest.mark.gpu, pytest.mark.needs("wgmma", "setmaxnreg")]

SEED = settings.FUZZ_SEED.get()
EXACT = [
    ConvShape(n=2, h=9, w=11, c=64, k=128, r=3, s=3, pad=1),             # a ragged last tile
    ConvShape(n=3, h=7, w=7, c=128, k=64, r=3, s=3, pad=1, stride=2),
    ConvShape(n=2, h=6, w=6, c=64, k=64, r=1, s=1),
    ConvShape(n=1, h=12, w=12, c=64, k=64, r=3, s=3, dilation=2),
    ConvShape(n=4, h=28, w=28, c=128, k=128, r=3, s=3, pad=1),           # a ResNet-50 layer, 4 images
]


def _operands(shape: ConvShape, rng, dtype="bfloat16"):
    vt = value_dtype(dtype)
    x = rng.integers(-EXACT_BOUND, EXACT_BOUND + 1, (shape.n, shape.h, shape.w, shape.c)).astype(np.float32)
    w = rng.integers(-EXACT_BOUND, EXACT_BOUND + 1, (shape.k, shape.r, shape.s, shape.c)).astype(np.float32)
    return x.astype(vt), w.astype(vt)


@pytest.mark.parametrize("shape", EXACT, ids=lambda s: s.describe())
def test_conv_is_exact_with_integer_operands(ctx, shape):
    x, w = _operands(shape, np.random.default_rng(SEED))
    got = Conv2d(shape)(x, w)
    want = reference_conv(x, w, shape)
    bad = int((got.view(np.uint16) != want.view(np.uint16)).sum())
    record("conv_exact", shape=shape.describe(), elements=int(got.size), mismatches=bad)
    assert bad == 0, f"{bad} of {got.size} outputs differ; first at {np.argwhere(got.view(np.uint16) != want.view(np.uint16))[0]}"


def test_conv_matches_cudnn(ctx):
    torch = pytest.importorskip("torch", reason="torch is not installed (cuDNN's conv2d is the comparison)")
    shape = ConvShape(n=8, h=28, w=28, c=128, k=128, r=3, s=3, pad=1)
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((shape.n, shape.h, shape.w, shape.c)).astype(np.float32)
    w = (rng.standard_normal((shape.k, shape.r, shape.s, shape.c)) / np.sqrt(9 * shape.c)).astype(np.float32)
    vt = value_dtype("bfloat16")
    got = Conv2d(shape)(x.astype(vt), w.astype(vt)).astype(np.float32)
    tx = torch.from_numpy(x).to("cuda", torch.bfloat16).permute(0, 3, 1, 2)
    tw = torch.from_numpy(w).to("cuda", torch.bfloat16).permute(0, 3, 1, 2)
    ref = torch.nn.functional.conv2d(tx, tw, stride=shape.stride, padding=shape.pad).permute(0, 2, 3, 1)
    ref = ref.float().cpu().numpy()
    # both round the fp32 sum to bf16 once: at most a couple of bf16 steps apart where the sums' orders differ
    tol = 2.0 ** -6 * np.maximum(np.abs(ref), 1.0)
    worst = float((np.abs(got - ref) / tol).max())
    record("conv_vs_cudnn", shape=shape.describe(), worst_in_tolerances=round(worst, 3))
    assert worst <= 1.0, f"worst element {worst:.3g} x the tolerance away from cuDNN"
