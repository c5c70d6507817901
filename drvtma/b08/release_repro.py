"""Runs cu/b08/release_repro.cu, the one-stage ring that shows how compute-sanitizer's racecheck judges a stage
release (racecheck once flagged ws_ring's warp-wide release), and checks its sums against NumPy. The variants are described in the kernel's header."""

from __future__ import annotations

import numpy as np

from ..errors import LaunchError
from ..runtime.status import StatusBuffer

SOURCE = "b08/release_repro.cu"
KERNEL = "release_repro"
WORDS = 1024  # per fill (one 4 KiB stage)
VARIANTS = {"warp_arrive": 0, "thread_arrive": 1, "unsynced_arrive": 2, "plain_stores": 3}
POISON = 0xDEADBEEF


def expected_sums(data: np.ndarray, iters: int) -> np.ndarray:
    """(iters, 32) wrapping u32 sums: lane l of fill i adds words l, l + 32, ... of that fill."""
    fills = data[:iters * WORDS].reshape(iters, 32, 32)  # [fill, e, lane] for word lane + 32 * e
    return fills.sum(axis=1, dtype=np.uint64).astype(np.uint32)  # wraps as the kernel's u32 adds do


def run_release_repro(variant: str, iters: int = 8, *, blocks: int = 2,
                      rng: np.random.Generator | None = None) -> None:
    """Launch `blocks` copies of the ring (each over the same fills), check status and sums; raise on a mismatch."""
    from ..runtime.driver import DeviceBuffer, synchronize
    from ..runtime.kernel import load_module

    if variant not in VARIANTS:
        raise LaunchError(f"unknown release variant {variant!r}; variants: {', '.join(VARIANTS)}")
    rng = rng if rng is not None else np.random.default_rng()
    data = rng.integers(0, 2**32, iters * WORDS, dtype=np.uint32)
    kernel = load_module(SOURCE, defines={"DRVTMA_RELEASE": VARIANTS[variant]}).kernel(KERNEL)
    with DeviceBuffer.from_array(data) as src, DeviceBuffer(blocks * iters * 32 * 4) as out, \
            StatusBuffer() as status:
        out.fill_u32(POISON)
        kernel.launch(src, out, iters, status, grid=blocks, block=64)
        synchronize()
        status.check(f"{KERNEL} ({variant})")
        got = out.download(np.uint32, (blocks, iters, 32))
    want = expected_sums(data, iters)
    for b in range(blocks):
        bad = np.argwhere(got[b] != want)
        if bad.size:
            i, lane = bad[0]
            raise AssertionError(f"{KERNEL} ({variant}) block {b}: {len(bad)} sums differ, first fill {i} lane "
                                 f"{lane}: got 0x{int(got[b, i, lane]):08x}, want 0x{int(want[i, lane]):08x}")
