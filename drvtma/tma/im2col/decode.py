"""Read and write the 128 bytes of an sm_90 im2col CUtensorMap: `decode_im2col` (an Im2colSpec and its address) and
`encode_im2col_bytes` (its inverse on the host, no driver call).

Read off a corpus of maps the driver encoded with cuTensorMapEncodeIm2col (tests/data/im2col_corpus.json.gz; how:
docs/im2col.md, "The 128 bytes of an im2col map"), each field checked against all of them. An im2col map stores
everything a tiled map does at the same bits (tiled.decode's table: address, rank, type, strides, dims, element
strides, interleave, swizzle, fill, L2 promotion, the swizzle marker), plus:
- bit 64 (`decode.IM2COL_MODE`) is 1; it is 0 in every map of the tiled corpus (tensormap_corpus.json.gz);
- the tiled box fields hold im2col's own: bits 440-447 (box dim 0) channels per pixel - 1, bits 448-463 the lower
  corners and 464-479 the upper ones, each corner a two's-complement field CORNER_BITS[rank] wide, W first (the
  driver's order), unused slots 0; bits 480-489 pixels per column - 1;
- the derived box-bytes word (bits 512-543) is channels per pixel * pixels per column * element size.
No other bit was ever set. What the load does with these fields is `oracle`'s; none of this was run on a GPU
beyond the driver's encoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import TensorMapError
from ..tiled.decode import (
    DERIVED_BOX_BYTES,
    DERIVED_SWIZZLE,
    IM2COL_MODE,
    KNOWN_BITS,
    SWIZZLE_MARKER,
    TENSOR_MAP_BYTES,
    MapFields,
    driver_checked_address,
    fields,
    geometry,
    get,
    map_bytes,
    mask,
    put,
    shared_words,
    unknown_bits_error,
)
from .rules import IM2COL_DRIVER_RULES, validate_im2col
from .spec import IM2COL_RANKS, Im2colSpec

CHANNELS_PER_PIXEL = (440, 8)  # the tiled box dim 0
PIXELS_PER_COLUMN = (480, 10)
CORNER_BITS = {3: 16, 4: 8, 5: 5}  # per rank: the corner ranges of cuTensorMapEncodeIm2col, in two's complement
_LOWER, _UPPER = 448, 464
_BOX_REGION = ((1 << 40) - 1) << 440  # the tiled box dims 0-4, bits 440-479


def lower_corner_fields(rank: int) -> tuple[tuple[int, int], ...]:
    """(bit offset, width) of each lower corner, W first."""
    w = CORNER_BITS[rank]
    return tuple((_LOWER + w * k, w) for k in range(rank - 2))


def upper_corner_fields(rank: int) -> tuple[tuple[int, int], ...]:
    w = CORNER_BITS[rank]
    return tuple((_UPPER + w * k, w) for k in range(rank - 2))


def _known_bits(rank: int) -> int:
    known = (KNOWN_BITS & ~_BOX_REGION) | mask(IM2COL_MODE) | mask(CHANNELS_PER_PIXEL) | mask(PIXELS_PER_COLUMN)
    for f in lower_corner_fields(rank) + upper_corner_fields(rank):
        known |= mask(f)
    return known


def _signed(value: int, width: int) -> int:
    return value - (1 << width) if value >> (width - 1) else value


_ANY_RANK_BITS = _known_bits(3) | _known_bits(4) | _known_bits(5)


@dataclass(frozen=True)
class Im2colFields:
    """An im2col map's own fields as stored (corners W first); `shared` holds what it stores as a tiled map does
    (its box_dim and derived box bytes read im2col's fields as a tiled map's: ignore them)."""

    shared: MapFields
    lower_corner: tuple[int, ...]
    upper_corner: tuple[int, ...]
    channels_per_pixel: int
    pixels_per_column: int
    unknown_bits: int  # bits outside every im2col field of this rank (nonzero: not a map this decoder understands)


def im2col_fields(obj) -> Im2colFields:
    """The fields of an im2col map (bytes, hex, a TensorMap, ...: whatever decode.map_bytes reads)."""
    raw = map_bytes(obj)
    f = fields(raw)
    if not f.im2col:
        raise TensorMapError("decode_tiled_map", "mode", "tiled", "read it with drvtma.tma.tiled.decode.decode (or "
                             "explain / `drvtma decode`, which read both modes)", "bit 64 is clear: a tiled map")
    v = int.from_bytes(raw, "little")
    if f.rank not in IM2COL_RANKS:
        if v & ~_ANY_RANK_BITS:  # bits no im2col map of any rank holds: say that first (e.g. all ones)
            raise unknown_bits_error(v & ~_ANY_RANK_BITS, "im2col")
        raise TensorMapError("decode_rank", "rank", f.rank, "an im2col map has rank 3, 4 or 5",
                             f"the rank field holds {f.rank_code}")
    return Im2colFields(f, tuple(_signed(get(v, c), c[1]) for c in lower_corner_fields(f.rank)),
                        tuple(_signed(get(v, c), c[1]) for c in upper_corner_fields(f.rank)),
                        get(v, CHANNELS_PER_PIXEL) + 1, get(v, PIXELS_PER_COLUMN) + 1, v & ~_known_bits(f.rank))


def decode_im2col(obj) -> tuple[Im2colSpec, int]:
    """(spec, address) of an sm_90 im2col map, the spec in NumPy order with base_address set, not validated
    (`rules.validate_im2col` says what it breaks). Raises TensorMapError (``decode_*``) for other bytes."""
    f = im2col_fields(obj)
    if f.unknown_bits:
        raise unknown_bits_error(f.unknown_bits, "im2col")
    g = geometry(f.shared)
    spec = Im2colSpec(g.pop("dtype"), g.pop("shape"), g.pop("strides_bytes"), tuple(reversed(f.lower_corner)),
                      tuple(reversed(f.upper_corner)), f.channels_per_pixel, f.pixels_per_column, **g)
    return spec, f.shared.address


def im2col_derived_words(spec: Im2colSpec) -> tuple[int, int]:
    """What the driver writes in the two derived words of an im2col map (box bytes, swizzle marker)."""
    return spec.channels_per_pixel * spec.pixels_per_column * spec.itemsize, SWIZZLE_MARKER.get(spec.swizzle, 0)


def encode_im2col_bytes(spec: Im2colSpec, address: int | None = None) -> bytes:
    """The bytes cuTensorMapEncodeIm2col writes for a valid spec, computed on the host (no driver call). A spec
    the driver would refuse (`rules.IM2COL_DRIVER_RULES`) is refused here too."""
    address = driver_checked_address(spec, Im2colSpec, validate_im2col, IM2COL_DRIVER_RULES, address)
    p = spec.tma_params()
    v = put(shared_words(spec, p, address), IM2COL_MODE, 1)
    v = put(put(v, CHANNELS_PER_PIXEL, p.channels_per_pixel - 1), PIXELS_PER_COLUMN, p.pixels_per_column - 1)
    for where, x in zip(lower_corner_fields(p.rank) + upper_corner_fields(p.rank), p.lower_corner + p.upper_corner):
        v = put(v, where, x)  # put keeps the low bits: two's complement
    box_bytes, marker = im2col_derived_words(spec)
    v = put(put(v, DERIVED_BOX_BYTES, box_bytes), DERIVED_SWIZZLE, marker)
    return v.to_bytes(TENSOR_MAP_BYTES, "little")
