"""Every im2col encode rule as data (IM2COL_RULES, `errors.Rule` records), checked before the driver.

The rules an im2col map shares with tiled maps (enums, address, dims, strides, overlap, NaN fill) are the very
entries of `rules.RULES`: one definition each. The rest are im2col's own. IM2COL_DRIVER_RULES are those the driver
enforces (it answers CUDA_ERROR_INVALID_VALUE); the others are drvtma's, as the validator-vs-driver fuzz judged them
(docs/im2col.md: the driver's box limit is the tiled one, and it takes INTERLEAVE_32B with any swizzle, which drvtma
refuses as documented: `interleave_swizzle`). Blackwell's swizzle atoms are
checked for the open context's device (else sm_90a); its packed types' own rules are not modelled for im2col maps.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

from ...errors import Rule, TensorMapError, broken_rules
from ..geometry import (
    DRIVER_BOX_BYTES_LIMIT,
    DRIVER_RULES,
    MAX_ELEMENT_STRIDE,
    SMEM_PER_BLOCK_OPTIN_SM90,
    SWIZZLE_SPAN_BYTES,
    Interleave,
    Swizzle,
)
from ..target_rules import NEEDS_RULES, TARGET_RULE
from ..tiled.rules import RULES as TILED_RULES
from .geometry import (
    CORNER_RANGE,
    IM2COL_RANKS,
    MAX_CHANNELS_PER_PIXEL,
    MAX_PIXELS_PER_COLUMN,
    Im2colGeometry,
    spatial_name,
)

if TYPE_CHECKING:
    from .spec import Im2colSpec

# needs_subbyte_maps is the driver's for im2col too: it refuses im2col maps of sub-byte types (docs/im2col.md)
IM2COL_DRIVER_RULES = (DRIVER_RULES - {"box_range", "box_inner_bytes", "interleave_rank", "packed_dim", "packed_box",
                                       "packed_swizzle"}) | {
    "corner_range", "box_empty", "channels_range", "pixels_range", "channels_inner_bytes"}
IM2COL_DRVTMA_RULES = frozenset({"rank_mismatch", "inner_stride", "stride_zero", "strides_overlap", "smem_budget",
                                 "interleave_swizzle", "interleave_corners"})
# rules whose maps the validator-vs-driver fuzz encodes without judging the driver's verdict: it is not modelled
IM2COL_UNJUDGED_RULES = frozenset({"interleave_corners"})
IM2COL_ALL_RULES = IM2COL_DRIVER_RULES | IM2COL_DRVTMA_RULES
_SHARED = {rule.rules[0]: rule for rule in TILED_RULES}  # the tiled table's entries, by their first name


def _rank_holds(spec, _limit=None) -> bool:
    r = len(spec.shape)
    return (r in IM2COL_RANKS and len(spec.strides_bytes) == len(spec.element_strides) == r
            and len(spec.lower_corner) == len(spec.upper_corner) == r - 2)


def _check_rank(spec, _limit=None):
    r = spec.rank
    if r not in IM2COL_RANKS:
        yield TensorMapError("rank", "shape", spec.shape, "give 3 to 5 axes: (N, W, C), (N, H, W, C) or "
                             "(N, D, H, W, C), channels last", f"im2col maps have rank 3..5, this one {r}")
        return
    for name, want in (("strides_bytes", r), ("element_strides", r), ("lower_corner", r - 2),
                       ("upper_corner", r - 2)):
        got = getattr(spec, name)
        if len(got) != want:
            yield TensorMapError("rank_mismatch", name, got, f"give {want} entries (one per "
                                 f"{'spatial ' if want == r - 2 else ''}axis of shape {spec.shape})",
                                 f"{len(got)} entries for a rank-{r} shape")


def _corners_holds(spec, _limit=None) -> bool:
    lo, hi = CORNER_RANGE[spec.rank]
    return all(lo <= v <= hi for v in spec.lower_corner + spec.upper_corner)


def _check_corners(spec, _limit=None):
    lo, hi = CORNER_RANGE[spec.rank]
    for name in ("lower_corner", "upper_corner"):
        for i, v in enumerate(getattr(spec, name)):
            if not lo <= v <= hi:
                yield TensorMapError("corner_range", f"{name}[{i}]", v, f"use {lo}..{hi} at rank {spec.rank} "
                                     "(merge spatial axes into fewer for a wider range)",
                                     f"the {name.split('_')[0]} corner of {spatial_name(spec, i)} is {v}, outside "
                                     f"the rank-{spec.rank} range [{lo}, {hi}]")


def _box_holds(spec, _limit=None) -> bool:
    # the driver checks an empty box of non-interleaved maps only: it took interleaved ones (interleave_corners)
    return spec.interleave != Interleave.NONE or all(lo <= hi for lo, hi in spec.box_bounds)


def _check_box(spec, _limit=None):
    for i, ((lo, hi), s) in enumerate(zip(spec.box_bounds, spec.spatial)):
        if lo > hi:
            yield TensorMapError("box_empty", f"upper_corner[{i}]", spec.upper_corner[i],
                                 f"use upper_corner[{i}] >= {lo - s + 1} (the box of {spatial_name(spec, i)} is "
                                 f"[lower, {s} - 1 + upper])",
                                 f"the bounding box of {spatial_name(spec, i)} is [{lo}, {hi}]: empty")


def _counts_holds(spec, _limit=None) -> bool:
    return (1 <= spec.channels_per_pixel <= MAX_CHANNELS_PER_PIXEL
            and 1 <= spec.pixels_per_column <= MAX_PIXELS_PER_COLUMN
            and spec.channels_per_pixel * spec.itemsize % 16 == 0
            and all(1 <= e <= MAX_ELEMENT_STRIDE for e in spec.element_strides))


def _check_counts(spec, _limit=None):
    c, p, size = spec.channels_per_pixel, spec.pixels_per_column, spec.itemsize
    if not 1 <= c <= MAX_CHANNELS_PER_PIXEL:
        yield TensorMapError("channels_range", "channels_per_pixel", c, "use 1..256 channels per load; cover more "
                             "with several loads at channel offsets", f"{c} is outside 1..256")
    elif c * size % 16:
        unit = 16 // math.gcd(16, size)
        lo, hi = c // unit * unit, -(-c // unit) * unit
        yield TensorMapError("channels_inner_bytes", "channels_per_pixel", c,
                             f"use {' or '.join(str(v) for v in (lo, hi) if 1 <= v <= 256)} channels (a multiple "
                             f"of {unit} {spec.dtype.name})",
                             f"one pixel's row is {c * size} B, not a multiple of 16 B [derived from tiled maps]")
    if not 1 <= p <= MAX_PIXELS_PER_COLUMN:
        yield TensorMapError("pixels_range", "pixels_per_column", p, "use 1..1024 pixels per load",
                             f"{p} is outside 1..1024")
    for i, e in enumerate(spec.element_strides):
        if not 1 <= e <= MAX_ELEMENT_STRIDE:
            yield TensorMapError("element_stride_range", f"element_strides[{i}]", e, "use 1..8 (the spatial ones "
                                 "are the convolution stride)", f"element stride {e} is outside 1..8")


def _interleave_holds(spec, _limit=None) -> bool:
    return spec.interleave != Interleave.B32 or spec.swizzle == Swizzle.B32


def _check_interleave(spec, _limit=None):
    if not _interleave_holds(spec):
        yield TensorMapError("interleave_swizzle", "swizzle", getattr(spec.swizzle, "name", spec.swizzle),
                             "use SWIZZLE_32B with INTERLEAVE_32B",
                             "cuTensorMapEncodeIm2col's documentation requires SWIZZLE_32B with INTERLEAVE_32B")


def _interleave_corners_holds(spec, _limit=None) -> bool:
    return spec.interleave == Interleave.NONE or not any(spec.lower_corner + spec.upper_corner)


def _check_interleave_corners(spec, _limit=None):
    if not _interleave_corners_holds(spec):
        name = "lower_corner" if any(spec.lower_corner) else "upper_corner"
        yield TensorMapError("interleave_corners", name, getattr(spec, name),
                             "use corners of 0 with an interleaved map, or INTERLEAVE_NONE (channels last)",
                             "the driver's verdict on an interleaved im2col map with a corner other than 0 is not "
                             "modelled: it took some such maps, empty boxes too (H100, H200), and refused others "
                             "with valid boxes (H100)")


def _swizzle_holds(spec, _limit=None) -> bool:
    span = SWIZZLE_SPAN_BYTES.get(spec.swizzle, 0)
    return spec.interleave != Interleave.NONE or not span or spec.row_bytes <= span


def _check_swizzle(spec, _limit=None):
    if not _swizzle_holds(spec):
        span = spec.swizzle_span_bytes
        yield TensorMapError("swizzle_span", "channels_per_pixel", spec.channels_per_pixel,
                             f"use at most {span // spec.itemsize} channels per pixel with SWIZZLE_{span}B (load "
                             "the rest at a channel offset), or a wider swizzle",
                             f"one pixel's row is {spec.row_bytes} B, wider than the {span} B swizzle span")


def _box_bytes(spec) -> int:
    """The bytes one load brings (pixels x channels x element size, padding not counted): what the driver limits."""
    return spec.pixels_per_column * spec.channels_per_pixel * spec.itemsize


def _smem_holds(spec, limit=None) -> bool:
    return (_box_bytes(spec) <= DRIVER_BOX_BYTES_LIMIT
            and spec.smem_bytes <= (SMEM_PER_BLOCK_OPTIN_SM90 if limit is None else limit))


def _check_smem(spec, limit=None):
    """The driver's box limit first (the tiled maps' 228 KiB, im2col maps' too); then whether
    the padded rows fit a block's shared memory."""
    limit = SMEM_PER_BLOCK_OPTIN_SM90 if limit is None else limit
    data = _box_bytes(spec)
    if data > DRIVER_BOX_BYTES_LIMIT:
        most = DRIVER_BOX_BYTES_LIMIT // (spec.channels_per_pixel * spec.itemsize)
        yield TensorMapError("box_bytes", "pixels_per_column", spec.pixels_per_column,
                             f"use at most {most} pixels per column (or fewer channels per pixel)",
                             f"one load brings {data} B; the driver refuses loads over {DRIVER_BOX_BYTES_LIMIT} B")
        return
    if spec.smem_bytes > limit:
        most = limit // spec.row_pitch_bytes
        yield TensorMapError("smem_budget", "pixels_per_column", spec.pixels_per_column,
                             f"use at most {most} pixels per column (a row pitch of {spec.row_pitch_bytes} B)",
                             f"one load needs {spec.smem_bytes} B of shared memory, over the {limit} B a block can "
                             "have")


_ENUMS = frozenset({"enum"}) | NEEDS_RULES
_FORM = frozenset({"rank", "rank_mismatch"})

# Every im2col encode rule, in the order validate_im2col reports them.
IM2COL_RULES = (
    Rule(("rank", "rank_mismatch"), _rank_holds, _check_rank, "form", stop=True),
    _SHARED["enum"],
    TARGET_RULE,  # an im2col spec has no target of its own: the open context's device's, else sm_90a
    _SHARED["address_alignment"],
    _SHARED["dim_range"],
    _SHARED["inner_stride"],
    _SHARED["stride_zero"],
    Rule(("corner_range",), _corners_holds, _check_corners, "box"),
    Rule(("box_empty",), _box_holds, _check_box, "box", after=frozenset({"dim_range"})),
    Rule(("channels_range", "channels_inner_bytes", "pixels_range", "element_stride_range"), _counts_holds,
         _check_counts, "box"),
    Rule(("interleave_swizzle",), _interleave_holds, _check_interleave, "box", after=_ENUMS),
    Rule(("interleave_corners",), _interleave_corners_holds, _check_interleave_corners, "box", after=_ENUMS),
    Rule(("swizzle_span",), _swizzle_holds, _check_swizzle, "box", after=_ENUMS),
    _SHARED["nan_fill_type"],
    Rule(("box_bytes", "smem_budget"), _smem_holds, _check_smem, "box",
         after=_ENUMS | {"channels_range", "pixels_range"}),
)


def validate_im2col(spec: Im2colSpec, *, smem_limit: int | None = None) -> list[TensorMapError]:
    """Every broken rule, in IM2COL_RULES order."""
    if not isinstance(spec, Im2colGeometry):  # only an Im2colSpec is one (geometry)
        raise TensorMapError("type", "spec", type(spec).__name__, "give an Im2colSpec (Im2colSpec.create, "
                             "from_array, from_dict)")
    return cast(list[TensorMapError], broken_rules(IM2COL_RULES, spec, smem_limit))  # its rules yield TensorMapErrors


def im2col_driver_should_accept(errors) -> bool:
    """True when no broken rule is one the driver is documented to enforce."""
    return not any(e.rule in IM2COL_DRIVER_RULES for e in errors)


def describe_im2col(spec: Im2colSpec) -> str:
    dt = spec.dtype
    name = lambda v: getattr(v, "name", str(v))  # noqa: E731
    lines = [f"Im2colSpec {dt.name} (tensor-map type {dt.enum}, {dt.itemsize} B), NumPy order (N, [D, [H,]] W, C):",
             f"  shape {spec.shape}, strides {spec.strides_bytes} B, element strides {spec.element_strides}",
             f"  corners (D, H, W order) lower {spec.lower_corner}, upper {spec.upper_corner}"]
    if _rank_holds(spec):
        p = spec.tma_params()
        bounds = ", ".join(f"{spatial_name(spec, i).split()[0]} [{lo}, {hi}]"
                           for i, (lo, hi) in enumerate(spec.box_bounds))
        lines += [f"  filter bases walk the bounding box {bounds} (offsets shift the pixels they load)",
                  f"  driver order (fastest first): globalDim {list(p.global_dim)}, globalStrides "
                  f"{list(p.global_strides)} B, lower {list(p.lower_corner)}, upper {list(p.upper_corner)}, "
                  f"elementStrides {list(p.element_strides)}"]
    lines += [f"  per load: {spec.pixels_per_column} pixels x {spec.channels_per_pixel} channels, expect_tx "
              f"{spec.expect_tx_bytes} B, shared memory {spec.smem_bytes} B (row pitch {spec.row_pitch_bytes} B)",
              f"  interleave {name(spec.interleave)}, swizzle {name(spec.swizzle)}, L2 promotion "
              f"{name(spec.l2_promotion)}, out-of-bounds fill {name(spec.oob_fill)}"]
    if spec.base_address is not None:
        lines.append(f"  base address 0x{spec.base_address:x}")
    return "\n".join(lines)
