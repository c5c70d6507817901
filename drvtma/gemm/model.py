"""A CPU model of the kernel's data path, built from the other rooms' oracles (no GPU): what each consumer's
wgmmas read from a stage and where the epilogue writes each accumulator.

- `mainloop(config, a, b)`: for every tile and k-block, the stage image the producer's TMA loads leave (the TMA
  load oracle, the kernel's box offsets, zero fill past the edges), the operands every k-step of every consumer
  reads through the descriptors the kernel is compiled with (GEMM_DESC_A / GEMM_DESC_B, decoded, moved as
  wgmma_desc_at moves them), summed in float64: the fp32 accumulators of a kernel whose descriptors are right.
- `staging_addresses(config)`: the byte in a staging buffer each (thread, accumulator pair) of one epilogue panel
  goes to, as cu/gemm/gemm_ws.cu computes it; the tests compare it with where a 128B-swizzled TMA store reads.
"""

from __future__ import annotations

import math

import numpy as np

from .config import GemmConfig
from ..tma import oracle as tma_oracle
from ..tma.spec import TensorMapSpec
from ..wgmma import SmemDescriptor
from ..wgmma import oracle as wgmma_oracle
from ..wgmma.dtypes import M as WGMMA_M


def _desc_list(define: str) -> list[SmemDescriptor]:
    return [SmemDescriptor.decode(int(v.removesuffix("ull"), 16)) for v in define.split(",")]


def _moved(desc: SmemDescriptor, base: int) -> SmemDescriptor:
    """wgmma_desc_at: the 14-bit start field plus base >> 4, masked."""
    start = ((desc.start >> 4) + (base >> 4)) & 0x3FFF
    return desc.replace(start=start << 4)


def mainloop(config: GemmConfig, a: np.ndarray, b: np.ndarray, defines: dict | None = None) -> np.ndarray:
    """(M, N) float64: what the accumulators hold at the end of every tile, modelled stage by stage (`defines`:
    the kernel's compile-time values, default config.defines())."""
    cfg = config.check()
    d = cfg.defines() if defines is None else defines
    desc_a, desc_b = _desc_list(d["GEMM_DESC_A"]), _desc_list(d["GEMM_DESC_B"])
    t = cfg.wgmma
    m, k = a.shape
    n = b.shape[0]
    a_map = TensorMapSpec.create(t.tma_dtype, (m, k), cfg.box_spec("A").box, swizzle=cfg.box_spec("A").swizzle)
    b_map = TensorMapSpec.create(t.tma_dtype, (n, k), cfg.box_spec("B").box, swizzle=cfg.box_spec("B").swizzle)
    a_bytes, b_bytes = np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
    a_box, b_box = d["GEMM_A_BOX_BYTES"], d["GEMM_B_BOX_BYTES"]
    steps, bk, pe = d["GEMM_STEPS"], cfg.k_tile, cfg.panel_elems
    out = np.zeros((math.ceil(m / cfg.bm) * cfg.bm, math.ceil(n / cfg.bn) * cfg.bn))
    for tm in range(math.ceil(m / cfg.bm)):
        for tn in range(math.ceil(n / cfg.bn)):
            acc = np.zeros((cfg.bm, cfg.bn))
            for kb in range(math.ceil(k / bk)):
                stage = np.zeros(cfg.stage_bytes, dtype=np.uint8)
                for p in range(cfg.panels):
                    at = p * a_box
                    stage[at:at + a_box] = tma_oracle.load_image(a_map, a_bytes, (tm * cfg.bm, kb * bk + p * pe),
                                                                 image_address=at, image_bytes=a_box)
                    at = cfg.a_bytes + p * b_box
                    stage[at:at + b_box] = tma_oracle.load_image(b_map, b_bytes, (tn * cfg.bn, kb * bk + p * pe),
                                                                 image_address=at, image_bytes=b_box)
                for s in range(steps):
                    bs = t.from_bits(wgmma_oracle.gather(stage, 0, _moved(desc_b[s], 0), t, cfg.bn, "K"))
                    for cw in range(cfg.consumers):
                        for atom in range(cfg.m_atoms):
                            da = _moved(desc_a[atom * steps + s], cw * d["GEMM_A_WG_BYTES"])
                            av = t.from_bits(wgmma_oracle.gather(stage, 0, da, t, WGMMA_M, "K"))
                            row = cw * cfg.wg_rows + atom * WGMMA_M
                            acc[row:row + WGMMA_M] += av @ bs.T
            out[tm * cfg.bm:(tm + 1) * cfg.bm, tn * cfg.bn:(tn + 1) * cfg.bn] = acc
    return out[:m, :n]


def staging_addresses(config: GemmConfig, panel: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thread, pair) -> (byte offset in the staging buffer, row, column in the panel) of the first of the two
    outputs a consumer thread writes in epilogue panel `panel` (the kernel's formula, written out)."""
    out_bytes = config.out_itemsize
    epi_cols = 128 // out_bytes
    rows, cols = wgmma_oracle.accumulator_map(config.bn)
    t = np.arange(128)[:, None]
    w, g, c = t // 32, (t % 32) // 4, t % 4
    q = np.arange(epi_cols // 4)[None, :]
    i = panel * (epi_cols // 2) + 2 * q
    row = 16 * w + g + 8 * ((i >> 1) & 1)
    byte = (8 * (q // 2) + 2 * c) * out_bytes
    at = row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15))
    ii = np.broadcast_to(i, (128, i.shape[1]))
    return at, np.take_along_axis(rows, ii, 1), np.take_along_axis(cols, ii, 1) - panel * epi_cols
