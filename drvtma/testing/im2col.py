"""Generators of im2col specs and loads against a chooser (`strategies.RngChooser` for seeded GPU batches,
`DrawChooser` for hypothesis): valid specs with loads for the oracle-vs-GPU probe, and edge specs (each field drawn
at or next to a rule's limit) for the validator-vs-driver fuzz."""

from __future__ import annotations

import numpy as np

from ..tma.dtypes import ALL_DTYPES, PACKED_DTYPES, tma_dtype
from ..tma.im2col.spec import CORNER_RANGE, MAX_CHANNELS_PER_PIXEL, MAX_PIXELS_PER_COLUMN, OFFSET_RANGE, Im2colSpec
from ..tma.tiled.spec import (
    SM90_SWIZZLES,
    SWIZZLE_SPAN_BYTES,
    Interleave,
    L2Promotion,
    OobFill,
    Swizzle,
    contiguous_strides_bytes,
)
from .strategies import ADDRESS_BASE

# Loads the probe can land: the oracle models INTERLEAVE_NONE; images stay small so a batch holds many.
MAX_PROBE_SMEM = 32 * 1024


def build_im2col_spec(ch, *, dtypes=ALL_DTYPES, ranks=(3, 4, 5), max_spatial: int = 9, max_images: int = 3,
                      pad_strides: bool = True) -> Im2colSpec:
    """A valid non-interleaved im2col spec with a small tensor (corners within the tensor's reach)."""
    dt = tma_dtype(ch.choice(list(dtypes)))
    rank = ch.choice(list(ranks))
    ns = rank - 2
    swizzle = ch.choice(SM90_SWIZZLES)
    span = SWIZZLE_SPAN_BYTES[swizzle]
    unit = max(1, 16 // dt.itemsize)  # channels per 16 B
    most = min(MAX_CHANNELS_PER_PIXEL, (span or 256 * dt.itemsize) // dt.itemsize)
    cpp = unit * ch.integer(1, max(1, min(most // unit, 8)))
    channels = ch.choice([cpp, cpp + unit * ch.integer(0, 2), max(unit, cpp - unit)])  # C beyond, equal or short
    spatial = [ch.integer(1, max_spatial) for _ in range(ns)]
    shape = (ch.integer(1, max_images), *spatial, channels)
    strides = list(contiguous_strides_bytes(shape, dt.itemsize))
    if pad_strides and ch.chance(0.3):  # padded rows: strides above contiguous, 16-byte multiples
        strides = list(contiguous_strides_bytes(shape, dt.itemsize))
        step = dt.itemsize * channels + 16 * ch.integer(0, 3)
        step = -(-step // 16) * 16
        for axis in range(rank - 2, -1, -1):
            strides[axis] = step
            step = -(-(step * shape[axis] + 16 * ch.integer(0, 2)) // 16) * 16
    lo_c, hi_c = CORNER_RANGE[rank]
    lower, upper = [], []
    for s in spatial:
        lo = ch.integer(max(lo_c, -3), min(hi_c, 2))
        up = ch.integer(max(lo_c, lo - s + 1), min(hi_c, 3))  # the box [lo, s - 1 + up] is never empty
        lower.append(lo)
        upper.append(up)
    pitch = max(cpp * dt.itemsize, span)
    pixels = ch.integer(1, min(MAX_PIXELS_PER_COLUMN, MAX_PROBE_SMEM // pitch, 96))
    es = (ch.integer(1, 8), *(ch.integer(1, 3) for _ in range(ns)), ch.integer(1, 8))
    fill = ch.choice([OobFill.ZERO, OobFill.NAN] if dt.is_float else [OobFill.ZERO])
    return Im2colSpec(dt, shape, tuple(strides), tuple(lower), tuple(upper), cpp, pixels, es,
                      Interleave.NONE, swizzle, ch.choice(list(L2Promotion)), fill)


def build_im2col_loads(ch, spec: Im2colSpec, count: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` loads (coordinates, offsets; NumPy order): bases inside the box, channel starts at 16-byte steps
    (some past C), offsets in the rank's range but mostly small, images from before the first to past the last."""
    unit = max(1, 16 // spec.itemsize)
    off_hi = min(OFFSET_RANGE[spec.rank][1], 4)
    coords = np.zeros((count, spec.rank), dtype=np.int64)
    offsets = np.zeros((count, spec.rank - 2), dtype=np.int64)
    for i in range(count):
        coords[i, 0] = ch.integer(-1, spec.shape[0])
        for a, (lo, hi) in enumerate(spec.box_bounds):
            coords[i, 1 + a] = ch.integer(lo, hi)
            offsets[i, a] = ch.integer(0, off_hi)
        coords[i, -1] = unit * ch.integer(-1, -(-spec.shape[-1] // unit))
    return coords, offsets


EDGE_AREAS = ("rank", "dims", "corners", "box", "channels", "pixels", "strides", "element_strides", "swizzle", "fill",
              "interleave", "address", "smem", "dtype", "overlap", "none")


def build_edge_im2col_spec(ch) -> Im2colSpec:
    """Any im2col spec: one area (EDGE_AREAS) drawn at, just inside or just outside its rules' limits, the rest
    drawn safe (the fuzz of the validator against the driver): about one spec in three is valid."""
    focus = ch.choice(EDGE_AREAS)
    dt = tma_dtype(ch.choice(list(PACKED_DTYPES) if focus == "dtype" and ch.chance(0.5) else list(ALL_DTYPES)))
    rank = ch.choice([2, 6, 3, 4, 5]) if focus == "rank" else ch.choice([3, 4, 5])
    ns = max(rank - 2, 0)
    lo_c, hi_c = CORNER_RANGE.get(rank, (-16, 15))
    edge = lambda lo, hi: ch.choice([lo - 1, lo, lo + 1, 0, hi - 1, hi, hi + 1])  # noqa: E731
    spatial = [ch.choice([1, 2, 3, 7, 16, 200, 1 << 16]) for _ in range(ns)]
    unit = max(1, 16 // dt.itemsize)
    channels = ch.choice([1, unit, 4 * unit, 300])
    shape = [ch.integer(1, 4), *spatial, channels][-rank:] if rank >= 3 else [ch.integer(1, 4), channels]
    if focus == "dims":  # N at the driver's limits (no byte is read: only the encode is asked)
        shape[0] = ch.choice([0, 1, (1 << 32) - 1, 1 << 32, (1 << 32) + 1])
    inner = -(-channels * dt.itemsize // 16) * 16 + (ch.choice([0, 8, 16]) if focus == "strides" else 0)
    strides = [s * inner for s in contiguous_strides_bytes(shape[:-1], 1)] + [dt.itemsize]
    if focus == "strides" and ch.chance(0.3):
        strides[0] = ch.choice([0, 1 << 40, (1 << 40) - 16])
    elif focus == "strides" and ch.chance(0.2):
        strides[-1] = 2 * dt.itemsize  # the channels not contiguous
    if focus == "overlap" and rank >= 3:  # an outer axis at stride 0 (shape > 1), or inside the next inner one
        axis = ch.integer(0, rank - 2)
        shape[axis] = max(shape[axis], 2)
        strides[axis] = 0 if ch.chance(0.5) else strides[axis + 1]
    lower = [0] * ns
    upper = [0 for _ in spatial]
    if focus == "corners":
        lower = [edge(lo_c, hi_c) if ch.chance(0.5) else 0 for _ in range(ns)]
        upper = [edge(lo_c, hi_c) if ch.chance(0.5) else 0 for _ in range(ns)]
    elif focus == "box" and ns:
        a = ch.integer(0, ns - 1)
        lower[a] = ch.integer(-2, 1)
        upper[a] = lower[a] - spatial[a] + ch.choice([-1, 0, 1])
    swizzle = ch.choice([*SM90_SWIZZLES, 4, 5, 6, 7]) if focus == "swizzle" and ch.chance(0.5) else ch.choice(SM90_SWIZZLES)
    span = SWIZZLE_SPAN_BYTES.get(swizzle) or 256 * dt.itemsize
    safe_cpp = unit * ch.integer(1, max(1, min(256, span // dt.itemsize) // unit))
    cpp = (ch.choice([0, 1, unit - 1 or 1, unit, unit + 1, 255, 256, 257]) if focus == "channels" else
           ch.choice([safe_cpp, safe_cpp + unit]) if focus == "swizzle" else safe_cpp)
    pitch = max(cpp * dt.itemsize, SWIZZLE_SPAN_BYTES.get(swizzle, 0), 1)
    pixels = (ch.choice([0, 1, 1023, 1024, 1025]) if focus == "pixels" else
              ch.choice([227 * 1024 // pitch, 227 * 1024 // pitch + 1, 228 * 1024 // max(cpp * dt.itemsize, 1),
                         228 * 1024 // max(cpp * dt.itemsize, 1) + 1]) if focus == "smem" else
              ch.integer(1, max(1, min(1024, 32 * 1024 // pitch))))
    es = [ch.choice([0, 1, 8, 9]) if focus == "element_strides" and ch.chance(0.5) else ch.integer(1, 3)
          for _ in shape]
    interleave = ch.choice(list(Interleave)) if focus == "interleave" or ch.chance(0.15) else Interleave.NONE
    if interleave == Interleave.B32 and ch.chance(0.5):
        swizzle = Swizzle.B32
    fill = ch.choice(list(OobFill)) if focus == "fill" else (OobFill.NAN if dt.is_float and ch.chance(0.3)
                                                             else OobFill.ZERO)
    base = ADDRESS_BASE + (ch.choice([8, 16, 32, 48]) if focus == "address" else 0)
    return Im2colSpec(dt, tuple(shape), tuple(strides), tuple(lower), tuple(upper), cpp, pixels, tuple(es),
                      interleave, swizzle, ch.choice(list(L2Promotion)), fill, base_address=base)
