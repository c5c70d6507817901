"""A CPU model of the kernel's data path, built from the other rooms' oracles (no GPU): what each consumer's
wgmmas read from a stage and where the epilogue writes each accumulator.

- `mainloop(config, a, b)`: for every tile and k-block, the stage image the producer's TMA loads leave (the TMA
  load oracle, the kernel's box offsets, zero fill past the edges), the operands every k-step of every consumer
  reads through the descriptors the kernel is compiled with (GEMM_DESC_A / GEMM_DESC_B, decoded, moved as
  wgmma_desc_at moves them), summed in float64: the fp32 accumulators of a kernel whose descriptors are right.
- `staged_outputs(config, panel)`: the byte in a staging buffer each (thread, accumulator value) of one epilogue
  panel goes to, as cu/gemm/gemm_ws.cu computes it (through stmatrix where the kernel uses it); the tests compare
  it with where a 128B-swizzled TMA store reads.
"""

from __future__ import annotations

import math

import numpy as np

from ..tma.tiled import oracle as tma_oracle
from ..tma.tiled.spec import TensorMapSpec
from ..wgmma import SmemDescriptor
from ..wgmma import oracle as wgmma_oracle
from ..wgmma.dtypes import M as WGMMA_M
from .config import GemmConfig


def _desc_list(define: str) -> list[SmemDescriptor]:
    return [SmemDescriptor.decode(int(v.removesuffix("ull"), 16)) for v in define.split(",")]


def _moved(desc: SmemDescriptor, base: int) -> SmemDescriptor:
    """wgmma_desc_at: the 14-bit start field plus base >> 4, masked."""
    start = ((desc.start >> 4) + (base >> 4)) & 0x3FFF
    return desc.replace(start=start << 4)


def _stage_images(cfg: GemmConfig, d: dict, a: np.ndarray, b: np.ndarray):
    """(tm, tn, kb, stage image) for every tile and k-block, as the producer's TMA loads leave the stage."""
    t = cfg.wgmma
    m, k = a.shape
    n = b.shape[0]
    a_map = TensorMapSpec.create(t.tma_dtype, (m, k), cfg.box_spec("A").box, swizzle=cfg.box_spec("A").swizzle)
    b_map = TensorMapSpec.create(t.tma_dtype, (n, k), cfg.box_spec("B").box, swizzle=cfg.box_spec("B").swizzle)
    a_bytes, b_bytes = np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)
    a_box, b_box, bk, pe = d["GEMM_A_BOX_BYTES"], d["GEMM_B_BOX_BYTES"], cfg.k_tile, cfg.panel_elems
    for tm in range(math.ceil(m / cfg.bm)):
        for tn in range(math.ceil(n / cfg.bn)):
            for kb in range(math.ceil(k / bk)):
                stage = np.zeros(cfg.stage_bytes, dtype=np.uint8)
                for p in range(cfg.panels):
                    at = p * a_box
                    stage[at:at + a_box] = tma_oracle.load_image(a_map, a_bytes, (tm * cfg.bm, kb * bk + p * pe),
                                                                 image_address=at, image_bytes=a_box)
                    at = cfg.a_bytes + p * b_box
                    stage[at:at + b_box] = tma_oracle.load_image(b_map, b_bytes, (tn * cfg.bn, kb * bk + p * pe),
                                                                 image_address=at, image_bytes=b_box)
                yield tm, tn, kb, stage


def mainloop(config: GemmConfig, a: np.ndarray, b: np.ndarray, defines: dict | None = None) -> np.ndarray:
    """(M, N) float64: what the accumulators hold at the end of every tile, modelled stage by stage (`defines`:
    the kernel's compile-time values, default config.defines()). mma='mma_sync' goes through `mma_sync_tile`."""
    cfg = config.check()
    d = cfg.defines() if defines is None else defines
    desc_a, desc_b = _desc_list(d["GEMM_DESC_A"]), _desc_list(d["GEMM_DESC_B"])
    t = cfg.wgmma
    m, n = a.shape[0], b.shape[0]
    out = np.zeros((math.ceil(m / cfg.bm) * cfg.bm, math.ceil(n / cfg.bn) * cfg.bn))
    for tm, tn, _kb, stage in _stage_images(cfg, d, a, b):
        tile = out[tm * cfg.bm:(tm + 1) * cfg.bm, tn * cfg.bn:(tn + 1) * cfg.bn]
        if cfg.mma == "mma_sync":
            tile += mma_sync_tile(cfg, d, stage)
            continue
        for s in range(d["GEMM_STEPS"]):
            bs = t.from_bits(wgmma_oracle.gather(stage, 0, _moved(desc_b[s], 0), t, cfg.bn, "K"))
            for cw in range(cfg.consumers):
                for atom in range(cfg.m_atoms):
                    da = _moved(desc_a[atom * d["GEMM_STEPS"] + s], cw * d["GEMM_A_WG_BYTES"])
                    av = t.from_bits(wgmma_oracle.gather(stage, 0, da, t, WGMMA_M, "K"))
                    row = cw * cfg.wg_rows + atom * WGMMA_M
                    tile[row:row + WGMMA_M] += av @ bs.T
    return out[:m, :n]


# ---- the mma.sync baseline: the kernel's ldmatrix addresses and fragment order, written out

def tile_byte(cfg: GemmConfig, tile: int, box_bytes: int, row, kbyte):
    """cu/gemm/gemm_ws.cu tile_byte: byte `kbyte` of row `row` in a panelled tile, after TMA's swizzle."""
    span = cfg.span
    mask = {128: 7, 64: 3, 32: 1, 16: 0}[span]
    a = tile + (kbyte // span) * box_bytes + row * span + kbyte % span
    return a ^ (((a >> 7) & mask) << 4)


def _ldmatrix_x4(stage: np.ndarray, lane_addr: np.ndarray) -> np.ndarray:
    """ldmatrix .x4 .b16: (32 lanes) row addresses -> (32 threads, 4 registers) of 4 bytes: register q of thread t
    holds bytes 4 (t % 4).. of row t / 4 of matrix q, whose rows lanes 8q..8q+7 addressed."""
    t = np.arange(32)
    rows = lane_addr[(np.arange(4)[None, :] * 8 + (t // 4)[:, None])]  # (32, 4) row start of each register
    idx = rows[..., None] + 4 * (t % 4)[:, None, None] + np.arange(4)
    return stage[idx]  # (32, 4, 4) bytes


def mma_sync_tile(cfg: GemmConfig, d: dict, stage: np.ndarray) -> np.ndarray:
    """(bm, bn) float64 products of one stage through every consumer warp's ldmatrix and m16n8k16 mma.sync, put
    where the epilogue stores them (acc_row, acc_col_block)."""
    t = cfg.wgmma
    e = t.itemsize
    lane = np.arange(32)
    q = lane >> 3
    nb = cfg.bn // 4 // 8
    out = np.zeros((cfg.bm, cfg.bn))
    g, c = lane // 4, lane % 4
    for cw in range(cfg.consumers):
        a_base = cw * d["GEMM_A_WG_BYTES"]
        for w in range(4):
            acc = np.zeros((32, cfg.bn // 2))
            for s in range(d["GEMM_STEPS"]):
                for mi in range(4):
                    af = _ldmatrix_x4(stage, tile_byte(cfg, a_base, d["GEMM_A_BOX_BYTES"],
                                                       16 * mi + (q & 1) * 8 + (lane & 7), 32 * s + (q >> 1) * 16))
                    a_vals = t.from_bits(af.reshape(32, 4, 4).view(t.carrier).reshape(32, 4, 4 // e))
                    for jj in range(nb // 2):
                        bf = _ldmatrix_x4(stage, tile_byte(cfg, cfg.a_bytes, d["GEMM_B_BOX_BYTES"],
                                                           w * (cfg.bn // 4) + 16 * jj + (q >> 1) * 8 + (lane & 7),
                                                           32 * s + (q & 1) * 16))
                        b_vals = t.from_bits(bf.view(t.carrier).reshape(32, 4, 4 // e))
                        for half, (b0, b1) in enumerate(((0, 1), (2, 3))):
                            j = 2 * jj + half
                            acc[:, 4 * (mi * nb + j):4 * (mi * nb + j) + 4] += _mma_m16n8(a_vals, b_vals[:, b0],
                                                                                      b_vals[:, b1])
            for i in range(0, cfg.bn // 2, 2):  # the epilogue's placement of pair (i, i + 1)
                row = 16 * ((i >> 2) // nb) + g + 8 * ((i >> 1) & 1)
                col = w * (cfg.bn // 4) + 8 * ((i >> 2) % nb) + 2 * c
                out[cw * 64 + row, col] += acc[:, i]
                out[cw * 64 + row, col + 1] += acc[:, i + 1]
    return out


def _mma_m16n8(a_regs: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """m16n8 x 32 bytes of K from register fragments (PTX ISA, mma.m16n8k16 .row.col): thread (g, c) holds A rows
    g (regs 0, 2) and g + 8 (regs 1, 3) at K chunk c of bytes 0-15 (regs 0, 1) and 16-31 (regs 2, 3), B column g
    at the same K (b0: bytes 0-15, b1: 16-31); D c0, c1 = row g, columns 2c, 2c + 1; c2, c3 = row g + 8."""
    per = a_regs.shape[-1]  # elements per register
    k = 2 * 4 * per  # K of one product, in elements
    g, c = np.arange(32) // 4, np.arange(32) % 4
    a = np.zeros((16, k))
    bm = np.zeros((8, k))
    for t in range(32):
        for half in range(2):
            cols = slice(half * k // 2 + per * c[t], half * k // 2 + per * (c[t] + 1))
            a[g[t], cols] = a_regs[t, 2 * half]
            a[g[t] + 8, cols] = a_regs[t, 2 * half + 1]
            bm[g[t], cols] = (b0 if half == 0 else b1)[t]
    dd = a @ bm.T
    out = np.zeros((32, 4))
    out[:, 0], out[:, 1] = dd[g, 2 * c], dd[g, 2 * c + 1]
    out[:, 2], out[:, 3] = dd[g + 8, 2 * c], dd[g + 8, 2 * c + 1]
    return out


def accumulator_positions(config: GemmConfig) -> tuple[np.ndarray, np.ndarray]:
    """(128 threads, bn/2 values) row and column in the warpgroup's 64 x bn slice where each accumulator value
    belongs: the wgmma accumulator map (wgmma oracle), or for mma.sync the m16n8 D fragment of atom mi, block j of
    the thread's warp (value 4 (mi nb + j) + r: rows g, g, g + 8, g + 8; columns 2c, 2c + 1)."""
    if config.mma != "mma_sync":
        return wgmma_oracle.accumulator_map(config.bn)
    nb = config.bn // 32
    t = np.arange(128)[:, None]
    w, g, c = t // 32, (t % 32) // 4, t % 4
    i = np.arange(config.bn // 2)[None, :]
    mi, j, r = (i >> 2) // nb, (i >> 2) % nb, i & 3
    return 16 * mi + g + 8 * (r >> 1), w * (config.bn // 4) + 8 * j + 2 * c + (r & 1)


def _acc_row_block(config: GemmConfig, i, w, g):
    """The kernel's acc_row(i, w, g) and acc_col_block(i, w)."""
    nb = config.bn // 32
    if config.mma == "mma_sync":
        return 16 * ((i >> 2) // nb) + g + 8 * ((i >> 1) & 1), w * (config.bn // 4) + 8 * ((i >> 2) % nb)
    return 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 0 * w


def _staged(row, byte):
    """The kernel's staged_at: byte `byte` of row `row` of a 128B-swizzled staging buffer."""
    return row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15))


def _stmatrix_x4(lane_addr, trans: bool):
    """stmatrix .x4 .b16 (PTX ISA): (32 lanes) row addresses -> (32 threads, 4 registers, 2 halves) the shared
    byte each 16-bit half lands at. Lane 8j + r gives row r of matrix j; register j of thread t holds row t / 4,
    columns 2 (t % 4) and + 1 (low half first) of matrix j; .trans stores element (r, c) at row c, column r."""
    t, j, e = np.arange(32)[:, None, None], np.arange(4)[None, :, None], np.arange(2)[None, None, :]
    r, c = t // 4, 2 * (t % 4) + e
    return lane_addr[8 * j + c] + 2 * r if trans else lane_addr[8 * j + r] + 2 * c


def staged_outputs(config: GemmConfig, panel: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every output the epilogue writes into the staging buffer of panel `panel` of one m64 atom, by the kernel's
    addresses written out: (staging byte, the output's row in the atom, its column in the panel, thread, accumulator
    value index). With stmatrix the kernel gives lane addresses and stmatrix (`_stmatrix_x4`) places the values;
    else each thread stores pair (i, i + 1) itself (swapped: each value)."""
    e, width = config.out_itemsize, config.epilogue_width
    if config.stmatrix:
        return _stmatrix_outputs(config, panel)
    t = np.arange(128)[:, None]
    w, g, c = t // 32, (t % 32) // 4, t % 4
    i = np.arange(0, config.bn // 2, 2)[None, :]
    row, block = _acc_row_block(config, i, w, g)
    row, block = np.broadcast_arrays(row, block - panel * width)
    keep = (block >= 0) & (block < width)
    tt, ii = np.nonzero(keep)
    row, col = row[keep], (block + 2 * c)[keep]
    # the pair's two values: one 32-bit (fp32: 64-bit) store of (row, col) and (row, col + 1); swapped, a 16-bit
    # store each, at row col (+ 1) of the staged C^T
    at = [_staged(col + v, row * e) if config.swap_ab else _staged(row, col * e) + v * e for v in (0, 1)]
    return (np.concatenate(at), np.tile(row, 2), np.concatenate([col, col + 1]), np.tile(tt, 2),
            np.concatenate([2 * ii, 2 * ii + 1]))


def _stmatrix_outputs(config: GemmConfig, panel: int):
    width = config.epilogue_width
    lane = np.arange(32)
    mat, mrow = lane >> 3, lane & 7
    out = []
    for w in range(4):
        for i0 in range(0, config.bn // 2, 8):
            if not 0 <= _acc_row_block(config, i0, w, 0)[1] - panel * width < width:
                continue
            row, block = _acc_row_block(config, i0 + 2 * mat, w, mrow)  # the kernel's lane addresses
            block = block - panel * width
            lane_addr = _staged(block + mrow, (row - mrow) * 2) if config.swap_ab else _staged(row, block * 2)
            at = _stmatrix_x4(lane_addr, config.swap_ab)  # (thread, register j, half h): value i0 + 2j + h
            t, j, h = np.meshgrid(np.arange(32), np.arange(4), np.arange(2), indexing="ij")
            value = i0 + 2 * j + h
            row_v, block_v = _acc_row_block(config, value, w, t // 4)  # where the kernel means value to go
            out.append((at.ravel(), row_v.ravel(), (block_v - panel * width + 2 * (t % 4) + h).ravel(),
                        (32 * w + t).ravel(), value.ravel()))
    return tuple(np.concatenate(parts) for parts in zip(*out))
