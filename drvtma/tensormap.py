"""Tiled tensor maps: a spec in NumPy order, every encode rule as a named check, and the encoded 128-byte map.

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

import ctypes
import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from .dtypes import FLOAT_DTYPES, TmaDtype, tma_dtype
from .errors import CudaError, TensorMapError

MAX_RANK = 5
MAX_DIM = 1 << 32
MAX_STRIDE_BYTES = 1 << 40  # exclusive
MAX_BOX = 256
MAX_ELEMENT_STRIDE = 8
# H100/H200 opt-in shared memory per block: the most one box can occupy in a kernel (drvtma's rule smem_budget).
SMEM_PER_BLOCK_OPTIN_SM90 = 227 * 1024
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


class L2Promotion(IntEnum):
    NONE = 0
    B64 = 1
    B128 = 2
    B256 = 3


class OobFill(IntEnum):
    ZERO = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    NAN = 1  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA


SWIZZLE_SPAN_BYTES = {Swizzle.NONE: 0, Swizzle.B32: 32, Swizzle.B64: 64, Swizzle.B128: 128}
SM100_ONLY_SWIZZLES = {4: "128B_ATOM_32B", 5: "128B_ATOM_32B_FLIP_8B", 6: "128B_ATOM_64B"}

# Rules the driver itself enforces (it answers CUDA_ERROR_INVALID_VALUE); every other rule is drvtma's own:
# the driver accepts such specs, and tests/test_probe_gpu.py pins that it still does.
DRIVER_RULES = frozenset({"rank", "enum", "sm100_only", "address_alignment", "dim_range", "stride_alignment",
                          "stride_range", "box_range", "box_inner_bytes", "element_stride_range",
                          "interleave_rank", "swizzle_span", "nan_fill_type", "box_bytes"})
DRVTMA_RULES = frozenset({"rank_mismatch", "inner_stride", "stride_zero", "strides_overlap", "interleave_swizzle",
                          "smem_budget"})
ALL_RULES = DRIVER_RULES | DRVTMA_RULES


def _enum_value(value, enum: type[IntEnum], what: str) -> int:
    """An enum member from a member, an int (kept even when out of range, so validation can name it) or a name."""
    if isinstance(value, str):
        key = value.strip().upper().replace("-", "_")
        key = {"32B": "B32", "64B": "B64", "128B": "B128", "16B": "B16", "256B": "B256", "NAN_REQUEST_ZERO_FMA": "NAN",
               "ZEROS": "ZERO"}.get(key, key)
        if key in enum.__members__:
            return enum.__members__[key]
        raise ValueError(f"{what} {value!r} is not one of {', '.join(enum.__members__)}")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        try:
            return enum(int(value))
        except ValueError:
            return int(value)
    raise TypeError(f"{what} must be a name or an int, got {type(value).__name__}")


def _int_tuple(values, what: str) -> tuple[int, ...]:
    if isinstance(values, (int, np.integer)):
        values = (values,)
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what} must hold ints, got {v!r}")
        out.append(int(v))
    return tuple(out)


def to_tma_order(values) -> tuple:
    """NumPy order (outermost first) to TMA order (fastest first). The only place drvtma reverses axes."""
    return tuple(reversed(tuple(values)))


@dataclass(frozen=True)
class TmaParams:
    """What cuTensorMapEncodeTiled receives, in its own order (fastest dimension first, strides for dims 1..)."""

    dtype_enum: int
    rank: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    def describe(self) -> str:
        return (f"tensorDataType={self.dtype_enum}, tensorRank={self.rank}, globalDim={list(self.global_dim)}, "
                f"globalStrides={list(self.global_strides)}, boxDim={list(self.box_dim)}, "
                f"elementStrides={list(self.element_strides)}, interleave={self.interleave}, "
                f"swizzle={self.swizzle}, l2Promotion={self.l2_promotion}, oobFill={self.oob_fill}")


@dataclass(frozen=True)
class TensorMapSpec:
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

    def __post_init__(self):
        put = object.__setattr__
        put(self, "dtype", tma_dtype(self.dtype))
        put(self, "shape", _int_tuple(self.shape, "shape"))
        put(self, "strides_bytes", _int_tuple(self.strides_bytes, "strides_bytes"))
        put(self, "box", _int_tuple(self.box, "box"))
        es = (1,) * len(self.shape) if self.element_strides is None else self.element_strides
        put(self, "element_strides", _int_tuple(es, "element_strides"))
        put(self, "interleave", _enum_value(self.interleave, Interleave, "interleave"))
        put(self, "swizzle", _enum_value(self.swizzle, Swizzle, "swizzle"))
        put(self, "l2_promotion", _enum_value(self.l2_promotion, L2Promotion, "l2_promotion"))
        put(self, "oob_fill", _enum_value(self.oob_fill, OobFill, "oob_fill"))
        if self.base_address is not None:
            put(self, "base_address", int(self.base_address))

    # ---- constructors
    @classmethod
    def create(cls, dtype, shape, box, *, strides=None, strides_bytes=None, **options) -> TensorMapSpec:
        """A spec from a shape and optional strides, in elements (``strides``) or bytes; default contiguous."""
        dt = tma_dtype(dtype)
        shape = _int_tuple(shape, "shape")
        if strides is not None and strides_bytes is not None:
            raise ValueError("give strides (elements) or strides_bytes, not both")
        if strides is not None:
            strides_bytes = tuple(s * dt.itemsize for s in _int_tuple(strides, "strides"))
        elif strides_bytes is None:
            strides_bytes = contiguous_strides_bytes(shape, dt.itemsize)
        return cls(dt, shape, strides_bytes, box, **options)

    @classmethod
    def for_array(cls, arr, box, *, dtype=None, **options) -> TensorMapSpec:
        """A spec for a NumPy array or any object with ``__cuda_array_interface__`` (then its address too).

        ``dtype`` overrides the array's (e.g. "bfloat16" for a uint16 carrier).
        """
        cai = getattr(arr, "__cuda_array_interface__", None)
        if cai is not None:
            np_dtype = np.dtype(cai["typestr"])
            shape = tuple(cai["shape"])
            strides = cai.get("strides") or contiguous_strides_bytes(shape, np_dtype.itemsize)
            options.setdefault("base_address", int(cai["data"][0]))
        else:
            arr = np.asarray(arr)
            np_dtype, shape, strides = arr.dtype, arr.shape, arr.strides
        dt = tma_dtype(dtype if dtype is not None else np_dtype)
        if dt.itemsize != np_dtype.itemsize:
            raise ValueError(f"dtype {dt} ({dt.itemsize} B) does not match the array's {np_dtype} "
                             f"({np_dtype.itemsize} B)")
        return cls(dt, shape, strides, box, **options)

    @classmethod
    def from_buffer(cls, buf, dtype, shape, box, *, strides=None, strides_bytes=None, offset_bytes: int = 0,
                    **options) -> TensorMapSpec:
        """A spec for a tensor that starts ``offset_bytes`` into a DeviceBuffer (or any object with ``.ptr``)."""
        return cls.create(dtype, shape, box, strides=strides, strides_bytes=strides_bytes,
                          base_address=int(buf.ptr) + int(offset_bytes), **options)

    @classmethod
    def from_dict(cls, d: dict) -> TensorMapSpec:
        """A spec from a dict such as JSON gives: dtype, shape, box, and optional strides / strides_bytes, ..."""
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)} | {"strides"}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown tensor-map field(s): {', '.join(sorted(unknown))}; known: "
                             f"{', '.join(sorted(known))}")
        for key in ("dtype", "shape", "box"):
            if key not in d:
                raise ValueError(f"a tensor-map spec needs {key!r}")
        if isinstance(d.get("base_address"), str):
            d["base_address"] = int(d["base_address"], 0)
        return cls.create(d.pop("dtype"), d.pop("shape"), d.pop("box"), **d)

    @classmethod
    def from_json(cls, text: str) -> TensorMapSpec:
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict:
        """JSON-ready fields (enum names, hex address); `from_dict` reads it back."""
        d = {"dtype": self.dtype.name, "shape": list(self.shape), "strides_bytes": list(self.strides_bytes),
             "box": list(self.box), "element_strides": list(self.element_strides)}
        for key, enum in (("interleave", Interleave), ("swizzle", Swizzle), ("l2_promotion", L2Promotion),
                          ("oob_fill", OobFill)):
            v = getattr(self, key)
            d[key] = v.name if isinstance(v, enum) else int(v)
        if self.base_address is not None:
            d["base_address"] = hex(self.base_address)
        if self.allow_overlap:
            d["allow_overlap"] = True
        if self.allow_undocumented:
            d["allow_undocumented"] = True
        return d

    def replace(self, **changes) -> TensorMapSpec:
        return dataclasses.replace(self, **changes)

    # ---- geometry (shared with drvtma.oracle)
    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def loaded_counts(self) -> tuple[int, ...]:
        """Elements one load delivers per axis (NumPy order): ceil(box/element stride), the innermost axis whole."""
        counts = [-(-b // e) if e > 0 else 0 for b, e in zip(self.box, self.element_strides)]
        if counts and self.interleave == Interleave.NONE:
            counts[-1] = self.box[-1]  # the dim-0 element stride is ignored without interleave [doc, seen]
        return tuple(counts)

    @property
    def swizzle_span_bytes(self) -> int:
        return SWIZZLE_SPAN_BYTES.get(self.swizzle, 0)

    @property
    def row_pitch_bytes(self) -> int:
        """Shared-memory bytes from one box row to the next: the row, padded to the swizzle span [seen]."""
        return max(self.box[-1] * self.itemsize, self.swizzle_span_bytes)

    @property
    def expect_tx_bytes(self) -> int:
        """Bytes one load completes on its mbarrier: the loaded elements, not the padded footprint [doc, seen]."""
        return math.prod(self.loaded_counts) * self.itemsize

    @property
    def smem_bytes(self) -> int:
        """Shared memory one box occupies: rows x row pitch."""
        return math.prod(self.loaded_counts[:-1]) * self.row_pitch_bytes

    @functools.cached_property
    def extent_bytes(self) -> int:
        """Bytes from the base address to one past the last element (non-negative strides)."""
        if any(n == 0 for n in self.shape):
            return 0
        return sum((n - 1) * s for n, s in zip(self.shape, self.strides_bytes)) + self.itemsize

    def tma_params(self) -> TmaParams:
        """The driver's arguments. Rank 1 gets one dummy stride: the driver refuses an empty list [seen]."""
        strides = to_tma_order(self.strides_bytes)[1:] or (16,)
        return TmaParams(self.dtype.enum, self.rank, to_tma_order(self.shape), strides, to_tma_order(self.box),
                         to_tma_order(self.element_strides), int(self.interleave), int(self.swizzle),
                         int(self.l2_promotion), int(self.oob_fill))

    def tma_coordinates(self, coords) -> tuple[int, ...]:
        """Box coordinates as the instruction takes them (dim 0 first), from NumPy order."""
        return to_tma_order(_int_tuple(coords, "coordinates"))

    # ---- checks
    def validate(self, *, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> TensorMapSpec:
        """Raise the first TensorMapError; return self when every rule holds."""
        errors = validate_all(self, smem_limit=smem_limit)
        if errors:
            raise errors[0]
        return self

    def is_valid(self, *, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> bool:
        return not validate_all(self, smem_limit=smem_limit)

    def describe(self) -> str:
        return describe_spec(self)

    def __str__(self) -> str:
        return describe_spec(self)


def contiguous_strides_bytes(shape, itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for n in reversed(tuple(shape)):
        out.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(out))


# ---------------------------------------------------------------------------------------------- validation

def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _axis(spec: TensorMapSpec, i: int) -> str:
    """A readable name for NumPy axis i: 'axis 0 (rows)' style for the common ranks."""
    names = {2: ("rows", "columns"), 3: ("planes", "rows", "columns")}.get(spec.rank)
    return f"axis {i} ({names[i]})" if names else f"axis {i}"


def _elements(nbytes: int, dt: TmaDtype) -> str:
    return f"{nbytes // dt.itemsize} {dt.name}" if nbytes % dt.itemsize == 0 else f"{nbytes} B"


def address_alignment(interleave) -> int:
    """The alignment of global addresses and strides: 32 B for INTERLEAVE_32B maps, else 16 B."""
    return 32 if interleave == Interleave.B32 else 16


def _address_error(address: int, interleave) -> TensorMapError | None:
    align = address_alignment(interleave)
    if address % align == 0:
        return None
    why = " (INTERLEAVE_32B)" if align == 32 else ""
    return TensorMapError("address_alignment", "base_address", hex(address),
                          f"start the tensor at a multiple of {align} B, e.g. 0x{round_up(address, align):x}",
                          f"the global address must be {align}-byte aligned{why}; it is {address % align} B past "
                          "a boundary")


def _bounds_error(spec: TensorMapSpec, available: int | None) -> TensorMapError | None:
    """The tensor must fit the buffer it is encoded for (from the base address on)."""
    if available is None or spec.extent_bytes <= available:
        return None
    return TensorMapError("buffer_bounds", "shape", spec.shape,
                          f"use a buffer of at least {spec.extent_bytes} B from the base address",
                          f"the tensor spans {spec.extent_bytes} B but the buffer holds {available} B from the "
                          "base address")


def _check_rank(spec):
    if not 1 <= spec.rank <= MAX_RANK:
        yield TensorMapError("rank", "shape", spec.shape, "use 1 to 5 axes (merge contiguous axes, or split the "
                             "tensor into several maps)", f"rank {spec.rank} is outside 1..{MAX_RANK}")
    for name in ("strides_bytes", "box", "element_strides"):
        if len(getattr(spec, name)) != spec.rank:
            yield TensorMapError("rank_mismatch", name, getattr(spec, name),
                                 f"give one {name} entry per axis of shape {spec.shape}",
                                 f"{len(getattr(spec, name))} entries for a rank-{spec.rank} shape")


def _check_enums(spec):
    for name, enum in (("interleave", Interleave), ("l2_promotion", L2Promotion), ("oob_fill", OobFill)):
        v = getattr(spec, name)
        if not isinstance(v, enum):
            yield TensorMapError("enum", name, v, f"use one of {', '.join(f'{m.name}={int(m)}' for m in enum)}",
                                 f"{v} is not a {name} value")
    if spec.swizzle in SM100_ONLY_SWIZZLES:
        yield TensorMapError("sm100_only", "swizzle", spec.swizzle, "use NONE, 32B, 64B or 128B on sm_90",
                             f"SWIZZLE_{SM100_ONLY_SWIZZLES[spec.swizzle]} exists only on Blackwell (sm_100)")
    elif not isinstance(spec.swizzle, Swizzle):
        yield TensorMapError("enum", "swizzle", spec.swizzle, "use NONE=0, B32=1, B64=2 or B128=3",
                             f"{spec.swizzle} is not a swizzle value")


def _check_address(spec):
    error = None if spec.base_address is None else _address_error(spec.base_address, spec.interleave)
    if error is not None:
        yield error


def _check_dims(spec):
    for i, n in enumerate(spec.shape):
        if not 1 <= n <= MAX_DIM:
            yield TensorMapError("dim_range", f"shape[{i}]", n, f"use 1..2^32 elements along {_axis(spec, i)}",
                                 f"{_axis(spec, i)} has {n} elements")


def _check_strides(spec):
    dt, align = spec.dtype, address_alignment(spec.interleave)
    if spec.strides_bytes[-1] != dt.itemsize:
        yield TensorMapError("inner_stride", f"strides_bytes[{spec.rank - 1}]", spec.strides_bytes[-1],
                             f"make the last axis contiguous ({dt.itemsize} B per {dt.name}); copy the array or "
                             "move the contiguous axis last",
                             "TMA reads the innermost axis contiguously; its stride must be the element size")
    for i, s in enumerate(spec.strides_bytes[:-1]):
        if s < 0 or s >= MAX_STRIDE_BYTES:
            fix = "use a view without negative strides" if s < 0 else "split the tensor into several maps"
            yield TensorMapError("stride_range", f"strides_bytes[{i}]", s, fix,
                                 f"the stride of {_axis(spec, i)} must be in 0..2^40-1 B")
        elif s % align:
            padded = round_up(s, align)
            why = " (INTERLEAVE_32B)" if align == 32 else ""
            yield TensorMapError(
                "stride_alignment", f"strides_bytes[{i}]", s,
                f"pad {_axis(spec, i)} to {padded} B = {_elements(padded, dt)} per step",
                f"the stride of {_axis(spec, i)} is {s} B = {_elements(s, dt)}, not a multiple of {align} B{why}")


def _check_overlap(spec):
    """Stride 0 and overlapping strides: accepted by the driver, refused here unless allow_overlap [seen]."""
    if spec.allow_overlap or spec.strides_bytes[-1] != spec.itemsize:
        return
    for i, s in enumerate(spec.strides_bytes[:-1]):
        if s == 0 and spec.shape[i] > 1:
            yield TensorMapError("stride_zero", f"strides_bytes[{i}]", 0,
                                 "pass allow_overlap=True to broadcast on purpose, else give the real stride",
                                 f"{_axis(spec, i)} has {spec.shape[i]} elements that all read the same bytes")
    # Sufficient test for non-overlap: sorted by stride, each axis steps past everything inside it.
    axes = sorted((s, n, i) for i, (s, n) in enumerate(zip(spec.strides_bytes, spec.shape)) if n > 1 and s > 0)
    for (s_in, n_in, i_in), (s_out, _, i_out) in zip(axes, axes[1:]):
        if s_out < s_in * n_in:
            yield TensorMapError(
                "strides_overlap", f"strides_bytes[{i_out}]", s_out,
                f"use a stride of at least {round_up(s_in * n_in, 16)} B for {_axis(spec, i_out)}, or pass "
                "allow_overlap=True for an overlapping view",
                f"{_axis(spec, i_out)} steps {s_out} B but {_axis(spec, i_in)} spans {s_in * n_in} B: "
                "elements share bytes")
            return


def _check_box(spec):
    dt = spec.dtype
    for i, b in enumerate(spec.box):
        if not 1 <= b <= MAX_BOX:
            yield TensorMapError("box_range", f"box[{i}]", b, f"use 1..256 elements per box along {_axis(spec, i)}; "
                                 "cover more with several loads", f"box[{i}] = {b} is outside 1..256")
    for i, e in enumerate(spec.element_strides):
        if not 1 <= e <= MAX_ELEMENT_STRIDE:
            yield TensorMapError("element_stride_range", f"element_strides[{i}]", e, "use 1..8",
                                 f"element stride {e} along {_axis(spec, i)} is outside 1..8")
    inner = spec.box[-1] * dt.itemsize
    # Documented for INTERLEAVE_NONE; the H200's driver also refused INTERLEAVE_32B maps with 4 and 8 B inner rows
    # (16 and 32 B accepted) [seen], so drvtma checks it for every interleave.
    if 1 <= spec.box[-1] <= MAX_BOX and inner % 16:
        unit = 16 // math.gcd(16, dt.itemsize)
        lo, hi = spec.box[-1] // unit * unit, round_up(spec.box[-1], unit)
        choices = " or ".join(str(v) for v in (lo, hi) if 1 <= v <= MAX_BOX)
        yield TensorMapError("box_inner_bytes", f"box[{spec.rank - 1}]", spec.box[-1],
                             f"use box[{spec.rank - 1}] = {choices} (a multiple of {unit} {dt.name})",
                             f"the innermost box row is {inner} B, not a multiple of 16 B")


def _check_interleave(spec):
    if spec.interleave in (Interleave.B16, Interleave.B32) and spec.rank < 3:
        yield TensorMapError("interleave_rank", "interleave", spec.interleave.name,
                             "use INTERLEAVE_NONE, or describe the tensor with 3 to 5 axes (e.g. N, C/8, HW*8)",
                             f"interleaved layouts need rank >= 3, this one has rank {spec.rank}")
    if (spec.interleave == Interleave.B32 and spec.swizzle != Swizzle.B32 and isinstance(spec.swizzle, Swizzle)
            and not spec.allow_undocumented):
        yield TensorMapError("interleave_swizzle", "swizzle", getattr(spec.swizzle, "name", spec.swizzle),
                             "use SWIZZLE_32B with INTERLEAVE_32B (or allow_undocumented=True: the driver accepts "
                             "it, but what the load does is not documented)",
                             "the documentation requires SWIZZLE_32B with INTERLEAVE_32B")


def _check_swizzle(spec):
    span = spec.swizzle_span_bytes
    inner = spec.box[-1] * spec.itemsize
    if spec.interleave == Interleave.NONE and span and inner > span:
        most = span // spec.itemsize
        yield TensorMapError("swizzle_span", f"box[{spec.rank - 1}]", spec.box[-1],
                             f"use box[{spec.rank - 1}] <= {most} {spec.dtype.name} with SWIZZLE_{span}B, or a "
                             "wider swizzle, and load a row with several boxes",
                             f"the innermost box row is {inner} B, wider than the {span} B swizzle span")


def _check_fill(spec):
    if spec.oob_fill == OobFill.NAN and spec.dtype not in FLOAT_DTYPES:
        yield TensorMapError("nan_fill_type", "oob_fill", "NAN", "use oob_fill='zero', or a floating dtype",
                             f"NaN fill needs a floating type; {spec.dtype.name} is not one")


def driver_box_bytes(spec) -> int:
    """The box size the driver limits: loaded elements in every dimension (dim 0's element stride counted too,
    although a load ignores it), times the element size, without swizzle padding [seen]."""
    return math.prod(-(-b // e) for b, e in zip(spec.box, spec.element_strides)) * spec.itemsize


def _check_smem(spec, smem_limit: int):
    """The driver's box limit first; then, for boxes the driver takes, whether one fits a block's shared memory."""
    data = driver_box_bytes(spec)
    if data > DRIVER_BOX_BYTES_LIMIT:
        yield TensorMapError("box_bytes", "box", spec.box,
                             f"load at most {DRIVER_BOX_BYTES_LIMIT} B per box (several smaller boxes, or element "
                             "strides)",
                             f"the box loads {data} B; the driver refuses boxes over {DRIVER_BOX_BYTES_LIMIT} B")
        return
    need = spec.smem_bytes
    if need > smem_limit:
        yield TensorMapError("smem_budget", "box", spec.box,
                             f"shrink the box to at most {smem_limit} B of shared memory (rows x row pitch), or "
                             "load it in several boxes",
                             f"one box needs {need} B of shared memory (rows padded to the row pitch), over the "
                             f"{smem_limit} B a block can have; the driver accepts the map, no kernel can land it")


def validate_all(spec: TensorMapSpec, *, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> list[TensorMapError]:
    """Every broken rule, in a fixed order. Checks that depend on a broken one (shapes of arrays, enums) skip.

    A smaller ``smem_limit`` checks a budget of your own; a larger one only leaves the refusal to the driver.
    """
    errors = list(_check_rank(spec))
    if errors:
        return errors
    errors += _check_enums(spec)
    errors += _check_address(spec)
    errors += _check_dims(spec)
    errors += _check_strides(spec)
    errors += _check_overlap(spec)
    errors += _check_box(spec)
    errors += _check_interleave(spec)
    enums_ok = not any(e.rule in ("enum", "sm100_only") for e in errors)
    if enums_ok:
        errors += _check_swizzle(spec)
    errors += _check_fill(spec)
    ranges_ok = not any(e.rule in ("box_range", "element_stride_range") for e in errors)
    if enums_ok and ranges_ok:
        errors += _check_smem(spec, smem_limit)
    return errors


def driver_should_accept(errors: list[TensorMapError]) -> bool:
    """True when no broken rule is one the driver enforces (drvtma's own rules leave the driver willing)."""
    return not any(e.rule in DRIVER_RULES for e in errors)


# ---------------------------------------------------------------------------------------------- description

def describe_spec(spec: TensorMapSpec) -> str:
    dt = spec.dtype
    lines = [f"TensorMapSpec {dt.name} (tensor-map type {dt.enum}, {dt.itemsize} B), NumPy order (outermost first):",
             f"  shape {spec.shape}, strides {spec.strides_bytes} B, box {spec.box}, "
             f"element strides {spec.element_strides}"]
    if len(spec.strides_bytes) == spec.rank == len(spec.box) == len(spec.element_strides) and spec.rank >= 1:
        p = spec.tma_params()
        lines.append(f"  driver order (fastest first): globalDim {list(p.global_dim)}, globalStrides "
                     f"{list(p.global_strides)} B, boxDim {list(p.box_dim)}, elementStrides {list(p.element_strides)}")
        name = lambda v: getattr(v, "name", str(v))  # noqa: E731
        lines.append(f"  interleave {name(spec.interleave)}, swizzle {name(spec.swizzle)}, "
                     f"L2 promotion {name(spec.l2_promotion)}, out-of-bounds fill {name(spec.oob_fill)}")
        if all(1 <= b <= MAX_BOX for b in spec.box) and all(e >= 1 for e in spec.element_strides):
            lines.append(f"  per load: {spec.loaded_counts} elements, expect_tx {spec.expect_tx_bytes} B, "
                         f"shared memory {spec.smem_bytes} B (row pitch {spec.row_pitch_bytes} B)")
        over = [i for i, (b, n) in enumerate(zip(spec.box, spec.shape)) if b > n]
        if over:
            lines.append(f"  note: the box is larger than the tensor along axis {over}: loads fill the rest")
    if spec.base_address is not None:
        lines.append(f"  base address 0x{spec.base_address:x}")
    if spec.allow_overlap or spec.allow_undocumented:
        lines.append(f"  allowed: {'overlap ' if spec.allow_overlap else ''}"
                     f"{'undocumented' if spec.allow_undocumented else ''}".rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- encoding

def _resolve_target(base_address: int | None, target) -> tuple[int, object, int | None]:
    """(address, object to keep alive, bytes available from the address) for an encode or replace target."""
    if target is None:
        if base_address is None:
            raise ValueError("no address: give a DeviceBuffer or an address, or set the spec's base_address")
        return base_address, None, None
    if isinstance(target, (int, np.integer)):
        return int(target), None, None
    cai = getattr(target, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0]), target, None
    if hasattr(target, "ptr") and hasattr(target, "nbytes"):
        ptr, nbytes = int(target.ptr), int(target.nbytes)
        # A spec made by from_buffer(buf, offset_bytes=...) points inside the buffer: keep that offset.
        if base_address is not None and ptr <= base_address < ptr + nbytes:
            return base_address, target, ptr + nbytes - base_address
        return ptr, target, nbytes
    raise TypeError(f"encode target must be a DeviceBuffer, an int address or None, got {type(target).__name__}")


def encode_tiled(spec: TensorMapSpec, target=None, *, validate: bool = True,
                 smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> TensorMap:
    """Validate `spec` and encode it with cuTensorMapEncodeTiled for `target` (DeviceBuffer, address or None)."""
    address, keepalive, available = _resolve_target(spec.base_address, target)
    if address != spec.base_address:
        spec = spec.replace(base_address=address)
    if not validate:
        return encode_unchecked(spec.tma_params(), address, spec=spec, keepalive=keepalive)
    error = _address_error(address, spec.interleave)
    if error is not None:
        raise error
    params = _valid_geometry_params(spec, smem_limit)
    error = _bounds_error(spec, available)
    if error is not None:
        raise error
    return encode_unchecked(params, address, spec=spec, keepalive=keepalive)


# Validation costs several times the driver's encode; a map is often re-encoded for new addresses with the same
# geometry, so valid geometries (everything but the address, the only address-dependent rule) are remembered.
_valid_geometries: dict[tuple, TmaParams] = {}


def _valid_geometry_params(spec: TensorMapSpec, smem_limit: int) -> TmaParams:
    memo = spec.__dict__.get("_valid_params")  # the same spec object encoded again
    if memo is not None and memo[0] == smem_limit:
        return memo[1]
    key = (spec.dtype.enum, spec.shape, spec.strides_bytes, spec.box, spec.element_strides, int(spec.interleave),
           int(spec.swizzle), int(spec.l2_promotion), int(spec.oob_fill), spec.allow_overlap,
           spec.allow_undocumented, smem_limit)
    params = _valid_geometries.get(key)
    if params is None:
        errors = validate_all(spec, smem_limit=smem_limit)  # the address was checked by the caller
        if errors:
            raise errors[0]
        if len(_valid_geometries) >= 4096:
            _valid_geometries.clear()
        params = _valid_geometries[key] = spec.tma_params()
    spec.__dict__["_valid_params"] = (smem_limit, params)  # frozen dataclass: a memo, not a field
    return params


def _driver_args(params: TmaParams, address: int) -> tuple:
    from cuda.bindings import driver as cu

    u32, u64 = cu.cuuint32_t, cu.cuuint64_t
    return (cu.CUtensorMapDataType(params.dtype_enum), u32(params.rank), address,
            [u64(v) for v in params.global_dim], [u64(v) for v in params.global_strides],
            [u32(v) for v in params.box_dim], [u32(v) for v in params.element_strides],
            cu.CUtensorMapInterleave(params.interleave), cu.CUtensorMapSwizzle(params.swizzle),
            cu.CUtensorMapL2promotion(params.l2_promotion), cu.CUtensorMapFloatOOBfill(params.oob_fill))


def encode_unchecked(params: TmaParams, address: int, *, spec: TensorMapSpec | None = None,
                     keepalive=None) -> TensorMap:
    """Encode exactly these driver arguments, with none of drvtma's checks (the validator-vs-driver test).

    A refusal raises CudaError listing every argument; values cuda-python cannot even represent (an enum out of
    range, a negative stride, rank > 5) raise CudaError too, with code -1 and the bindings' message.
    """
    from cuda.bindings import driver as cu

    from . import driver

    driver.context()

    def every_argument() -> str:  # built only for an error: describing costs more than encoding
        where = f"arguments: {params.describe()}, globalAddress=0x{address:x}"
        return where + (f"\nspec (NumPy order): {spec.to_dict()}" if spec is not None else "")

    try:
        args = _driver_args(params, address)
        encoded = driver.call(cu.cuTensorMapEncodeTiled, *args)
    except CudaError as exc:
        raise CudaError(exc.call, exc.code, exc.name, exc.description, every_argument()) from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise CudaError("cuTensorMapEncodeTiled", -1, "REFUSED_BY_CUDA_PYTHON", str(exc), every_argument()) from None
    return TensorMap(encoded, params, address, spec=spec, keepalive=keepalive)


class TensorMap:
    """An encoded tiled tensor map: 128 bytes in a 128-byte-aligned host buffer this object owns.

    Passed to `Kernel.launch` it goes by value (``__drvtma_param__``). Holds the global buffer it was encoded for.
    """

    def __init__(self, encoded, params: TmaParams, address: int, *, spec: TensorMapSpec | None = None,
                 keepalive=None):
        from cuda.bindings import driver as cu

        # Python objects (cuda-python's CUtensorMap included) may sit at 16-byte alignment; TMA maps want 64/128.
        self._storage = np.zeros(TENSOR_MAP_BYTES + 127, dtype=np.uint8)
        start = (-self._storage.ctypes.data) % 128
        self._bytes = self._storage[start:start + TENSOR_MAP_BYTES]
        ctypes.memmove(self._bytes.ctypes.data, encoded.getPtr(), TENSOR_MAP_BYTES)
        self._handle = cu.CUtensorMap(_ptr=self._bytes.ctypes.data)  # a view of our bytes, for ReplaceAddress
        self.params, self.spec, self._address, self._keepalive = params, spec, int(address), keepalive

    @property
    def address(self) -> int:
        return self._address

    @property
    def host_address(self) -> int:
        return self._bytes.ctypes.data

    def to_bytes(self) -> bytes:
        return self._bytes.tobytes()

    def __drvtma_param__(self) -> tuple[int, int]:
        return self._bytes.ctypes.data, TENSOR_MAP_BYTES

    def replace_address(self, target) -> None:
        """Point the map at another global buffer or address (cuTensorMapReplaceAddress), checked first."""
        from cuda.bindings import driver as cu

        from . import driver

        spec = self.spec
        address, keepalive, available = _resolve_target(None, target)
        error = _address_error(address, self.params.interleave) or (spec and _bounds_error(spec, available))
        if error:
            raise error
        driver.context()
        driver.call(cu.cuTensorMapReplaceAddress, self._handle, address)
        self._address, self._keepalive = address, keepalive
        if spec is not None:
            self.spec = spec.replace(base_address=address)

    def describe(self) -> str:
        head = f"TensorMap at global 0x{self._address:x} (host copy 0x{self.host_address:x}, 128 B)"
        body = self.spec.describe() if self.spec is not None else f"  {self.params.describe()}"
        return f"{head}\n{body}"

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return f"TensorMap(0x{self._address:x}, {self.params.describe()})"

