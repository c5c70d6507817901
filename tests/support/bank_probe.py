"""The three warp requests whose bank conflicts the H200 times (cu/show/bank_probe.cu), with what
drvtma.show.banks predicts for each; shared by tests/test_bank_probe_cpu.py and tests/test_bank_probe_gpu.py."""

from __future__ import annotations

import numpy as np

from drvtma.show import draw_image, wavefronts
from drvtma.show.banks import requests
from drvtma.tma.tiled.spec import Swizzle, TensorMapSpec

KERNEL = "show/bank_probe.cu"
SMEM_BYTES = 16 * 1024  # the kernel's buffer (BANK_SMEM_BYTES)
LANES = 32


def request(swizzle, pattern: str) -> tuple[np.ndarray, int]:
    """The first warp request of `pattern` over a bf16 64 x 64 box (128-byte rows) at shared address 0."""
    picture = draw_image(TensorMapSpec.create("bfloat16", (64, 64), (64, 64), swizzle=swizzle))
    reqs, width = requests(picture, pattern)
    return np.asarray(reqs[0], dtype=np.int64), width


def cases() -> dict[str, tuple[np.ndarray, int, int]]:
    """pattern name -> (lane offsets padded to 32, bytes per lane, active lanes); the predicted count is
    `predicted(name)`."""
    out = {}
    for name, swizzle, pattern in (("ldmatrix, no swizzle", Swizzle.NONE, "ldmatrix"),
                                   ("ldmatrix, 128B swizzle", Swizzle.B128, "ldmatrix"),
                                   ("column, no swizzle", Swizzle.NONE, "column")):
        addresses, width = request(swizzle, pattern)
        out[name] = (np.resize(addresses, LANES).astype(np.uint32), width, len(addresses))
    return out


def predicted(offsets: np.ndarray, width: int, active: int) -> int:
    return wavefronts(offsets[:active], width)


def reference(width: int) -> tuple[np.ndarray, int, int]:
    """A conflict-free request of the same width (one wavefront): consecutive 4- or 16-byte pieces of one line."""
    active = 128 // width
    return np.resize(np.arange(active, dtype=np.uint32) * width, LANES), width, active
