"""Which global element each cell of a TMA load's shared-memory image holds, as `tma.tiled.oracle` says.

Nothing here places an element: the oracle is run on a tensor whose elements hold their own ids (an unsigned type
of the same size, so no load conversion touches them; wide ids in several byte planes when the type is narrow),
and the ids it puts in the image are read back as global coordinates. Fill reads id 0 (ids start at 1); bytes the
load never writes differ between two runs with different poison words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, as_int
from ..tma.dtypes import tma_dtype
from ..tma.tiled import oracle
from ..tma.tiled.spec import OobFill, TensorMapSpec

# The id carriers: layout depends on the element size only, and integer loads copy bits unchanged.
_ID_DTYPE = {1: "UINT8", 2: "UINT16", 4: "UINT32", 8: "UINT64"}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
MAX_GLOBAL_BYTES = 256 << 20  # the id tensor spans the box's reach in global memory; more is not a picture
SWIZZLE_PERIOD = 1024  # the swizzle phase repeats every 1024 B of absolute shared address


@dataclass(frozen=True)
class Element:
    """One element slot of the image: `kind` is "data" (with its global `coords`), "fill" or "padding"."""

    offset: int
    kind: str
    coords: tuple[int, ...] = ()
    box_row: int = -1  # the box row (outer axes in C order) it belongs to, data only
    chunk: int = -1  # its 16-byte chunk within that row before the swizzle, data only


@dataclass(frozen=True)
class Picture:
    """The image of one box: `elements` in image order, `pitch` bytes per drawn line, and what produced it."""

    spec: TensorMapSpec
    coords: tuple[int, ...]
    base_offset: int
    elements: tuple[Element, ...]
    pitch: int

    @property
    def image_bytes(self) -> int:
        return len(self.elements) * self.spec.itemsize

    def element_at(self, offset: int) -> Element | None:
        """The element slot holding image byte `offset`, None outside the image."""
        i = offset // self.spec.itemsize
        return self.elements[i] if 0 <= offset and i < len(self.elements) else None

    def row_addresses(self) -> np.ndarray:
        """(box rows, row bytes) absolute shared address of every data byte (the oracle's placement)."""
        return oracle.box_row_addresses(self.spec, self.base_offset)


def check_base_offset(value) -> int:
    """The image's absolute shared address modulo 1024: a multiple of 128 (a tensor copy's alignment)."""
    v = as_int(value, "base_offset", error=ArgumentError, rule="smem_alignment", lo=0, text=True)
    if v % oracle.SMEM_DST_ALIGNMENT or v >= SWIZZLE_PERIOD:
        raise ArgumentError("smem_alignment", "base_offset", value, "use 0, 128, 256, ... 896 (the image's shared "
                            "address modulo 1024)", "a tensor copy's shared destination is 128-byte aligned and "
                            "the swizzle repeats every 1024 B")
    return v


def _window(spec: TensorMapSpec, c: np.ndarray):
    """Per axis, the in-bounds coordinates from the box's first to its last (every one, strided or not)."""
    lo, size = [], []
    assert spec.element_strides is not None  # __post_init__ fills it
    steps = list(spec.element_strides)
    steps[-1] = 1
    for axis, n in enumerate(spec.loaded_counts):
        first, last = int(c[axis]), int(c[axis]) + (n - 1) * steps[axis]
        a, b = max(first, 0), min(last, spec.shape[axis] - 1)
        lo.append(a)
        size.append(max(b - a + 1, 0))
    return lo, size


def _id_tensor(spec: TensorMapSpec, lo, size):
    """(global byte offsets, ids) of every window element; refuses what cannot be drawn."""
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in size], indexing="ij")
    offsets = sum((g + a) * st for g, a, st in zip(grids, lo, spec.strides_bytes)).reshape(-1) \
        if grids else np.zeros(0, np.int64)
    if offsets.size and len(np.unique(offsets)) != offsets.size:
        raise ArgumentError("strides_overlap", "strides_bytes", spec.strides_bytes, "draw a map whose elements do "
                            "not share bytes", "two coordinates the box reads have one address: a label "
                            "could not say which one a cell holds")
    end = int(offsets.max()) + spec.itemsize if offsets.size else 0
    if end > MAX_GLOBAL_BYTES:
        raise ArgumentError("show_reach", "strides_bytes", spec.strides_bytes, "draw a box that reads less than "
                            f"{MAX_GLOBAL_BYTES >> 20} MiB of global memory (smaller strides or shape)",
                            f"this box reads up to byte {end}")
    return offsets, np.arange(1, offsets.size + 1, dtype=np.int64), end


def draw_image(spec: TensorMapSpec, coords=None, *, base_offset: int = 0) -> Picture:
    """The cells of the box at `coords` (NumPy order; default the origin), its image at `base_offset` mod 1024."""
    if not isinstance(spec, TensorMapSpec):
        raise ArgumentError("spec_type", "spec", type(spec).__name__, "give a TensorMapSpec")
    base_offset = check_base_offset(base_offset)
    c = oracle.check_load_coordinates(spec, [0] * spec.rank if coords is None else coords)[0]
    size = spec.itemsize
    ispec = spec.replace(dtype=tma_dtype(_ID_DTYPE[size]), oob_fill=OobFill.ZERO, base_address=None)
    lo, window = _window(spec, c)
    offsets, ids, end = _id_tensor(spec, lo, window)
    carrier = _UINT[size]
    planes = max(1, math.ceil(int(ids.size).bit_length() / (8 * size)))
    got = None
    for p in range(planes):  # one plane when the ids fit the type, else their bytes a plane at a time
        g = np.zeros(max(end, size), dtype=np.uint8)
        g.view(carrier)[offsets // size] = (ids >> (8 * size * p)).astype(carrier)  # astype keeps the low bits
        img = oracle.load_image(ispec, g, c, image_address=base_offset).view(carrier).astype(np.int64)
        got = img if got is None else got + (img << (8 * size * p))
    again = oracle.load_image(ispec, np.zeros(max(end, size), np.uint8), c, image_address=base_offset,
                              poison=0xFFFFFFFF).view(carrier)
    assert got is not None  # planes >= 1
    touched = again == 0  # fill and ids both wrote zeros in this run; the poison survives elsewhere
    return Picture(spec, tuple(int(v) for v in c), base_offset,
                   tuple(_element(spec, c, lo, window, i * size, int(v), bool(t))
                         for i, (v, t) in enumerate(zip(got.tolist(), touched.tolist()))),
                   spec.row_pitch_bytes)


def _element(spec: TensorMapSpec, c, lo, window, offset: int, ident: int, touched: bool) -> Element:
    if not touched:
        return Element(offset, "padding")
    if ident == 0:
        return Element(offset, "fill")
    coords = tuple(int(a + i) for a, i in zip(lo, np.unravel_index(ident - 1, window)))
    # Colour keys, read from the label: the box row (outer axes, C order) and the chunk of the row it sat in.
    assert spec.element_strides is not None  # __post_init__ fills it
    steps = list(spec.element_strides)
    rel = [(x - int(s)) // (e if k < spec.rank - 1 else 1) for k, (x, s, e) in enumerate(zip(coords, c, steps))]
    box_row = int(np.ravel_multi_index(rel[:-1], spec.loaded_counts[:-1])) if spec.rank > 1 else 0
    return Element(offset, "data", coords, box_row, rel[-1] * spec.itemsize // 16)
