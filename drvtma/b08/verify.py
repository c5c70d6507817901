"""Checksums of the B-08 kernels and their NumPy reference (cu/include/drvtma/b08_tile.cuh). Needs no GPU.

Every kernel writes, per tile and per consumer warp, two u32 sums (wrapping): one of the shared-memory bits it
consumed and one of the FMA results, each element mixed with its global index. Summing over warps gives one pair
per tile; the host computes the same pair here and `check_tile_sums` names the mode, the tile, expected and got.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DrvtmaError

TILE_ELEMS = 1024
TILE_BYTES = TILE_ELEMS * 4
BOX_SIDE = 32
SUMS_POISON = 0xDEADBEEF  # fill of the sums buffer before each checked launch; a tile nobody wrote keeps it

# Mirrors mix_input / mix_result in b08_tile.cuh.
_IN_INDEX, _IN_MUL = np.uint32(0x9E3779B9), np.uint32(0x85EBCA6B)
_OUT_INDEX, _OUT_MUL = np.uint32(0x7FEB352D), np.uint32(0x846CA68B)
_CHUNK_ELEMS = 1 << 22  # bounds the temporaries of the reference on 1 GiB inputs


class ChecksumMismatch(DrvtmaError):
    """A kernel consumed other bytes than the input holds, or computed other results, in at least one tile."""

    def __init__(self, mode: str, message: str, tiles: list[int]):
        self.mode, self.tiles = mode, tiles
        super().__init__(f"{mode}: {message}")


# ------------------------------------------------------------------------------------------ exact fp32 FMA

def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fmaf(a, b, c) on float32 arrays with one rounding, as the GPU computes it.

    a*b is exact in float64; a + b rounded to float64 and then to float32 can round twice, which only matters
    when the float64 sum lands exactly on a float32 midpoint: then the sign of the float64 error decides.
    """
    a, b, c = (np.asarray(x, dtype=np.float32).astype(np.float64) for x in (a, b, c))
    p = a * b
    s = p + c
    err = (p - (s - (s - p))) + (c - (s - p))  # TwoSum: s + err == p + c exactly
    r = s.astype(np.float32)
    toward = np.where(s > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
    other = np.nextafter(r, toward)
    with np.errstate(invalid="ignore", over="ignore"):
        midpoint = (r.astype(np.float64) + other.astype(np.float64)) * 0.5 == s
    fix = midpoint & (err != 0) & np.isfinite(s)
    if np.any(fix):
        lo, hi = np.minimum(r, other), np.maximum(r, other)
        r = np.where(fix, np.where(err > 0, hi, lo), r).astype(np.float32)
    return r


def burn_fma(x: np.ndarray, fma_iters: int) -> np.ndarray:
    """The kernels' burn loop: acc = 0; fma_iters times acc = fmaf(x, acc, 1)."""
    x = np.asarray(x, dtype=np.float32)
    acc = np.zeros_like(x)
    one = np.ones_like(x)
    for _ in range(int(fma_iters)):
        acc = fma_f32(x, acc, one)
    return acc


def burn_fma_table(values: np.ndarray, fma_list) -> dict[int, np.ndarray]:
    """burn_fma(values, k) for every k in fma_list, in one pass of max(fma_list) steps."""
    wanted = sorted({int(k) for k in fma_list})
    out: dict[int, np.ndarray] = {}
    x = np.asarray(values, dtype=np.float32)
    acc = np.zeros_like(x)
    one = np.ones_like(x)
    if 0 in wanted:
        out[0] = acc.copy()
    for k in range(1, (wanted[-1] if wanted else 0) + 1):
        acc = fma_f32(x, acc, one)
        if k in wanted:
            out[k] = acc.copy()
    return out


# ------------------------------------------------------------------------------------------ inputs

@dataclass
class TileInput:
    """An fp32 input drawn from a small pool of values (data = pool[codes]), so the FMA reference runs on the pool."""

    data: np.ndarray
    pool: np.ndarray
    codes: np.ndarray

    @property
    def n(self) -> int:
        return int(self.data.size)

    @classmethod
    def from_array(cls, data: np.ndarray) -> TileInput:
        data = np.ascontiguousarray(data, dtype=np.float32).ravel()
        pool, codes = np.unique(data.view(np.uint32), return_inverse=True)
        return cls(data, pool.view(np.float32), codes.astype(np.int64).ravel())


def make_input(n: int, seed: int = 0, pool_size: int = 65536) -> TileInput:
    """n random fp32 values in (-0.95, 0.95), no zeros, from a pool of pool_size distinct values.

    |x| < 1 keeps the FMA chain finite for any fma_iters, so results compare bit for bit.
    """
    rng = np.random.default_rng(seed)
    pool = rng.uniform(0.05, 0.95, size=pool_size).astype(np.float32)
    pool *= np.where(rng.random(pool_size) < 0.5, -1, 1).astype(np.float32)
    codes = rng.integers(0, pool_size, size=n, dtype=np.uint16 if pool_size <= 65536 else np.int64)
    return TileInput(pool[codes], pool, codes)


# ------------------------------------------------------------------------------------------ reference sums

def _mix(bits: np.ndarray, gidx: np.ndarray, index_mul: np.uint32, mul: np.uint32) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (bits ^ (gidx * index_mul)) * mul


def _chunk_tiles() -> int:
    return max(1, _CHUNK_ELEMS // TILE_ELEMS)


def reference_sums(inp: TileInput, fma_list, *, tiling: str = "linear", tiles_x: int | None = None
                   ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """(input sums [num_tiles], {fma_iters: result sums [num_tiles]}) as uint32, for one tiling of the input.

    tiling "linear": tile t is elements [1024 t, 1024 t + 1024); "box": the input viewed as [rows, 32 * tiles_x]
    and tile t the 32x32 box at column block t % tiles_x, row block t // tiles_x (the tensor2d kernel's order).
    """
    n = inp.n
    if n % TILE_ELEMS:
        raise ValueError(f"n = {n} is not a multiple of the {TILE_ELEMS}-element tile")
    num_tiles = n // TILE_ELEMS
    fma_list = sorted({int(k) for k in fma_list})
    results = {k: v.view(np.uint32) for k, v in burn_fma_table(inp.pool, fma_list).items()}
    in_sums = np.zeros(num_tiles, dtype=np.uint32)
    out_sums = {k: np.zeros(num_tiles, dtype=np.uint32) for k in fma_list}
    bits_all = inp.data.view(np.uint32)

    if tiling == "linear":
        step = _chunk_tiles()
        for t0 in range(0, num_tiles, step):
            t1 = min(num_tiles, t0 + step)
            lo, hi = t0 * TILE_ELEMS, t1 * TILE_ELEMS
            gidx = np.arange(lo, hi, dtype=np.uint32)
            codes = inp.codes[lo:hi]
            in_sums[t0:t1] = _mix(bits_all[lo:hi], gidx, _IN_INDEX, _IN_MUL).reshape(-1, TILE_ELEMS).sum(
                axis=1, dtype=np.uint32)
            for k in fma_list:
                out_sums[k][t0:t1] = _mix(results[k][codes], gidx, _OUT_INDEX, _OUT_MUL).reshape(
                    -1, TILE_ELEMS).sum(axis=1, dtype=np.uint32)
        return in_sums, out_sums

    if tiling != "box":
        raise ValueError(f"tiling must be 'linear' or 'box', got {tiling!r}")
    if not tiles_x or num_tiles % tiles_x:
        raise ValueError(f"tiles_x = {tiles_x} must divide the {num_tiles} tiles")
    width = tiles_x * BOX_SIDE
    rows_of_boxes = num_tiles // tiles_x
    step = max(1, _CHUNK_ELEMS // (width * BOX_SIDE))
    for r0 in range(0, rows_of_boxes, step):
        r1 = min(rows_of_boxes, r0 + step)
        lo, hi = r0 * BOX_SIDE * width, r1 * BOX_SIDE * width
        gidx = np.arange(lo, hi, dtype=np.uint32)

        def per_box(terms: np.ndarray) -> np.ndarray:
            # [box rows, 32 rows, tiles_x, 32 cols] -> one sum per box, numbered row-block-major
            return terms.reshape(r1 - r0, BOX_SIDE, tiles_x, BOX_SIDE).sum(axis=(1, 3), dtype=np.uint32).ravel()

        in_sums[r0 * tiles_x:r1 * tiles_x] = per_box(_mix(bits_all[lo:hi], gidx, _IN_INDEX, _IN_MUL))
        for k in fma_list:
            out_sums[k][r0 * tiles_x:r1 * tiles_x] = per_box(
                _mix(results[k][inp.codes[lo:hi]], gidx, _OUT_INDEX, _OUT_MUL))
    return in_sums, out_sums


class Reference:
    """Reference sums for one input, computed once per (tiling, fma_iters) and reused across modes and runs."""

    def __init__(self, inp: TileInput):
        self.inp = inp
        self._cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def prepare(self, fma_list, *, tiling: str = "linear", tiles_x: int | None = None) -> None:
        missing = [k for k in {int(k) for k in fma_list} if (tiling, tiles_x, k) not in self._cache]
        if not missing:
            return
        in_sums, out_sums = reference_sums(self.inp, missing, tiling=tiling, tiles_x=tiles_x)
        for k in missing:
            self._cache[(tiling, tiles_x, k)] = (in_sums, out_sums[k])

    def sums(self, fma_iters: int, *, tiling: str = "linear", tiles_x: int | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        self.prepare([fma_iters], tiling=tiling, tiles_x=tiles_x)
        return self._cache[(tiling, tiles_x, int(fma_iters))]


# ------------------------------------------------------------------------------------------ comparison

def fold_warps(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[tiles, slots, 2] uint32 as the kernel wrote it (a slot per consumer warp, or one when a warp owns the
    tile) -> (input sums, result sums) per tile, wrapping."""
    raw = np.asarray(raw, dtype=np.uint32)
    if raw.ndim != 3 or raw.shape[2] != 2:
        raise ValueError(f"kernel sums must have shape [tiles, slots, 2], got {raw.shape}")
    return raw[:, :, 0].sum(axis=1, dtype=np.uint32), raw[:, :, 1].sum(axis=1, dtype=np.uint32)


def check_tile_sums(mode: str, raw: np.ndarray, expected_in: np.ndarray, expected_out: np.ndarray, *,
                    fma_iters: int | None = None, show: int = 5) -> None:
    """Raise ChecksumMismatch naming the mode and the first wrong tiles (expected vs got), else return None."""
    raw = np.asarray(raw, dtype=np.uint32)
    got_in, got_out = fold_warps(raw)
    if got_in.shape != expected_in.shape:
        raise ChecksumMismatch(mode, f"{got_in.size} tiles of sums for {expected_in.size} expected tiles", [])
    bad_in = got_in != expected_in
    bad_out = got_out != expected_out
    bad = np.flatnonzero(bad_in | bad_out)
    if bad.size == 0:
        return
    unwritten = np.all(raw == np.uint32(SUMS_POISON), axis=2)  # [tiles, warps]
    lines = []
    for t in bad[:show]:
        parts = []
        if bad_in[t]:
            parts.append(f"input bits sum expected 0x{int(expected_in[t]):08x} got 0x{int(got_in[t]):08x}")
        if bad_out[t]:
            parts.append(f"FMA result sum expected 0x{int(expected_out[t]):08x} got 0x{int(got_out[t]):08x}")
        missing = np.flatnonzero(unwritten[t])
        if missing.size:
            parts.append(f"warp(s) {missing.tolist()} never wrote this tile")
        lines.append(f"  tile {int(t)}: " + "; ".join(parts))
    what = []
    if bad_in.any():
        what.append(f"{int(bad_in.sum())} with wrong input bytes")
    if bad_out.any():
        what.append(f"{int(bad_out.sum())} with wrong FMA results")
    at = f" at fma_iters={fma_iters}" if fma_iters is not None else ""
    head = f"{bad.size} of {got_in.size} tiles fail verification{at} ({', '.join(what)}); first:"
    raise ChecksumMismatch(mode, "\n".join([head, *lines]), bad.tolist())


def check_same_total(results: dict[str, np.ndarray]) -> None:
    """All modes consumed the same bytes in total, whatever their tiling: sum of all input sums agree."""
    totals = {mode: int(fold_warps(raw)[0].sum(dtype=np.uint32)) for mode, raw in results.items()}
    if len(set(totals.values())) > 1:
        listing = ", ".join(f"{m} 0x{t:08x}" for m, t in totals.items())
        raise ChecksumMismatch("/".join(totals), f"modes disagree on the total input checksum: {listing}", [])
