"""What a TMA tensor store or reduction changes in global memory, modelled in NumPy.

Model (NumPy order, axis r-1 contiguous; ``s`` = element size, ``n_k`` = ceil(box_k / element_stride_k) for the
outer axes, ``n`` = box for the inner axis):

- box element (j_0, .., j_r-1) goes to global index g_k = c_k + j_k * e_k (outer axes), g = c + j (inner axis);
  element strides act as on loads [doc: "traversal stride"; stores assumed symmetric, pinned by the GPU tests];
- an outer axis writes only rows with g_k < shape_k;
- the inner axis writes every element of each 16-byte chunk that holds an in-bounds element: g < round_up(shape*s,
  16) / s, so up to 15 bytes past the inner edge (the straddle), reductions too (tests/test_stores_gpu.py pins
  both; docs/results/store-roundtrip.md);
- the source is read from shared memory exactly where a load of the same map would have put each element: row
  pitch and swizzle on the absolute shared address (as loads do); pad bytes of a row are not read;
- any negative coordinate faults, and c_inner * s must be a multiple of 16 (as for loads).

Reductions follow the PTX ISA table of cp.reduce.async.bulk.tensor (see REDUCE_DTYPES).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import TensorMapError, as_int
from ..dtypes import BFLOAT16, FLOAT16, FLOAT32, TmaDtype, tma_dtype
from ..tiled.oracle import box_row_addresses
from ..tiled.rules import round_up
from ..tiled.spec import TensorMapSpec
from .rules import CHUNK_BYTES, STORE, check_reduction, check_store_coordinates


def inner_write_limit(spec: TensorMapSpec) -> int:
    """Elements of a row a store may write: the inner extent rounded up to whole 16-byte chunks."""
    return round_up(spec.shape[-1] * spec.itemsize, CHUNK_BYTES) // spec.itemsize


@dataclass(frozen=True)
class StoreTargets:
    """The box elements a store writes and where: ``box_index`` indexes the box (np.ix_ form), ``byte_offsets``
    (same shape as the selection) are bytes from the tensor's base address."""

    box_index: tuple
    byte_offsets: np.ndarray

    @property
    def count(self) -> int:
        return int(self.byte_offsets.size)


def store_targets(spec: TensorMapSpec, coords) -> StoreTargets:
    """Which box elements a store or reduction at `coords` (NumPy order) writes, and to which global bytes."""
    coords = check_store_coordinates(spec, coords)
    assert spec.element_strides is not None  # __post_init__ fills it
    counts = spec.loaded_counts
    kept, offsets = [], []
    last = spec.rank - 1
    for axis in range(spec.rank):
        j = np.arange(counts[axis], dtype=np.int64)
        if axis == last:
            g = coords[axis] + j
            keep = g < inner_write_limit(spec)
        else:
            g = coords[axis] + j * spec.element_strides[axis]
            keep = g < spec.shape[axis]
        kept.append(j[keep])
        offsets.append(g[keep] * spec.strides_bytes[axis])
    grids = np.ix_(*offsets)
    total = np.zeros(tuple(len(k) for k in kept), dtype=np.int64)
    for part in grids:
        total = total + part
    return StoreTargets(np.ix_(*kept), total)


def smem_byte_offsets(spec: TensorMapSpec, smem_offset: int = 0) -> np.ndarray:
    """For every byte of every box element (shape loaded_counts + (itemsize,)): its offset in the shared-memory
    image, the image starting at an absolute shared address congruent to `smem_offset` modulo 1024. A store reads
    exactly the layout a load writes, so this is the load oracle's layout."""
    offsets = box_row_addresses(spec, smem_offset) - smem_offset
    return offsets.reshape(spec.loaded_counts + (spec.itemsize,))

def box_from_smem(spec: TensorMapSpec, image: np.ndarray, smem_offset: int = 0) -> np.ndarray:
    """The box (loaded_counts shape, dtype carrier) a store reads from a shared-memory image."""
    raw = np.asarray(image, dtype=np.uint8).reshape(-1)
    picked = raw[smem_byte_offsets(spec, smem_offset)]
    return np.ascontiguousarray(picked).view(spec.dtype.numpy).reshape(spec.loaded_counts)


def smem_from_box(spec: TensorMapSpec, box: np.ndarray, smem_offset: int = 0,
                  pad: np.ndarray | None = None) -> np.ndarray:
    """The shared-memory image (spec.smem_bytes bytes) holding `box` as a load would lay it out; row padding from
    `pad` (bytes, default zeros)."""
    image = np.zeros(spec.smem_bytes, np.uint8) if pad is None else np.array(pad, np.uint8).reshape(-1).copy()
    if image.size != spec.smem_bytes:
        raise ValueError(f"pad has {image.size} bytes, the image needs {spec.smem_bytes}")
    values = np.ascontiguousarray(np.asarray(box, dtype=spec.dtype.numpy).reshape(spec.loaded_counts))
    image[smem_byte_offsets(spec, smem_offset)] = values.view(np.uint8).reshape(spec.loaded_counts + (spec.itemsize,))
    return image


# ---- element-wise reductions, on the dtype's NumPy carrier (bf16 as uint16 bits)

def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round to nearest even; NaN becomes the canonical 0x7FFF."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FFF), rounded)


def _float_view(dt: TmaDtype, v: np.ndarray) -> np.ndarray:
    return _bf16_to_f32(v) if dt == BFLOAT16 else v.astype(np.float32) if dt == FLOAT16 else v


def _min_max(dt: TmaDtype, old: np.ndarray, src: np.ndarray, take_min: bool) -> np.ndarray:
    if not dt.is_float:
        return np.minimum(old, src) if take_min else np.maximum(old, src)
    # IEEE minNum/maxNum as PTX min/max: a NaN operand yields the other one, two NaNs the canonical NaN, and
    # -0 < +0. The chosen operand's bits are returned unchanged.
    a, b = _float_view(dt, old), _float_view(dt, src)
    a_neg0 = (a == 0) & np.signbit(a)
    b_neg0 = (b == 0) & np.signbit(b)
    if take_min:
        pick_b = (b < a) | ((a == b) & b_neg0 & ~a_neg0)
    else:
        pick_b = (b > a) | ((a == b) & a_neg0 & ~b_neg0)
    pick_b |= np.isnan(a) & ~np.isnan(b)
    pick_b &= ~(np.isnan(b) & ~np.isnan(a))
    out = np.where(pick_b, src, old)
    both_nan = np.isnan(a) & np.isnan(b)
    return np.where(both_nan, np.array(0x7FFF, np.uint16).view(out.dtype), out)


def _add(dt: TmaDtype, old: np.ndarray, src: np.ndarray) -> np.ndarray:
    if dt == FLOAT32:
        # The tensor form keeps subnormals (the non-tensor bulk reduce is documented to flush them;
        # docs/results/store-roundtrip.md).
        with np.errstate(over="ignore", invalid="ignore"):
            r = (old + src).astype(np.float32)
        return np.where(np.isnan(r), np.array(0x7FFFFFFF, np.uint32).view(np.float32), r)
    if dt == FLOAT16:
        with np.errstate(over="ignore", invalid="ignore"):
            r = (old.astype(np.float64) + src.astype(np.float64)).astype(np.float16)  # exact sum, one rounding
        return np.where(np.isnan(r), np.array(0x7FFF, np.uint16).view(np.float16), r)
    if dt == BFLOAT16:
        # Exact-to-f32 then f32-to-bf16 is one correct rounding: 24 >= 2*8 + 2 (double rounding is innocuous).
        with np.errstate(over="ignore", invalid="ignore"):
            return _f32_to_bf16(_bf16_to_f32(old) + _bf16_to_f32(src))
    return old + src  # integers wrap modulo 2^bits


def reduce_values(op: str, dtype, old: np.ndarray, src: np.ndarray) -> np.ndarray:
    """What a reduction leaves in global memory, element-wise, on the dtype's NumPy carrier."""
    dt = tma_dtype(dtype)
    old = np.asarray(old, dtype=dt.numpy)
    src = np.asarray(src, dtype=dt.numpy)
    if op == STORE:
        return src.copy()
    check_reduction(op, dt)
    if op == "add":
        return _add(dt, old, src)
    if op in ("min", "max"):
        return _min_max(dt, old, src, op == "min")
    if op == "inc":  # PTX atom.inc: wraps to 0 once old reaches src
        return np.where(old >= src, np.uint32(0), old + np.uint32(1)).astype(np.uint32)
    if op == "dec":  # PTX atom.dec: wraps to src from 0 or from above src
        return np.where((old == 0) | (old > src), src, old - np.uint32(1)).astype(np.uint32)
    bits = np.dtype(f"u{dt.itemsize}")
    a, b = old.view(bits), src.view(bits)
    r = a & b if op == "and" else a | b if op == "or" else a ^ b
    return r.view(dt.numpy)


def apply_store(memory: np.ndarray, base_offset: int, spec: TensorMapSpec, coords, box: np.ndarray,
                op: str = STORE) -> StoreTargets:
    """Apply one store or reduction to `memory` (bytes, modified in place) for a tensor at `base_offset`."""
    targets = store_targets(spec, coords)
    s = spec.itemsize
    base_offset = as_int(base_offset, "base_offset", error=TensorMapError, rule="type", lo=0)
    if base_offset % s:
        raise TensorMapError("base_offset_alignment", "base_offset", base_offset,
                             f"use a multiple of the element size ({s} B)", "elements are read whole")
    elements = memory.view(spec.dtype.numpy)
    index = (base_offset + targets.byte_offsets) // s
    values = np.asarray(box, dtype=spec.dtype.numpy).reshape(spec.loaded_counts)[targets.box_index]
    elements[index] = reduce_values(op, spec.dtype, elements[index], values)
    return targets
