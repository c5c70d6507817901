"""What TMA writes, computed with NumPy: the reference every GPU probe is compared with.

Loads: `load_images` (many boxes of one map at once), `load_image`, `box_values`, `check_load_coordinates`,
and `tma_load_convert` (tf32 rounding: the one place a load changes bits).
Shared-memory layout helpers (`swizzle_addresses`, `box_row_addresses`) are shared with stores and reductions.
Global memory is given as raw bytes starting at the map's base address, so any stride pattern is expressible.
What the model takes from GPU runs rather than the documentation (the swizzle on the absolute address, tf32
rounding, the unwritten row padding, the fault of a misaligned coordinate) is recorded in docs/tensormap.md ("Seen
on the H200") and pinned by tests/test_probe_gpu.py.
"""

from __future__ import annotations

import numpy as np

from ...errors import TensorMapError
from ..dtypes import TF32_DTYPES, tma_dtype
from .spec import Interleave, OobFill, Swizzle, TensorMapSpec

SMEM_DST_ALIGNMENT = 128  # shared destination of a tensor copy [doc]
# Swizzle: A' = A ^ (((A >> 7) & M) << 4) on the absolute shared address
_SWIZZLE_MASK = {Swizzle.NONE: 0, Swizzle.B32: 1, Swizzle.B64: 3, Swizzle.B128: 7}
_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
TF32_CANONICAL_NAN = 0x7FFFE000  # every NaN a tf32 load reads, whatever its sign and payload
_TF32_DROPPED_BITS = 13  # fp32 mantissa bits below tf32's 10


# ---------------------------------------------------------------------------------------------- shared memory

def swizzle_addresses(addresses, swizzle) -> np.ndarray:
    """Absolute shared addresses after the swizzle: 16-byte chunk bits 4..6 XOR address bits 7..9."""
    a = np.asarray(addresses, dtype=np.int64)
    mask = _SWIZZLE_MASK.get(swizzle)
    if mask is None:
        raise TensorMapError("oracle_swizzle", "swizzle", getattr(swizzle, "name", swizzle), "use NONE, 32B, 64B or "
                             "128B", "the oracle models the 16-B-unit swizzles only (Blackwell's atoms not yet run on "
                             "a GPU)")
    return a ^ (((a >> 7) & mask) << 4) if mask else a


def image_bytes_for(spec: TensorMapSpec, box_offset: int = 0) -> int:
    """The smallest 16-byte multiple that holds a box written `box_offset` bytes into an image."""
    return -(-(box_offset + spec.smem_bytes) // 16) * 16


def box_row_addresses(spec: TensorMapSpec, dst_address: int) -> np.ndarray:
    """(rows, row bytes) absolute shared addresses of every data byte of a box at `dst_address`, swizzle applied.

    Row r holds loaded elements j0 = 0..n0-1 of box row r (rows in C order of the outer axes) at r * pitch;
    the bytes from the row's end to the pitch (swizzle padding) are never written.
    """
    rows = int(np.prod(spec.loaded_counts[:-1], dtype=np.int64))
    row_bytes = spec.loaded_counts[-1] * spec.itemsize
    unswizzled = (dst_address + np.arange(rows, dtype=np.int64)[:, None] * spec.row_pitch_bytes
                  + np.arange(row_bytes, dtype=np.int64)[None, :])
    return swizzle_addresses(unswizzled, spec.swizzle)


def _check_oracle_spec(spec: TensorMapSpec, dst_address: int) -> None:
    spec.validate()
    if spec.interleave != Interleave.NONE:
        raise TensorMapError("oracle_interleave", "interleave", Interleave(spec.interleave).name, "use INTERLEAVE_NONE",
                             "the oracle models non-interleaved tiles only")  # validated: a member
    if dst_address % SMEM_DST_ALIGNMENT:
        raise TensorMapError("smem_alignment", "dst_address", dst_address,
                             f"use a shared destination that is a multiple of {SMEM_DST_ALIGNMENT} B",
                             "tensor copies need a 128-byte aligned shared destination")


# ---------------------------------------------------------------------------------------------- coordinates

def check_load_coordinates(spec: TensorMapSpec, coords) -> np.ndarray:
    """Refuse coordinates a load cannot take; return them as an (N, rank) int64 array in NumPy order.

    Each coordinate must fit a signed 32-bit int, and the innermost one times the element size must be a multiple
    of 16 B: otherwise the load faults with a sticky CUDA_ERROR_ILLEGAL_INSTRUCTION that ends the context.
    """
    try:
        c = np.asarray(coords)
    except (TypeError, ValueError):  # ragged
        c = None
    if c is None or (c.size and c.dtype.kind not in "iu"):
        kind = "ragged" if c is None else str(c.dtype)
        raise TensorMapError("coord_type", "coordinates", kind, "give integer coordinates (NumPy order), one "
                             "tuple per box", "coordinates are integers (1.5 would be truncated)")
    c = c.astype(np.int64)
    if c.ndim == 1:
        c = c[None, :]
    if c.ndim != 2 or c.shape[1] != spec.rank:
        raise TensorMapError("coord_rank", "coordinates", c.shape, f"give {spec.rank} coordinates per box "
                             "(NumPy order, outermost first)", f"got an array of shape {c.shape}")
    bad: np.ndarray = np.argwhere((c < INT32_MIN) | (c > INT32_MAX))  # then flatnonzero's 1-D indices
    if len(bad):
        n, axis = (int(v) for v in bad[0])
        raise TensorMapError("coord_range", f"coordinates[{n}][{axis}]", int(c[n, axis]),
                             "use coordinates that fit a signed 32-bit int", "TMA coordinates are s32")
    if spec.interleave == Interleave.NONE:
        unit = 16 // np.gcd(16, spec.itemsize)
        bad = np.flatnonzero(c[:, -1] % unit)
        if len(bad):
            n, v = int(bad[0]), int(c[bad[0], -1])
            lo = v // unit * unit
            raise TensorMapError(
                "coord_alignment", f"coordinates[{n}][{spec.rank - 1}]", v,
                f"use an innermost coordinate that is a multiple of {unit} ({lo} or {lo + unit})",
                f"innermost coordinate {v} x {spec.itemsize} B = {v * spec.itemsize} B is not a multiple of 16 B; "
                "the hardware faults (sticky CUDA_ERROR_ILLEGAL_INSTRUCTION)")
    return c


# ---------------------------------------------------------------------------------------------- loads


def kernel_coordinates(spec: TensorMapSpec, checked: np.ndarray) -> np.ndarray:
    """(N, 5) int32 rows as drvtma's probe kernels take them: dim 0 first (spec.to_tma_order), unused dims 0.
    `checked` is check_load_coordinates' result."""
    rows = np.zeros((len(checked), 5), dtype=np.int32)
    rows[:, :spec.rank] = checked[:, ::-1]
    return rows

def tma_load_convert(dtype, raw_words) -> np.ndarray:
    """The bits a load writes for in-bounds elements whose global bits are `raw_words`.

    TFLOAT32 and TFLOAT32_FTZ round the low 13 mantissa bits to nearest, ties to even, carrying into the exponent
    (up to infinity); denormals round and are never flushed (FTZ included); every NaN becomes 0x7FFFE000;
    infinities stay. Every other type is copied unchanged (FLOAT32_FTZ keeps its denormals).
    """
    if tma_dtype(dtype) not in TF32_DTYPES:
        return np.asarray(raw_words)
    w = np.asarray(raw_words).astype(np.uint32, copy=False)
    dropped = np.uint32((1 << _TF32_DROPPED_BITS) - 1)
    odd = (w >> np.uint32(_TF32_DROPPED_BITS)) & np.uint32(1)
    # A tie rounds up only when the kept bits are odd. Only NaNs (replaced below) can wrap past 32 bits.
    rounded = (w + (dropped >> np.uint32(1)) + odd) & ~dropped
    is_nan = (w & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.where(is_nan, np.uint32(TF32_CANONICAL_NAN), rounded)


def _fill_value(spec: TensorMapSpec) -> int:
    if spec.oob_fill == OobFill.NAN:
        return int.from_bytes(spec.dtype.nan_fill_bytes(), "little")
    return 0


def box_values(spec: TensorMapSpec, global_bytes, coords) -> np.ndarray:
    """The elements one or many loads deliver, as raw bits: shape (N, *loaded_counts), unsigned ints of itemsize;
    an int8 / int16 spec's (a signed view of a UINT8 / UINT16 map) as int8 / int16, the same bytes.

    Element (j...) comes from g0 = c0 + j0 and gk = ck + jk * ek (NumPy order reversed), through
    `tma_load_convert`; outside the tensor it is the fill (zero, or the NaN pattern), never converted.
    """
    c = check_load_coordinates(spec, coords)
    raw = np.ascontiguousarray(np.asarray(global_bytes, dtype=np.uint8).reshape(-1))
    values = _box_values_by_chunk(spec, raw, c) if _rows_are_chunks(spec) else _box_values_by_element(spec, raw, c)
    # the view was asked for by its name: its values compare equal to the kernel's int8 / int16 output
    return values.view(spec.dtype.numpy) if spec.dtype.is_view else values


def _rows_are_chunks(spec: TensorMapSpec) -> bool:
    """Box rows are whole 16-byte chunks at 16-byte aligned offsets (every valid non-interleaved map)."""
    return (spec.interleave == Interleave.NONE and spec.rank >= 1 and len(spec.strides_bytes) == spec.rank
            and spec.strides_bytes[-1] == spec.itemsize and (spec.loaded_counts[-1] * spec.itemsize) % 16 == 0
            and all(st % 16 == 0 for st in spec.strides_bytes[:-1]))


def _bounds_error(raw_size: int, end: int) -> ValueError:
    return ValueError(f"global_bytes holds {raw_size} B; the loads read up to byte {end} from the base address")


def _box_values_by_chunk(spec: TensorMapSpec, raw: np.ndarray, c: np.ndarray) -> np.ndarray:
    """`box_values` a box row at a time: each row is a run of 16-byte chunks, gathered as uint64 pairs.

    Row starts are multiples of 16 B (aligned strides, an aligned innermost coordinate), so only the inner edge can
    cut a chunk; the fill is applied per element after the gather (and after tf32 rounding).
    """
    assert spec.element_strides is not None  # __post_init__ fills it
    size, counts, n = spec.itemsize, spec.loaded_counts, c.shape[0]
    row_start = c[:, -1:] * size  # (n, rows): byte offset of each box row's first element
    row_in = np.ones((n, 1), dtype=bool)
    for axis in range(spec.rank - 1):
        index = c[:, axis:axis + 1] + np.arange(counts[axis], dtype=np.int64)[None, :] * spec.element_strides[axis]
        ok = (index >= 0) & (index < spec.shape[axis])
        row_start = (row_start[:, :, None] + (index * spec.strides_bytes[axis])[:, None, :]).reshape(n, -1)
        row_in = (row_in[:, :, None] & ok[:, None, :]).reshape(n, -1)
    inner = c[:, -1:] + np.arange(counts[-1], dtype=np.int64)[None, :]
    inner_in = (inner >= 0) & (inner < spec.shape[-1])
    # The furthest byte an in-bounds element needs (the same refusal as element by element).
    first_in = np.clip(-c[:, -1], 0, None)
    last_in = np.minimum(counts[-1], spec.shape[-1] - c[:, -1]) - 1
    has_in = row_in.any(axis=1) & (last_in >= first_in)
    if has_in.any():
        furthest = np.where(row_in, row_start, np.iinfo(np.int64).min).max(axis=1) + (last_in + 1) * size
        end = int(furthest[has_in].max())
        if end > raw.size:
            raise _bounds_error(raw.size, end)
    values = _gather_rows(raw, row_start // 16, (counts[-1] * size) // 16).view(_UINT_OF_SIZE[size])
    values = tma_load_convert(spec.dtype, values)  # (n, rows, inner)
    fill = values.dtype.type(_fill_value(spec))
    if not inner_in.all():  # the inner edge cuts some boxes' rows: their columns outside, in every row
        np.copyto(values, fill, where=~inner_in[:, None, :])
    if not row_in.all():
        values.reshape(-1, counts[-1])[np.flatnonzero(~row_in.reshape(-1))] = fill
    return values.reshape((n,) + counts)


def _gather_rows(raw: np.ndarray, start_chunk: np.ndarray, chunks: int) -> np.ndarray:
    """(n, rows, chunks * 2) uint64: `chunks` 16-byte chunks of `raw` from each row's start chunk.

    One `take` of 16-byte items (a complex128 view: copied bit for bit, the fastest 16-byte gather NumPy has).
    A chunk before the base or past the end holds no element in bounds (those are filled later): it is clipped.
    The partial last chunk does hold elements in bounds: it is read zero-padded.
    """
    n_full, rem = divmod(raw.size, 16)
    index = start_chunk[..., None] + np.arange(chunks, dtype=np.int64)
    if n_full:
        picked = np.take(raw[:n_full * 16].view(np.complex128), index, mode="clip").view(np.uint64)
    else:
        picked = np.zeros(index.shape + (2,), dtype=np.uint64).reshape(index.shape[:-1] + (-1,))
    picked = picked.reshape(index.shape + (2,))
    if rem and int(start_chunk.max()) + chunks > n_full:
        at_tail = index == n_full
        if at_tail.any():
            tail = np.zeros(16, dtype=np.uint8)
            tail[:rem] = raw[n_full * 16:]
            picked[at_tail] = tail.view(np.uint64)
    return picked.reshape(start_chunk.shape + (chunks * 2,))


def _box_values_by_element(spec: TensorMapSpec, raw: np.ndarray, c: np.ndarray) -> np.ndarray:
    """`box_values` one element index at a time (any layout the chunk path does not cover)."""
    assert spec.element_strides is not None  # __post_init__ fills it
    size = spec.itemsize
    elements = raw[:raw.size // size * size].view(_UINT_OF_SIZE[size])
    counts = spec.loaded_counts
    steps = list(spec.element_strides)
    steps[-1] = 1  # the dim-0 (innermost) element stride is ignored without interleave
    n_boxes, rank = c.shape
    offset = np.zeros((n_boxes,) + counts, dtype=np.int64)
    inside = np.ones((n_boxes,) + counts, dtype=bool)
    for axis in range(rank):
        index = c[:, axis:axis + 1] + np.arange(counts[axis], dtype=np.int64)[None, :] * steps[axis]
        shape = [n_boxes] + [1] * rank
        shape[axis + 1] = counts[axis]
        index = index.reshape(shape)
        inside &= (index >= 0) & (index < spec.shape[axis])
        offset = offset + index * spec.strides_bytes[axis]
    # Strides and the inner stride are multiples of the element size (validated), so offsets index elements.
    element_index = np.where(inside, offset // size, 0)
    if inside.any() and element_index[inside].max() >= elements.size:
        raise _bounds_error(raw.size, int(offset[inside].max()) + size)
    values = elements[element_index] if elements.size else np.zeros(element_index.shape, elements.dtype)
    values = tma_load_convert(spec.dtype, values)
    return np.where(inside, values, elements.dtype.type(_fill_value(spec)))


def load_images(spec: TensorMapSpec, global_bytes, coords, *, box_offset: int = 0, image_bytes: int | None = None,
                image_address: int = 0, poison: int = 0) -> np.ndarray:
    """The shared-memory images N loads produce: (N, image_bytes) uint8.

    Each image starts at absolute shared address `image_address` (only its value mod 1024 matters), filled with the
    32-bit little-endian `poison` word; the box lands `box_offset` bytes in, swizzled on absolute addresses.
    """
    dst = image_address + box_offset
    _check_oracle_spec(spec, dst)
    if image_address % 16:
        raise ValueError("image_address must be a multiple of 16")
    image_bytes = image_bytes_for(spec, box_offset) if image_bytes is None else image_bytes
    if image_bytes % 4 or image_bytes < box_offset + spec.smem_bytes:
        raise ValueError(f"image_bytes {image_bytes} must be a multiple of 4 and hold the box "
                         f"({box_offset} + {spec.smem_bytes} B)")
    values = box_values(spec, global_bytes, coords)
    n_boxes = values.shape[0]
    images = np.empty((n_boxes, image_bytes // 4), dtype=np.uint32)
    images[:] = np.uint32(poison & 0xFFFFFFFF)
    if image_bytes % 16 == 0 and (values.shape[-1] * spec.itemsize) % 16 == 0:
        # Whole 16-byte chunks (the swizzle moves chunks, never splits them): scatter uint64 pairs.
        rows = int(np.prod(spec.loaded_counts[:-1], dtype=np.int64))
        chunk = (dst + np.arange(rows, dtype=np.int64)[:, None] * spec.row_pitch_bytes
                 + 16 * np.arange(values.shape[-1] * spec.itemsize // 16, dtype=np.int64)[None, :])
        slots = ((swizzle_addresses(chunk, spec.swizzle) - image_address) // 16).reshape(-1)
        chunks = images.view(np.complex128)  # 16-byte items, copied bit for bit (see _gather_rows)
        source = np.ascontiguousarray(values).view(np.complex128).reshape(n_boxes, -1)
        first = int(slots[0]) if slots.size else 0
        if slots.size and int(slots[-1]) - first == slots.size - 1 and (np.diff(slots) == 1).all():
            chunks[:, first:first + slots.size] = source  # unswizzled, unpadded rows: one block
        else:
            where = (np.arange(n_boxes, dtype=np.int64)[:, None] * chunks.shape[1] + slots[None, :]).reshape(-1)
            np.put(chunks.reshape(-1), where, source.reshape(-1))
        return images.view(np.uint8)
    images = images.view(np.uint8)
    where = (box_row_addresses(spec, dst) - image_address).reshape(-1)
    images[:, where] = values.reshape(n_boxes, -1).view(np.uint8)
    return images


def load_image(spec: TensorMapSpec, global_bytes, coords, **kwargs) -> np.ndarray:
    """One load's shared-memory image (see `load_images`)."""
    return load_images(spec, global_bytes, [tuple(coords)], **kwargs)[0]


# cu/include/drvtma/image.cuh's digest constants (a CPU test reads them from there)
DIGEST_STEP = 0x9E3779B97F4A7C15
DIGEST_MUL1 = 0xFF51AFD7ED558CCD
DIGEST_MUL2 = 0xC4CEB9FE1A85EC53


def digest_mix(words: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Each little-endian 8-byte word mixed with its index as the kernels' digest_mix does (fmix64 of
    word ^ index * STEP, uint64 arithmetic wrapping): a digest is the sum of a region's mixed words."""
    x = words ^ (index.astype(np.uint64) * np.uint64(DIGEST_STEP))
    x ^= x >> np.uint64(33)
    x *= np.uint64(DIGEST_MUL1)
    x ^= x >> np.uint64(33)
    x *= np.uint64(DIGEST_MUL2)
    x ^= x >> np.uint64(33)
    return x


def image_digests(images: np.ndarray) -> np.ndarray:
    """(N,) uint64 digests of N images ((N, image_bytes) uint8, image_bytes a multiple of 8), as the probes'
    write_image_digest computes them on the GPU: each 8-byte word w_i mixed as fmix64(w_i ^ i * STEP), summed
    mod 2^64. Equal digests stand for equal images (a differing pattern escapes with a chance near 2^-64)."""
    words = np.ascontiguousarray(images).view("<u8")
    return digest_mix(words, np.arange(words.shape[1])).sum(axis=1, dtype=np.uint64)
