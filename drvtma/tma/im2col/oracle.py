"""What one im2col load writes to shared memory, computed with NumPy: the reference of the im2col probes.

The model (PTX ISA "im2col mode"; Triton's Hopper-tested tutorial; the GPU fuzz of tests/test_im2col_gpu.py matches
it bit for bit, docs/im2col.md):
- coordinates (NumPy order n, [d, [h,]] w, c): n and c are start offsets; the spatial ones are the filter base, which
  must lie inside the bounding box [lower, S - 1 + upper] of each spatial axis (`check_im2col_coordinates`).
- offsets (D, H, W order) are added to the base of every pixel: pixel p loads position base_p + offsets.
- the walk: pixel 0 is at the given base; W steps by its element stride (the convolution stride); past the box's
  upper bound it wraps to the lower bound and H steps; then D; then N steps by N's element stride, into the next
  image it names, not into image n + 1 (docs/im2col.md; tests/data/im2col_walk_h100.json.gz replays the loads).
- each pixel brings channels c .. c + channels_per_pixel - 1; an element outside the tensor (any axis < 0 or >= its
  extent, N past the last image included) is the fill (zero or the NaN pattern), never converted.
- pixel p's row lands at dst + p * row pitch (the row padded to the swizzle span), swizzled on the absolute shared
  address like tiled boxes; bytes past the rows are left as they were.
- the transaction: pixels x channels x element size (`Im2colSpec.expect_tx_bytes`).
"""

from __future__ import annotations

import numpy as np

from ...errors import TensorMapError
from ..tiled.oracle import (
    _UINT_OF_SIZE,
    INT32_MAX,
    INT32_MIN,
    SMEM_DST_ALIGNMENT,
    _gather_rows,
    swizzle_addresses,
    tma_load_convert,
)
from ..tiled.spec import Interleave, OobFill
from .spec import OFFSET_RANGE, Im2colSpec, spatial_name


def _int_rows(values, width: int, what: str) -> np.ndarray:
    try:
        a = np.asarray(values)
    except (TypeError, ValueError):
        a = None
    if a is None or (a.size and a.dtype.kind not in "iu"):
        raise TensorMapError("coord_type", what, "ragged" if a is None else str(a.dtype), f"give integer {what}, "
                             "one row per load")
    a = a.astype(np.int64).reshape(-1, width) if a.size or width == 0 else np.zeros((0, width), np.int64)
    if a.ndim != 2 or a.shape[1] != width:
        raise TensorMapError("coord_rank", what, a.shape, f"give {width} {what} per load")
    return a


def check_im2col_coordinates(spec: Im2colSpec, coords, offsets) -> tuple[np.ndarray, np.ndarray]:
    """(coords (L, rank), offsets (L, rank - 2)) int64, NumPy order, after the load's rules:
    s32 coordinates, a 16-byte aligned channel start, offsets in the rank's range, and the filter base inside the
    bounding box (outside, the PTX ISA gives no meaning: drvtma refuses it, rule ``base_outside_box``)."""
    spec.validate()
    r = spec.rank
    c = _int_rows(coords, r, "coordinates")
    o = _int_rows(offsets, r - 2, "offsets")
    if len(o) == 1 and len(c) > 1:
        o = np.repeat(o, len(c), axis=0)
    if len(o) != len(c):
        raise TensorMapError("coord_rank", "offsets", len(o), f"give one offset row per load ({len(c)})")
    bad: np.ndarray = np.argwhere((c < INT32_MIN) | (c > INT32_MAX))  # then flatnonzero's 1-D indices
    if len(bad):
        i, a = (int(v) for v in bad[0])
        raise TensorMapError("coord_range", f"coordinates[{i}][{a}]", int(c[i, a]), "use s32 coordinates")
    unit = 16 // np.gcd(16, spec.itemsize)
    bad = np.flatnonzero(c[:, -1] % unit)
    if len(bad):
        v = int(c[bad[0], -1])
        raise TensorMapError("coord_alignment", f"coordinates[{int(bad[0])}][{r - 1}]", v,
                             f"use a channel start that is a multiple of {unit}",
                             f"channel {v} x {spec.itemsize} B is not a multiple of 16 B (tiled loads fault there)")
    lo_off, hi_off = OFFSET_RANGE[r]
    bad = np.argwhere((o < lo_off) | (o > hi_off))
    if len(bad):
        i, a = (int(v) for v in bad[0])
        raise TensorMapError("offset_range", f"offsets[{i}][{a}]", int(o[i, a]), f"use {lo_off}..{hi_off} at "
                             f"rank {r}", f"im2col offsets are unsigned, {lo_off}..{hi_off} at rank {r}")
    for a, (lo, hi) in enumerate(spec.box_bounds):
        bad = np.flatnonzero((c[:, 1 + a] < lo) | (c[:, 1 + a] > hi))
        if len(bad):
            v = int(c[bad[0], 1 + a])
            raise TensorMapError("base_outside_box", f"coordinates[{int(bad[0])}][{1 + a}]", v,
                                 f"use a filter base in [{lo}, {hi}] (the bounding box of "
                                 f"{spatial_name(spec, a)}; move the window with the offsets)",
                                 "the PTX ISA requires the filter base inside the bounding box")
    return c, o


def pixel_positions(spec: Im2colSpec, coords, offsets) -> np.ndarray:
    """(L, pixels, rank - 1) int64: the (n, [d, [h,]] w) position each pixel of each load reads (before bounds)."""
    c, o = check_im2col_coordinates(spec, coords, offsets)
    return walk(spec, c, o)


def walk(spec: Im2colSpec, c: np.ndarray, o: np.ndarray) -> np.ndarray:
    """`pixel_positions` of coordinates and offsets as `check_im2col_coordinates` returns them, in closed form,
    all pixels at once: each axis (W first) advances `a` steps from its base; the first row holds the steps from the
    base to the box's upper bound, every later row the whole box from its lower bound, and each finished row
    carries one step into the next axis out (past D: N, by N's element stride)."""
    assert spec.element_strides is not None  # __post_init__ fills it
    ns = spec.rank - 2
    bounds = np.asarray(spec.box_bounds, dtype=np.int64).reshape(ns, 2)
    step = np.asarray(spec.element_strides[1:-1], dtype=np.int64)
    out = np.empty((len(c), spec.pixels_per_column, ns + 1), dtype=np.int64)
    advance = np.broadcast_to(np.arange(spec.pixels_per_column, dtype=np.int64), (len(c), spec.pixels_per_column))
    for a in range(ns - 1, -1, -1):  # W first, then H, then D
        lo, hi, s = bounds[a, 0], bounds[a, 1], step[a]
        base = c[:, 1 + a][:, None]
        first = (hi - base) // s + 1  # positions from the base to the upper bound
        row = (hi - lo) // s + 1  # positions of a whole row, from the lower bound
        later = np.maximum(advance - first, 0)
        out[:, :, 1 + a] = np.where(advance < first, base + advance * s, lo + later % row * s) + o[:, a][:, None]
        advance = np.where(advance < first, 0, 1 + later // row)
    out[:, :, 0] = c[:, 0][:, None] + advance * int(spec.element_strides[0])
    return out


def _fill_value(spec: Im2colSpec) -> int:
    return int.from_bytes(spec.dtype.nan_fill_bytes(), "little") if spec.oob_fill == OobFill.NAN else 0


def im2col_values(spec: Im2colSpec, global_bytes, coords, offsets) -> np.ndarray:
    """(L, pixels, channels) raw bits (unsigned ints of itemsize) that the loads deliver, fill included."""
    c, o = check_im2col_coordinates(spec, coords, offsets)
    pos = walk(spec, c, o)
    raw = np.ascontiguousarray(np.asarray(global_bytes, dtype=np.uint8).reshape(-1))
    size = spec.itemsize
    chans = c[:, -1][:, None, None] + np.arange(spec.channels_per_pixel, dtype=np.int64)[None, None, :]
    pixel_in = np.asarray(((pos >= 0) & (pos < np.asarray(spec.shape[:-1], dtype=np.int64))).all(axis=-1,
                                                                                                 keepdims=True))
    inside = pixel_in & (chans >= 0) & (chans < spec.shape[-1])
    if _rows_are_chunks(spec, c):
        elements = _values_by_row(spec, raw, pos, c[:, -1], pixel_in[..., 0], inside)
    else:
        elements = _values_by_element(spec, raw, pos, chans, inside)
    elements = tma_load_convert(spec.dtype, elements).astype(_UINT_OF_SIZE[size], copy=False)
    return np.where(inside, elements, elements.dtype.type(_fill_value(spec)))


def _rows_are_chunks(spec: Im2colSpec, c: np.ndarray) -> bool:
    """A pixel's channels are one run of whole 16-byte chunks at a 16-byte aligned offset (every valid map: the
    channel start, the row of channels and the strides are multiples of 16 B)."""
    size = spec.itemsize
    return (spec.strides_bytes[-1] == size and (spec.channels_per_pixel * size) % 16 == 0
            and all(st % 16 == 0 for st in spec.strides_bytes[:-1]) and not ((c[:, -1] * size) % 16).any())


def _bounds_error(raw_size: int, end: int) -> ValueError:
    return ValueError(f"global_bytes holds {raw_size} B; the loads read up to byte {end}")


def _values_by_row(spec: Im2colSpec, raw, pos, c0, pixel_in, inside) -> np.ndarray:
    """The elements a pixel at a time: its channels gathered as 16-byte chunks (tiled.oracle._gather_rows)."""
    size, channels = spec.itemsize, spec.channels_per_pixel
    start = np.where(pixel_in, (pos * np.asarray(spec.strides_bytes[:-1], dtype=np.int64)).sum(axis=-1)
                     + (c0 * size)[:, None], 0)
    if inside.any():  # the furthest byte an in-bounds element needs: the same refusal as element by element
        last = np.minimum(channels, spec.shape[-1] - c0)  # channels in bounds end here, per load
        end = int(np.where(inside.any(axis=-1), start + (last * size)[:, None], 0).max())
        if end > raw.size:
            raise _bounds_error(raw.size, end)
    rows = _gather_rows(raw, start // 16, channels * size // 16)
    return rows.view(_UINT_OF_SIZE[size]).reshape(start.shape + (channels,))


def _values_by_element(spec: Im2colSpec, raw, pos, chans, inside) -> np.ndarray:
    """The elements one byte index at a time (any layout the row path does not cover)."""
    size, strides = spec.itemsize, np.asarray(spec.strides_bytes, dtype=np.int64)
    offs = (pos * strides[:-1]).sum(axis=-1)[..., None] + chans * strides[-1]
    if not inside.any():  # every element is the fill: nothing to read (global_bytes may hold less than one)
        return np.zeros(inside.shape, _UINT_OF_SIZE[size])
    offs = np.where(inside, offs, 0)
    if int(offs[inside].max()) + size > raw.size:
        raise _bounds_error(raw.size, int(offs.max()) + size)
    return raw[offs[..., None] + np.arange(size)].view(_UINT_OF_SIZE[size])[..., 0]


def im2col_image_bytes(spec: Im2colSpec, box_offset: int = 0) -> int:
    return -(-(box_offset + spec.smem_bytes) // 16) * 16


def im2col_images(spec: Im2colSpec, global_bytes, coords, offsets, *, box_offset: int = 0,
                  image_bytes: int | None = None, image_address: int = 0, poison: int = 0) -> np.ndarray:
    """(L, image_bytes) uint8: each load's shared-memory image, poisoned with the 32-bit `poison` where nothing
    lands; rows at `image_address + box_offset` (only its value mod 1024 matters for the swizzle)."""
    if spec.interleave != Interleave.NONE:
        # not validated yet: an out-of-range interleave is a plain int, without a name
        raise TensorMapError("oracle_interleave", "interleave", getattr(spec.interleave, "name", spec.interleave),
                             "use INTERLEAVE_NONE", "the oracle models non-interleaved maps only")
    dst = image_address + box_offset
    if dst % SMEM_DST_ALIGNMENT or image_address % 16:
        raise TensorMapError("smem_alignment", "box_offset", box_offset, "use a 128-byte aligned destination")
    image_bytes = im2col_image_bytes(spec, box_offset) if image_bytes is None else image_bytes
    if image_bytes % 4 or image_bytes < box_offset + spec.smem_bytes:
        raise ValueError(f"image_bytes {image_bytes} must be a multiple of 4 and hold the rows "
                         f"({box_offset} + {spec.smem_bytes} B)")
    values = im2col_values(spec, global_bytes, coords, offsets)
    loads = values.shape[0]
    images = np.empty((loads, image_bytes // 4), dtype=np.uint32)
    images[:] = np.uint32(poison & 0xFFFFFFFF)
    images = images.view(np.uint8)
    unswizzled = (dst + np.arange(spec.pixels_per_column, dtype=np.int64)[:, None] * spec.row_pitch_bytes
                  + np.arange(spec.row_bytes, dtype=np.int64)[None, :])
    where = (swizzle_addresses(unswizzled, spec.swizzle) - image_address).reshape(-1)
    images[:, where] = np.ascontiguousarray(values).view(np.uint8).reshape(loads, -1)
    return images


def im2col_image(spec: Im2colSpec, global_bytes, coords, offsets, **kwargs) -> np.ndarray:
    """One load's image (see `im2col_images`)."""
    return im2col_images(spec, global_bytes, [tuple(coords)], [tuple(offsets)], **kwargs)[0]


def kernel_im2col_rows(spec: Im2colSpec, c: np.ndarray, o: np.ndarray) -> np.ndarray:
    """(L, 8) int32 rows as the probe kernel takes them: 5 coordinates dim 0 (C) first, then 3 offsets W first;
    unused entries 0. `c`, `o` are check_im2col_coordinates' result."""
    rows = np.zeros((len(c), 8), dtype=np.int32)
    rows[:, :spec.rank] = c[:, ::-1]
    rows[:, 5:5 + spec.rank - 2] = o[:, ::-1]
    return rows
