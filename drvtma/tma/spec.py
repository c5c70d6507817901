"""The tiled tensor-map spec in NumPy order and its geometry (rules in `rules`, encoding in `encode`).

Users describe a tensor as NumPy does (outermost axis first, strides in bytes, the last axis contiguous). The driver
wants the reverse (fastest first, strides for dims 1..rank-1 only); `to_tma_order` is the one place that reverses.

Where the driver is looser than its documentation, drvtma decides (docs/tensormap.md):
- stride 0 on an axis with more than one element, or strides that make two elements share bytes: refused
  (rules ``stride_zero``, ``strides_overlap``) unless the spec says ``allow_overlap=True``;
- strides in any order (a permuted view) that do not overlap: accepted;
- a box larger than the tensor: accepted (the load fills the rest; `describe()` says so);
- INTERLEAVE_32B with a swizzle other than 32B: refused (rule ``interleave_swizzle``) unless
  ``allow_undocumented=True``.
The driver itself refuses a box whose loaded elements exceed 228 KiB (rule ``box_bytes``) [seen]; drvtma also refuses
a box whose shared-memory footprint (rows padded to the swizzle span) exceeds the 227 KiB a block can have (rule
``smem_budget``): the driver accepts such a map, but no kernel could land the box.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..errors import TensorMapError, address, as_int, as_ints, is_int
from ..runtime.capabilities import HOPPER
from .dtypes import TmaDtype, tma_dtype
from .params import TmaParams
from .targets import map_target

MAX_RANK = 5
MAX_DIM = 1 << 32
MAX_STRIDE_BYTES = 1 << 40  # exclusive
MAX_BOX = 256
MAX_ELEMENT_STRIDE = 8
# H100/H200 opt-in shared memory per block: the most one box can occupy in a kernel (drvtma's rule smem_budget);
# the capability table's Hopper figure (a rule's default; pass smem_limit=driver.smem_per_block_optin() elsewhere).
SMEM_PER_BLOCK_OPTIN_SM90 = HOPPER.smem_per_block_optin
# The driver's own limit on one box: prod(ceil(box[k] / elementStrides[k])) * elemsize over every dimension, dim 0
# included, padding not counted. uint8 boxes of 233,472 B (228 KiB) were accepted and 233,520 B refused on the H200
# (driver 580.159.04) [seen]; tests/test_probe_gpu.py pins both points.
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


@dataclass(frozen=True)
class TensorMapSpec(MapGeometry):
    """A tiled tensor map in NumPy order: ``shape``, ``strides_bytes`` (one per axis, the last = itemsize), ``box``.

    Build with `create`, `for_array` or `from_buffer`. Construction normalises types only; `validate` checks rules.
    """

    dtype: TmaDtype
    shape: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...] | None = None  # None: all ones
    interleave: int = Interleave.NONE
    swizzle: int = Swizzle.NONE
    l2_promotion: int = L2Promotion.NONE
    oob_fill: int = OobFill.ZERO
    base_address: int | None = None  # device address of element (0, .., 0); None: not known yet
    allow_overlap: bool = False  # accept stride 0 and overlapping strides (broadcasts, sliding windows)
    allow_undocumented: bool = False  # accept INTERLEAVE_32B with a swizzle other than 32B (the driver does)
    target: str | None = None  # the GPU the map is for (sm_100a); None: the open context's device, else sm_90a

    def __post_init__(self):
        normalise_fields(self, tuples=("box",))
        object.__setattr__(self, "allow_undocumented", _flag(self.allow_undocumented, "allow_undocumented"))
        object.__setattr__(self, "target", map_target(self.target))

    def __getstate__(self) -> dict:
        """The fields only: encode_tiled's memo of the checked geometry (a driver object) stays behind, so an
        encoded spec pickles and copies like a fresh one (fuzz shards send specs between processes)."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_drvtma_")}

    # ---- constructors
    @classmethod
    def create(cls, dtype, shape, box, *, strides=None, strides_bytes=None, **options) -> TensorMapSpec:
        """A spec from a shape and optional strides, in elements (``strides``) or bytes; default contiguous."""
        check_options(options, _OPTIONS, "tensor-map")
        dt = tma_dtype(dtype)
        shape = _int_tuple(shape, "shape")
        if strides is not None and strides_bytes is not None:
            raise TensorMapError("strides", "strides, strides_bytes", (strides, strides_bytes),
                                 "give strides (elements) or strides_bytes, not both")
        if strides is not None:  # a packed type's strides count values: bits / 8 bytes each, the innermost 1
            strides_bytes = tuple(s * (dt.bits or 8 * dt.itemsize) // 8 for s in _int_tuple(strides, "strides"))
            if dt.bits and strides_bytes:
                strides_bytes = strides_bytes[:-1] + (1,)
        elif strides_bytes is None:
            strides_bytes = contiguous_strides_bytes(shape, dt.itemsize, dt.bits)
        return cls(dt, shape, strides_bytes, box, **options)

    @classmethod
    def for_array(cls, arr, box, *, dtype=None, **options) -> TensorMapSpec:
        """A spec for a NumPy array (layout only) or a device array: anything with ``__dlpack__`` or
        ``__cuda_array_interface__`` (torch, CuPy, JAX, cuda.core), whose address becomes ``base_address``.

        The element type comes from the array (bf16 as bfloat16, fp8 as a uint8 map); ``dtype`` overrides it with
        one of the same size (e.g. "bfloat16" for a uint16 carrier, or an exporter that cannot name its type).
        """
        dt, layout = array_fields(arr, dtype, options)
        return cls(dt, layout.shape, layout.strides_bytes, box, **options)

    @classmethod
    def from_triton(cls, desc, *, swizzle=None) -> TensorMapSpec:
        """A spec for a host `triton.tools.tensor_descriptor.TensorDescriptor` (shape, strides, block shape,
        padding, base address); `swizzle` as your kernel's shared layout (default: the block row's span)."""
        from .triton import spec_from_triton

        return spec_from_triton(cls, desc, swizzle=swizzle)

    @classmethod
    def from_buffer(cls, buf, dtype, shape, box, *, strides=None, strides_bytes=None, offset_bytes: int = 0,
                    **options) -> TensorMapSpec:
        """A spec for a tensor that starts ``offset_bytes`` into a DeviceBuffer (or any object with ``.ptr``)."""
        ptr = getattr(buf, "ptr", None)
        if ptr is None:
            raise TensorMapError("type", "buf", type(buf).__name__, "give a DeviceBuffer (or any object with .ptr); "
                                 "for an array use TensorMapSpec.for_array", "it has no .ptr")
        offset = as_int(offset_bytes, "offset_bytes", error=TensorMapError, rule="type", lo=0)
        return cls.create(dtype, shape, box, strides=strides, strides_bytes=strides_bytes,
                          base_address=address(ptr, "buf.ptr", error=TensorMapError) + offset, **options)

    @classmethod
    def from_dict(cls, d: dict) -> TensorMapSpec:
        """A spec from a dict such as JSON gives: dtype, shape, box, and optional strides / strides_bytes, ..."""
        if not isinstance(d, dict):
            raise TensorMapError("spec_json", "spec", type(d).__name__,
                                 'give an object: {"dtype": "float16", "shape": [64, 64], "box": [64, 64]}',
                                 "a tensor-map spec is a JSON object (dict)")
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)} | {"strides"}
        unknown = set(d) - known
        if unknown:
            raise TensorMapError("spec_json", ", ".join(sorted(map(str, unknown))), "unknown tensor-map field(s)",
                                 f"use only {', '.join(sorted(known))}")
        for key in ("dtype", "shape", "box"):
            if key not in d:
                raise TensorMapError("spec_json", key, "missing", f"add {key!r}: a tensor-map spec needs dtype, "
                                     "shape and box")
        return cls.create(d.pop("dtype"), d.pop("shape"), d.pop("box"), **d)

    @classmethod
    def from_json(cls, text: str) -> TensorMapSpec:
        if not isinstance(text, (str, bytes, bytearray)):
            raise TensorMapError("spec_json", "json", type(text).__name__, "give JSON text (from_dict takes a dict)")
        try:
            d = json.loads(text)
        except ValueError as exc:
            raise TensorMapError("spec_json", "json", str(text)[:60], 'give a JSON object such as {"dtype": '
                                 '"float16", "shape": [64, 64], "box": [64, 64]}', f"not JSON ({exc})") from None
        return cls.from_dict(d)

    def to_dict(self) -> dict:
        """JSON-ready fields (enum names, hex address); `from_dict` reads it back."""
        d = fields_dict(self, box=list(self.box))
        if self.allow_undocumented:
            d["allow_undocumented"] = True
        if self.target is not None:
            d["target"] = self.target
        return d

    # ---- geometry (shared with drvtma.tma.oracle; rank, itemsize, extent_bytes, ... from MapGeometry)
    @property
    def loaded_counts(self) -> tuple[int, ...]:
        """Elements one load delivers per axis (NumPy order): ceil(box/element stride), the innermost axis whole."""
        assert self.element_strides is not None  # __post_init__ fills it
        counts = [-(-b // e) if e > 0 else 0 for b, e in zip(self.box, self.element_strides)]
        if counts and self.interleave == Interleave.NONE:
            counts[-1] = self.box[-1]  # the dim-0 element stride is ignored without interleave [doc, seen]
        return tuple(counts)

    @property
    def row_pitch_bytes(self) -> int:
        """Shared-memory bytes from one box row to the next: the row, padded to the swizzle span [seen]; a packed
        type's row counts its shared-memory bits (gaps included; not yet run on a GPU)."""
        row = self.box[-1] * self.dtype.smem_bits // 8 if self.dtype.bits else self.box[-1] * self.itemsize
        return max(row, self.swizzle_span_bytes)

    @property
    def expect_tx_bytes(self) -> int:
        """Bytes one load completes on its mbarrier: the loaded elements, not the padded footprint [doc, seen]; a
        packed type's values at their shared-memory bits (unconfirmed)."""
        return math.prod(self.loaded_counts) * (self.dtype.smem_bits or 8 * self.itemsize) // 8

    @property
    def smem_bytes(self) -> int:
        """Shared memory one box occupies: rows x row pitch."""
        return math.prod(self.loaded_counts[:-1]) * self.row_pitch_bytes

    def tma_params(self) -> TmaParams:
        """The driver's arguments. Rank 1 gets one dummy stride: the driver refuses an empty list [seen]."""
        strides = to_tma_order(self.strides_bytes)[1:] or (16,)
        return self._params(TmaParams, strides, box_dim=to_tma_order(self.box))

    def tma_coordinates(self, coords) -> tuple[int, ...]:
        """Box coordinates as the instruction takes them (dim 0 first), from NumPy order."""
        return to_tma_order(_int_tuple(coords, "coordinates"))

    # ---- checks
    def validate(self, *, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> TensorMapSpec:
        """Raise the first TensorMapError; return self when every rule holds."""
        from .rules import validate_all

        errors = validate_all(self, smem_limit=_smem_limit(smem_limit))
        if errors:
            raise errors[0]
        return self

    def is_valid(self, *, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> bool:
        from .rules import validate_all

        return not validate_all(self, smem_limit=_smem_limit(smem_limit))

    def describe(self) -> str:
        from .rules import describe_spec

        return describe_spec(self)

    def __str__(self) -> str:
        return self.describe()


_OPTIONS = frozenset({"element_strides", "interleave", "swizzle", "l2_promotion", "oob_fill", "base_address",
                      "allow_overlap", "allow_undocumented", "target"})



def _smem_limit(value) -> int:
    return as_int(value, "smem_limit", error=TensorMapError, rule="type", lo=0)


def check_options(options: dict, known, kind: str) -> None:
    """Refuse keyword options a spec's create() does not know (`kind`: "tensor-map", "im2col"), naming those it does."""
    unknown = set(options) - set(known)
    if unknown:
        raise TensorMapError("spec_json", ", ".join(sorted(unknown)), f"unknown {kind} option(s)",
                             f"use only {', '.join(sorted(known))}")


def normalise_fields(spec, *, tuples=(), ints=()) -> None:
    """Normalise the fields every spec has (dtype, shape, strides_bytes, element_strides, the four enums,
    base_address, allow_overlap) and a spec's own int tuples and ints, in the order a user reads them."""
    put = object.__setattr__
    put(spec, "dtype", tma_dtype(spec.dtype))
    for name in ("shape", "strides_bytes", *tuples):
        put(spec, name, _int_tuple(getattr(spec, name), name))
    for name in ints:
        put(spec, name, as_int(getattr(spec, name), name, error=TensorMapError, rule="type"))
    es = (1,) * len(spec.shape) if spec.element_strides is None else spec.element_strides
    put(spec, "element_strides", _int_tuple(es, "element_strides"))
    for name, enum in _ENUM_FIELDS:
        put(spec, name, _enum_value(getattr(spec, name), enum, name))
    if spec.base_address is not None:  # an int or hex text ("0x7f0000001000"), as JSON and the CLI give it
        put(spec, "base_address", address(spec.base_address, error=TensorMapError))
    put(spec, "allow_overlap", _flag(spec.allow_overlap, "allow_overlap"))


def fields_dict(spec, **own) -> dict:
    """JSON-ready common fields around a spec's `own` ones (enum names, hex address, allow_overlap when set)."""
    d = {"dtype": spec.dtype.name, "shape": list(spec.shape), "strides_bytes": list(spec.strides_bytes), **own,
         "element_strides": list(spec.element_strides)}
    for key, enum in _ENUM_FIELDS:
        v = getattr(spec, key)
        d[key] = v.name if isinstance(v, enum) else int(v)
    if spec.base_address is not None:
        d["base_address"] = hex(spec.base_address)
    if spec.allow_overlap:
        d["allow_overlap"] = True
    return d


def array_fields(arr, dtype, options: dict):
    """(dtype, layout) of an array for a spec; its device address becomes options' base_address."""
    from .arrays import array_layout

    layout = array_layout(arr)
    dt = tma_dtype(dtype if dtype is not None else layout.dtype)
    if dt.itemsize != layout.dtype.itemsize:
        raise TensorMapError("dtype_size", "dtype", dt.name, f"use a {layout.dtype.itemsize}-byte type, or "
                             "leave dtype out", f"{dt.name} ({dt.itemsize} B) does not match the array's "
                             f"{layout.dtype} ({layout.dtype.itemsize} B)")
    if layout.address is not None:
        options.setdefault("base_address", layout.address)
    return dt, layout


def contiguous_strides_bytes(shape, itemsize: int, bits: int = 0) -> tuple[int, ...]:
    """Row-major strides in bytes; `bits`: a packed type's bits per value (its rows hold shape[-1] * bits / 8 B)."""
    out, step = [], itemsize
    for k, n in enumerate(reversed(tuple(shape))):
        out.append(step)
        step = -(-max(int(n), 1) * bits // 8) if bits and k == 0 else step * max(int(n), 1)
    return tuple(reversed(out))
