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
The driver itself refuses a box whose loaded elements exceed 228 KiB (rule ``box_bytes``); drvtma also refuses
a box whose shared-memory footprint (rows padded to the swizzle span) exceeds the 227 KiB a block can have (rule
``smem_budget``): the driver accepts such a map, but no kernel could land the box.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass

from ...errors import TensorMapError, address, as_int
from ..arrays import array_layout
from ..dtypes import TmaDtype, tma_dtype

# The geometry every spec and rule shares lives below them in `geometry`; spec's names stay importable from here.
from ..geometry import (  # noqa: F401
    _ENUM_FIELDS,
    ALL_RULES,
    DRIVER_BOX_BYTES_LIMIT,
    DRIVER_RULES,
    DRVTMA_RULES,
    MAX_BOX,
    MAX_DIM,
    MAX_ELEMENT_STRIDE,
    MAX_RANK,
    MAX_STRIDE_BYTES,
    SM90_SWIZZLES,
    SMEM_PER_BLOCK_OPTIN_SM90,
    SWIZZLE_SPAN_BYTES,
    TENSOR_MAP_BYTES,
    Interleave,
    L2Promotion,
    MapGeometry,
    OobFill,
    Swizzle,
    _enum_value,
    _flag,
    _int_tuple,
    contiguous_strides_bytes,
    to_tma_order,
)
from ..params import TmaParams
from ..targets import map_target
from ..triton import spec_from_triton
from .rules import describe_spec, validate_all


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
        """The fields only: encode_tiled's memo of the checked geometry (a driver object) and the cached
        `loaded_counts` stay behind, so an encoded spec pickles and copies like a fresh one (fuzz shards send specs
        between processes)."""
        return {k: v for k, v in self.__dict__.items() if k in self.__dataclass_fields__}

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

    # ---- geometry (shared with drvtma.tma.tiled.oracle; rank, itemsize, extent_bytes, ... from MapGeometry)
    @functools.cached_property  # the fields never change (frozen): computed once per spec, read by every oracle
    def loaded_counts(self) -> tuple[int, ...]:
        """Elements one load delivers per axis (NumPy order): ceil(box/element stride), the innermost axis whole."""
        assert self.element_strides is not None  # __post_init__ fills it
        counts = [-(-b // e) if e > 0 else 0 for b, e in zip(self.box, self.element_strides)]
        if counts and self.interleave == Interleave.NONE:
            counts[-1] = self.box[-1]  # the dim-0 element stride is ignored without interleave [doc, seen]
        return tuple(counts)

    @property
    def row_pitch_bytes(self) -> int:
        """Shared-memory bytes from one box row to the next: the row, padded to the swizzle span; a packed
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
        """The driver's arguments. Rank 1 gets one dummy stride: the driver refuses an empty list."""
        strides = to_tma_order(self.strides_bytes)[1:] or (16,)
        return self._params(TmaParams, strides, box_dim=to_tma_order(self.box))

    def tma_coordinates(self, coords) -> tuple[int, ...]:
        """Box coordinates as the instruction takes them (dim 0 first), from NumPy order."""
        return to_tma_order(_int_tuple(coords, "coordinates"))

    # ---- checks
    def validate(self, *, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> TensorMapSpec:
        """Raise the first TensorMapError; return self when every rule holds."""
        errors = validate_all(self, smem_limit=_smem_limit(smem_limit))
        if errors:
            raise errors[0]
        return self

    def is_valid(self, *, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> bool:
        return not validate_all(self, smem_limit=_smem_limit(smem_limit))

    def describe(self) -> str:
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
    layout = array_layout(arr)
    dt = tma_dtype(dtype if dtype is not None else layout.dtype)
    if dt.itemsize != layout.dtype.itemsize:
        raise TensorMapError("dtype_size", "dtype", dt.name, f"use a {layout.dtype.itemsize}-byte type, or "
                             "leave dtype out", f"{dt.name} ({dt.itemsize} B) does not match the array's "
                             f"{layout.dtype} ({layout.dtype.itemsize} B)")
    if layout.address is not None:
        options.setdefault("base_address", layout.address)
    return dt, layout
