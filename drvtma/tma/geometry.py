"""A tensor map's geometry, below every spec and rule: the driver's limits, the enums of a map's fields, the rule
names the driver enforces, `to_tma_order` (the one place that reverses NumPy order into the driver's) and
`MapGeometry`, what the tiled and the im2col spec compute alike. `tiled.spec` re-exports every name."""

from __future__ import annotations

import dataclasses
import functools
from enum import IntEnum

import numpy as np

from ..errors import TensorMapError, as_ints, is_int
from ..runtime.capabilities import HOPPER
from .dtypes import TmaDtype

MAX_RANK = 5
MAX_DIM = 1 << 32
MAX_STRIDE_BYTES = 1 << 40  # exclusive
MAX_BOX = 256
MAX_ELEMENT_STRIDE = 8
# Hopper's opt-in shared memory per block: the most one box can occupy in a kernel (drvtma's rule smem_budget);
# the capability table's Hopper figure (a rule's default; pass smem_limit=driver.smem_per_block_optin() elsewhere).
SMEM_PER_BLOCK_OPTIN_SM90 = HOPPER.smem_per_block_optin
# The driver's own limit on one box: prod(ceil(box[k] / elementStrides[k])) * elemsize over every dimension, dim 0
# included, padding not counted (docs/tensormap.md, "Seen on the H200"); tests/test_probe_gpu.py pins the
# threshold.
DRIVER_BOX_BYTES_LIMIT = 228 * 1024
TENSOR_MAP_BYTES = 128


class Interleave(IntEnum):
    NONE = 0
    B16 = 1
    B32 = 2


class Swizzle(IntEnum):
    NONE = 0
    B32 = 1
    B64 = 2
    B128 = 3
    # Blackwell (CUDA 12.8+, rule needs_swizzle_atoms): a 128 B span whose swizzled unit is 32 B or 64 B, not 16 B;
    # FLIP_8B also swaps the 8 B halves of each 16 B on alternate rows (driver API docs, CUtensorMapSwizzle).
    B128_ATOM_32B = 4
    B128_ATOM_32B_FLIP_8B = 5
    B128_ATOM_64B = 6


class L2Promotion(IntEnum):
    NONE = 0
    B64 = 1
    B128 = 2
    B256 = 3


class OobFill(IntEnum):
    ZERO = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    NAN = 1  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA


_ENUM_FIELDS = (("interleave", Interleave), ("swizzle", Swizzle), ("l2_promotion", L2Promotion),
                ("oob_fill", OobFill))
SM90_SWIZZLES = (Swizzle.NONE, Swizzle.B32, Swizzle.B64, Swizzle.B128)  # what a Hopper map takes
SWIZZLE_SPAN_BYTES: dict[int, int] = {Swizzle.NONE: 0, Swizzle.B32: 32, Swizzle.B64: 64, Swizzle.B128: 128,
                                      Swizzle.B128_ATOM_32B: 128, Swizzle.B128_ATOM_32B_FLIP_8B: 128,
                                      Swizzle.B128_ATOM_64B: 128}

# Rules the driver itself enforces (it answers CUDA_ERROR_INVALID_VALUE); every other rule is drvtma's own:
# the driver accepts such specs, and tests/test_probe_gpu.py pins that it still does.
DRIVER_RULES = frozenset({"rank", "enum", "needs_subbyte_maps", "needs_swizzle_atoms", "packed_dim", "packed_box",
                          "packed_swizzle", "address_alignment", "dim_range", "stride_alignment",
                          "stride_range", "box_range", "box_inner_bytes", "element_stride_range",
                          "interleave_rank", "swizzle_span", "nan_fill_type", "box_bytes"})
DRVTMA_RULES = frozenset({"rank_mismatch", "inner_stride", "stride_zero", "strides_overlap", "interleave_swizzle",
                          "smem_budget"})
ALL_RULES = DRIVER_RULES | DRVTMA_RULES


def _enum_value(value, enum: type[IntEnum], what: str) -> int:
    """An enum member from a member, an int (kept even when out of range, so validation can name it) or a name."""
    if isinstance(value, str):
        key = value.strip().upper().replace("-", "_")
        key = {"NAN_REQUEST_ZERO_FMA": "NAN", "ZEROS": "ZERO"}.get(key, key)
        if key[:1].isdigit() and "B" in key:  # 128B, 128B_ATOM_32B: the member's name starts with B
            key = "B" + key.replace("B", "", 1)
        if key in enum.__members__:
            return enum.__members__[key]
    elif is_int(value):
        try:
            return enum(int(value))
        except ValueError:
            return int(value)
    names = ", ".join(f"{m.name}={int(m)}" for m in enum)
    raise TensorMapError("enum", what, value, f"use one of {names} (a member, its name or its int)",
                         f"not a {what} value")


def _int_tuple(values, what: str) -> tuple[int, ...]:
    return as_ints(values, what, error=TensorMapError, rule="type")


def _flag(value, what: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TensorMapError("type", what, value, f"give {what}=True or False", f"{type(value).__name__} is not a bool")


def to_tma_order(values) -> tuple:
    """NumPy order (outermost first) to TMA order (fastest first). The only place drvtma reverses axes."""
    return tuple(reversed(tuple(values)))


class MapGeometry:
    """What the tiled and the im2col spec compute alike from dtype, shape, strides_bytes and swizzle."""

    # The fields each spec (a dataclass) declares, as `normalise_fields` leaves them; annotations only.
    dtype: TmaDtype
    shape: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    element_strides: tuple[int, ...] | None  # None only before normalise_fields
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int
    base_address: int | None

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def _params(self, cls, global_strides, **own):
        """`cls` (a MapParams) with the arguments every encode call takes from this spec, and the call's `own`."""
        return cls(dtype_enum=self.dtype.enum, rank=self.rank, global_dim=to_tma_order(self.shape),
                   global_strides=global_strides, element_strides=to_tma_order(self.element_strides),
                   interleave=int(self.interleave), swizzle=int(self.swizzle), l2_promotion=int(self.l2_promotion),
                   oob_fill=int(self.oob_fill), **own)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def swizzle_span_bytes(self) -> int:
        return SWIZZLE_SPAN_BYTES.get(self.swizzle, 0)

    @functools.cached_property
    def extent_bytes(self) -> int:
        """Bytes from the base address to one past the last element (non-negative strides)."""
        if any(n == 0 for n in self.shape):
            return 0
        if self.dtype.bits:  # packed values: the innermost axis holds shape[-1] * bits / 8 bytes
            outer = sum((n - 1) * s for n, s in zip(self.shape[:-1], self.strides_bytes))
            return outer + -(-self.shape[-1] * self.dtype.bits // 8)
        return sum((n - 1) * s for n, s in zip(self.shape, self.strides_bytes)) + self.itemsize


def contiguous_strides_bytes(shape, itemsize: int, bits: int = 0) -> tuple[int, ...]:
    """Row-major strides in bytes; `bits`: a packed type's bits per value (its rows hold shape[-1] * bits / 8 B)."""
    out, step = [], itemsize
    for k, n in enumerate(reversed(tuple(shape))):
        out.append(step)
        step = -(-max(int(n), 1) * bits // 8) if bits and k == 0 else step * max(int(n), 1)
    return tuple(reversed(out))
