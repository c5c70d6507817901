"""The im2col tensor-map spec in NumPy order (N, [D, [H,]] W, C), channels last (rules in `rules`).

An im2col map describes an NWC / NHWC / NDHWC tensor. One load delivers `pixels_per_column` rows of
`channels_per_pixel` elements: pixels walked through the bounding box in N, D, H, W order (`oracle`).
`lower_corner` / `upper_corner` hold one offset per spatial axis in NumPy order (D, H, W): the bounding box of a
spatial axis of size S is [lower, S - 1 + upper]. The driver takes them reversed, W first, as CUTLASS and Triton pass
them (its documentation writes "{D, H, W}"; the GPU test of the oracle pins which). `to_tma_order` reverses.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from ...errors import TensorMapError, as_ints
from ..dtypes import TmaDtype, tma_dtype
from ..params import MapParams
from ..tiled.spec import (
    Interleave,
    L2Promotion,
    OobFill,
    Swizzle,
    array_fields,
    check_options,
    contiguous_strides_bytes,
    fields_dict,
    normalise_fields,
    to_tma_order,
)

# What the rules need of an im2col map lives below them in `geometry`; its names stay importable from here.
from .geometry import (  # noqa: F401
    CORNER_RANGE,
    IM2COL_RANKS,
    MAX_CHANNELS_PER_PIXEL,
    MAX_PIXELS_PER_COLUMN,
    OFFSET_RANGE,
    SPATIAL_NAMES,
    Im2colGeometry,
    spatial_name,
)
from .rules import describe_im2col, validate_im2col


def _ints(values, what: str) -> tuple[int, ...]:
    return as_ints(values, what, error=TensorMapError, rule="type")


@dataclass(frozen=True)
class Im2colParams(MapParams):
    """What cuTensorMapEncodeIm2col receives (corners W first)."""

    ARGUMENTS = ("dtype_enum", "rank", "global_dim", "global_strides", "lower_corner", "upper_corner",
                 "channels_per_pixel", "pixels_per_column", "element_strides", "interleave", "swizzle",
                 "l2_promotion", "oob_fill")
    lower_corner: tuple[int, ...]
    upper_corner: tuple[int, ...]
    channels_per_pixel: int
    pixels_per_column: int


@dataclass(frozen=True)
class Im2colSpec(Im2colGeometry):
    """An im2col map in NumPy order: ``shape`` (N, [D, [H,]] W, C), ``strides_bytes`` (the last = itemsize),
    corners per spatial axis (D, H, W order), channels per pixel, pixels per column, element strides per axis
    (the spatial ones are the traversal = convolution strides; C's is ignored without interleave).
    Construction normalises types only; `validate` checks the rules."""

    dtype: TmaDtype
    shape: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    lower_corner: tuple[int, ...]
    upper_corner: tuple[int, ...]
    channels_per_pixel: int
    pixels_per_column: int
    element_strides: tuple[int, ...] | None = None  # None: all ones
    interleave: int = Interleave.NONE
    swizzle: int = Swizzle.NONE
    l2_promotion: int = L2Promotion.NONE
    oob_fill: int = OobFill.ZERO
    base_address: int | None = None
    allow_overlap: bool = False  # the tiled rules stride_zero / strides_overlap read it

    def __post_init__(self):
        normalise_fields(self, tuples=("lower_corner", "upper_corner"),
                         ints=("channels_per_pixel", "pixels_per_column"))

    # ---- constructors
    @classmethod
    def create(cls, dtype, shape, lower_corner, upper_corner, channels_per_pixel, pixels_per_column, *,
               strides_bytes=None, **options) -> Im2colSpec:
        """A spec for a tensor of `shape` (N, [D, [H,]] W, C), contiguous unless strides_bytes are given."""
        check_options(options, _OPTIONS | {"strides_bytes"}, "im2col")
        dt = tma_dtype(dtype)
        shape = _ints(shape, "shape")
        if strides_bytes is None:
            strides_bytes = contiguous_strides_bytes(shape, dt.itemsize)
        return cls(dt, shape, strides_bytes, lower_corner, upper_corner, channels_per_pixel, pixels_per_column,
                   **options)

    @classmethod
    def from_array(cls, arr, lower_corner, upper_corner, channels_per_pixel, pixels_per_column, *, dtype=None,
                   **options) -> Im2colSpec:
        """A spec for a channels-last array (NumPy for the layout; torch, CuPy, ... also give base_address).

        A torch tensor in ``channels_last`` memory format is NCHW by shape: pass ``t.permute(0, 2, 3, 1)`` (NHWC
        by shape, C contiguous)."""
        dt, layout = array_fields(arr, dtype, options)
        return cls(dt, layout.shape, layout.strides_bytes, lower_corner, upper_corner, channels_per_pixel,
                   pixels_per_column, **options)

    @classmethod
    def from_dict(cls, d: dict) -> Im2colSpec:
        if not isinstance(d, dict):
            raise TensorMapError("spec_json", "spec", type(d).__name__, 'give an object: {"dtype": "float16", '
                                 '"shape": [1, 8, 8, 16], "lower_corner": [-1, -1], "upper_corner": [-1, -1], '
                                 '"channels_per_pixel": 16, "pixels_per_column": 64}')
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise TensorMapError("spec_json", ", ".join(sorted(map(str, unknown))), "unknown im2col field(s)",
                                 f"use only {', '.join(sorted(known))}")
        needed = ("dtype", "shape", "lower_corner", "upper_corner", "channels_per_pixel", "pixels_per_column")
        for key in needed:
            if key not in d:
                raise TensorMapError("spec_json", key, "missing", f"add {key!r}: an im2col spec needs "
                                     f"{', '.join(needed)}")
        args = [d.pop(k) for k in needed]
        return cls.create(*args, **d)

    @classmethod
    def from_json(cls, text: str) -> Im2colSpec:
        try:
            d = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise TensorMapError("spec_json", "json", str(text)[:60], "give a JSON object with dtype, shape, "
                                 "lower_corner, upper_corner, channels_per_pixel, pixels_per_column",
                                 f"not JSON ({exc})") from None
        return cls.from_dict(d)

    def to_dict(self) -> dict:
        return fields_dict(self, lower_corner=list(self.lower_corner), upper_corner=list(self.upper_corner),
                           channels_per_pixel=self.channels_per_pixel, pixels_per_column=self.pixels_per_column)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def tma_params(self) -> Im2colParams:
        return self._params(Im2colParams, to_tma_order(self.strides_bytes)[1:],
                            lower_corner=to_tma_order(self.lower_corner), upper_corner=to_tma_order(self.upper_corner),
                            channels_per_pixel=self.channels_per_pixel, pixels_per_column=self.pixels_per_column)

    # ---- checks
    def validate(self, *, smem_limit: int | None = None) -> Im2colSpec:
        errors = validate_im2col(self, smem_limit=smem_limit)
        if errors:
            raise errors[0]
        return self

    def is_valid(self, *, smem_limit: int | None = None) -> bool:
        return not validate_im2col(self, smem_limit=smem_limit)

    def describe(self) -> str:
        return describe_im2col(self)

    def __str__(self) -> str:
        return self.describe()


_OPTIONS = frozenset({"element_strides", "interleave", "swizzle", "l2_promotion", "oob_fill", "base_address",
                      "allow_overlap"})


def conv_corners(filter_size, padding=0, dilation=1) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(lower, upper) corners of a forward convolution, one per spatial axis in NumPy order (CUTLASS's choice):
    lower = -pad, upper = pad - (filter - 1) * dilation; the load's offsets then pick the filter tap."""
    f = _ints(filter_size, "filter_size")
    n = len(f)
    pad = _ints([padding] * n if isinstance(padding, int) else padding, "padding")
    dil = _ints([dilation] * n if isinstance(dilation, int) else dilation, "dilation")
    return tuple(-p for p in pad), tuple(p - (k - 1) * d for p, k, d in zip(pad, f, dil))
