"""Every tensor-map encode rule, as data: RULES holds each one's name, its quick test and the check that names
what broke with a fix (a TensorMapError). validate_all and encode's fast path both run this table."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

from ...errors import Rule, TensorMapError, broken_rules
from ..dtypes import TmaDtype
from ..geometry import (
    DRIVER_BOX_BYTES_LIMIT,
    DRIVER_RULES,
    MAX_BOX,
    MAX_DIM,
    MAX_ELEMENT_STRIDE,
    MAX_RANK,
    MAX_STRIDE_BYTES,
    SMEM_PER_BLOCK_OPTIN_SM90,
    SWIZZLE_SPAN_BYTES,
    Interleave,
    L2Promotion,
    MapGeometry,
    OobFill,
    Swizzle,
)
from ..target_rules import NEEDS_RULES, PACKED_BOX_RULE, PACKED_LAYOUT_RULE, TARGET_RULE

if TYPE_CHECKING:
    from .spec import TensorMapSpec


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _axis(spec: TensorMapSpec, i: int) -> str:
    """A readable name for NumPy axis i: 'axis 0 (rows)' style for the common ranks."""
    names = {2: ("rows", "columns"), 3: ("planes", "rows", "columns")}.get(spec.rank)
    return f"axis {i} ({names[i]})" if names else f"axis {i}"


def _elements(nbytes: int, dt: TmaDtype) -> str:
    if dt.bits:  # a packed type counts values of `bits` bits
        return f"{nbytes * 8 // dt.bits} values" if nbytes * 8 % dt.bits == 0 else f"{nbytes} B"
    return f"{nbytes // dt.itemsize} {dt.name}" if nbytes % dt.itemsize == 0 else f"{nbytes} B"


def address_alignment(interleave, dtype: TmaDtype | None = None) -> int:
    """The alignment of global addresses and strides: 32 B for INTERLEAVE_32B maps and Blackwell's packed types
    (driver docs; unconfirmed on a GPU for the packed ones), else 16 B."""
    return 32 if interleave == Interleave.B32 or (dtype is not None and dtype.bits) else 16


def _why_32(interleave, dtype) -> str:
    return "" if address_alignment(interleave, dtype) == 16 else (
        " (INTERLEAVE_32B)" if interleave == Interleave.B32 else f" ({dtype.name})")


def address_error(address: int, interleave, dtype: TmaDtype | None = None) -> TensorMapError | None:
    align = address_alignment(interleave, dtype)
    if address % align == 0:
        return None
    why = _why_32(interleave, dtype)
    return TensorMapError("address_alignment", "base_address", hex(address),
                          f"start the tensor at a multiple of {align} B, e.g. 0x{round_up(address, align):x}",
                          f"the global address must be {align}-byte aligned{why}; it is {address % align} B past "
                          "a boundary")


def bounds_error(spec: MapGeometry, available: int | None) -> TensorMapError | None:
    """The tensor must fit the buffer it is encoded for (from the base address on)."""
    if available is None or spec.extent_bytes <= available:
        return None
    return TensorMapError("buffer_bounds", "shape", spec.shape,
                          f"use a buffer of at least {spec.extent_bytes} B from the base address",
                          f"the tensor spans {spec.extent_bytes} B but the buffer holds {available} B from the "
                          "base address")


# ---------------------------------------------------------------------------------------------- the rules
# Each rule is a pair: `_<rule>_holds(spec, smem_limit)`, the quick test (True exactly when the check yields nothing;
# encode runs these alone), and `_check_<rule>(spec, smem_limit)`, which names what broke and its fix. RULES below
# lists them in the order validate_all reports. The quick tests read enum members from module constants: a class
# attribute such as Interleave.NONE costs a lookup per read.
_NONE, _B16, _B32, _SWIZZLE_32B, _NAN = Interleave.NONE, Interleave.B16, Interleave.B32, Swizzle.B32, OobFill.NAN

def _rank_holds(spec, _limit=None) -> bool:
    rank = len(spec.shape)
    return 1 <= rank <= MAX_RANK and len(spec.strides_bytes) == len(spec.box) == len(spec.element_strides) == rank


def _check_rank(spec, _limit=None):
    if not 1 <= spec.rank <= MAX_RANK:
        yield TensorMapError("rank", "shape", spec.shape, "use 1 to 5 axes (merge contiguous axes, or split the "
                             "tensor into several maps)", f"rank {spec.rank} is outside 1..{MAX_RANK}")
    for name in ("strides_bytes", "box", "element_strides"):
        if len(getattr(spec, name)) != spec.rank:
            yield TensorMapError("rank_mismatch", name, getattr(spec, name),
                                 f"give one {name} entry per axis of shape {spec.shape}",
                                 f"{len(getattr(spec, name))} entries for a rank-{spec.rank} shape")


def _enums_holds(spec, _limit=None) -> bool:
    return (type(spec.interleave) is Interleave and type(spec.swizzle) is Swizzle
            and type(spec.l2_promotion) is L2Promotion and type(spec.oob_fill) is OobFill)


def _check_enums(spec, _limit=None):
    for name, enum in (("interleave", Interleave), ("l2_promotion", L2Promotion), ("oob_fill", OobFill)):
        v = getattr(spec, name)
        if not isinstance(v, enum):
            yield TensorMapError("enum", name, v, f"use one of {', '.join(f'{m.name}={int(m)}' for m in enum)}",
                                 f"{v} is not a {name} value")
    if not isinstance(spec.swizzle, Swizzle):
        yield TensorMapError("enum", "swizzle", spec.swizzle, "use NONE=0, B32=1, B64=2, B128=3 (or, on Blackwell, "
                             "B128_ATOM_32B=4, B128_ATOM_32B_FLIP_8B=5, B128_ATOM_64B=6)",
                             f"{spec.swizzle} is not a swizzle value")


def _address_holds(spec, _limit=None) -> bool:
    return spec.base_address is None or spec.base_address % address_alignment(spec.interleave, spec.dtype) == 0


def _check_address(spec, _limit=None):
    error = None if spec.base_address is None else address_error(spec.base_address, spec.interleave, spec.dtype)
    if error is not None:
        yield error


def _dims_holds(spec, _limit=None) -> bool:
    for n in spec.shape:  # a loop: cheaper than min() and max() for five values at most
        if n < 1 or n > MAX_DIM:
            return False
    return True


def _check_dims(spec, _limit=None):
    for i, n in enumerate(spec.shape):
        if not 1 <= n <= MAX_DIM:
            yield TensorMapError("dim_range", f"shape[{i}]", n, f"use 1..2^32 elements along {_axis(spec, i)}",
                                 f"{_axis(spec, i)} has {n} elements")


def _strides_holds(spec, _limit=None) -> bool:
    strides = spec.strides_bytes
    if strides[-1] != spec.dtype.itemsize:
        return False
    align = 32 if spec.interleave == _B32 or spec.dtype.bits else 16
    for s in strides[:-1]:
        if s < 0 or s >= MAX_STRIDE_BYTES or s % align:
            return False
    return True


def _check_strides(spec, _limit=None):
    dt, align = spec.dtype, address_alignment(spec.interleave, spec.dtype)
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
            why = _why_32(spec.interleave, dt)
            yield TensorMapError(
                "stride_alignment", f"strides_bytes[{i}]", s,
                f"pad {_axis(spec, i)} to {padded} B = {_elements(padded, dt)} per step",
                f"the stride of {_axis(spec, i)} is {s} B = {_elements(s, dt)}, not a multiple of {align} B{why}")


def _overlap_holds(spec, _limit=None) -> bool:
    shape, strides = spec.shape, spec.strides_bytes
    if spec.allow_overlap or strides[-1] != spec.dtype.itemsize:
        return True
    # Row-major (rows may be padded): each axis steps past everything inside it, so nothing overlaps. Another
    # order, or an empty axis: the check's own test, sorted by stride.
    step = strides[-1] * shape[-1] if not spec.dtype.bits else _byte_shape(spec)[-1]
    for i in range(len(shape) - 2, -1, -1):
        if strides[i] < step or step <= 0:
            return next(_check_overlap(spec), None) is None
        step = strides[i] * shape[i]
    return True


def _byte_shape(spec) -> tuple[int, ...]:
    """The shape with a packed type's innermost axis counted in bytes (its stride is 1)."""
    bits = spec.dtype.bits
    return spec.shape[:-1] + (-(-spec.shape[-1] * bits // 8),) if bits and spec.shape else spec.shape


def _check_overlap(spec, _limit=None):
    """Stride 0 and overlapping strides: accepted by the driver, refused here unless allow_overlap."""
    if spec.allow_overlap or spec.strides_bytes[-1] != spec.itemsize:
        return
    for i, s in enumerate(spec.strides_bytes[:-1]):
        if s == 0 and spec.shape[i] > 1:
            yield TensorMapError("stride_zero", f"strides_bytes[{i}]", 0,
                                 "pass allow_overlap=True to broadcast on purpose, else give the real stride",
                                 f"{_axis(spec, i)} has {spec.shape[i]} elements that all read the same bytes")
    # Sufficient test for non-overlap: sorted by stride, each axis steps past everything inside it.
    shape = _byte_shape(spec)
    axes = sorted((s, n, i) for i, (s, n) in enumerate(zip(spec.strides_bytes, shape)) if n > 1 and s > 0)
    for (s_in, n_in, i_in), (s_out, _, i_out) in zip(axes, axes[1:]):
        if s_out < s_in * n_in:
            yield TensorMapError(
                "strides_overlap", f"strides_bytes[{i_out}]", s_out,
                f"use a stride of at least {round_up(s_in * n_in, 16)} B for {_axis(spec, i_out)}, or pass "
                "allow_overlap=True for an overlapping view",
                f"{_axis(spec, i_out)} steps {s_out} B but {_axis(spec, i_in)} spans {s_in * n_in} B: "
                "elements share bytes")
            return


def _box_holds(spec, _limit=None) -> bool:
    for b in spec.box:
        if b < 1 or b > MAX_BOX:
            return False
    for e in spec.element_strides:
        if e < 1 or e > MAX_ELEMENT_STRIDE:
            return False
    return spec.dtype.bits != 0 or spec.box[-1] * spec.dtype.itemsize % 16 == 0  # packed: packed_box's rule


def _check_box(spec, _limit=None):
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
    # Documented for INTERLEAVE_NONE; the driver refuses interleaved maps' short inner rows too (docs/tensormap.md,
    # "Seen on the H200"), so drvtma checks it for every interleave.
    if 1 <= spec.box[-1] <= MAX_BOX and inner % 16 and not dt.bits:
        unit = 16 // math.gcd(16, dt.itemsize)
        lo, hi = spec.box[-1] // unit * unit, round_up(spec.box[-1], unit)
        choices = " or ".join(str(v) for v in (lo, hi) if 1 <= v <= MAX_BOX)
        yield TensorMapError("box_inner_bytes", f"box[{spec.rank - 1}]", spec.box[-1],
                             f"use box[{spec.rank - 1}] = {choices} (a multiple of {unit} {dt.name})",
                             f"the innermost box row is {inner} B, not a multiple of 16 B")


def _interleave_holds(spec, _limit=None) -> bool:
    il = spec.interleave
    if il == _NONE:
        return True
    return not ((il == _B16 or il == _B32) and len(spec.shape) < 3) and not (
        il == _B32 and spec.swizzle != _SWIZZLE_32B and isinstance(spec.swizzle, Swizzle)
        and not spec.allow_undocumented)


def _check_interleave(spec, _limit=None):
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


def _swizzle_holds(spec, _limit=None) -> bool:
    if spec.interleave != _NONE:
        return True
    span = SWIZZLE_SPAN_BYTES.get(spec.swizzle, 0)
    return not span or spec.box[-1] * spec.dtype.itemsize <= span


def _check_swizzle(spec, _limit=None):
    span = spec.swizzle_span_bytes
    inner = spec.box[-1] * spec.itemsize
    if spec.interleave == Interleave.NONE and span and inner > span:
        most = span // spec.itemsize
        yield TensorMapError("swizzle_span", f"box[{spec.rank - 1}]", spec.box[-1],
                             f"use box[{spec.rank - 1}] <= {most} {spec.dtype.name} with SWIZZLE_{span}B, or a "
                             "wider swizzle, and load a row with several boxes",
                             f"the innermost box row is {inner} B, wider than the {span} B swizzle span")


def _fill_holds(spec, _limit=None) -> bool:
    return spec.oob_fill != _NAN or spec.dtype.is_float


def _check_fill(spec, _limit=None):
    if spec.oob_fill == OobFill.NAN and not spec.dtype.is_float:
        yield TensorMapError("nan_fill_type", "oob_fill", "NAN", "use oob_fill='zero', or a floating dtype",
                             f"NaN fill needs a floating type; {spec.dtype.name} is not one")


def driver_box_bytes(spec) -> int:
    """The box size the driver limits: loaded elements in every dimension (dim 0's element stride counted too,
    although a load ignores it), times the element size, without swizzle padding."""
    return math.prod(-(-b // e) for b, e in zip(spec.box, spec.element_strides)) * spec.itemsize


def _smem_holds(spec, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> bool:
    """driver_box_bytes and spec.smem_bytes in one pass (the rows of every axis but the innermost, counted once)."""
    box, es = spec.box, spec.element_strides
    rows, last = 1, len(box) - 1
    for i in range(last):
        rows *= -(-box[i] // es[i])
    itemsize = spec.dtype.itemsize
    if rows * -(-box[last] // es[last]) * itemsize > DRIVER_BOX_BYTES_LIMIT:
        return False
    inner, span = box[last] * itemsize, SWIZZLE_SPAN_BYTES.get(spec.swizzle, 0)
    return rows * (inner if inner > span else span) <= smem_limit


def _check_smem(spec, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90):
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


_ENUMS = frozenset({"enum"}) | NEEDS_RULES

# Every encode rule, in the order validate_all reports them. scope: what a rule reads, so encode can remember the
# form and box rules per box and skip the address: "form" (the rank, the enums; checked first, every later quick test
# assumes them), "address", "layout" (shape, strides, allow_overlap), "box" (nothing but the box, element strides,
# type, rank, enums, allow_undocumented and the shared-memory limit: encode's key of remembered boxes).
RULES = (
    Rule(("rank", "rank_mismatch"), _rank_holds, _check_rank, "form", stop=True),
    Rule(("enum",), _enums_holds, _check_enums, "form"),
    TARGET_RULE,
    Rule(("address_alignment",), _address_holds, _check_address, "address"),
    Rule(("dim_range",), _dims_holds, _check_dims, "layout"),
    Rule(("inner_stride", "stride_range", "stride_alignment"), _strides_holds, _check_strides, "layout"),
    Rule(("stride_zero", "strides_overlap"), _overlap_holds, _check_overlap, "layout"),
    PACKED_LAYOUT_RULE,
    Rule(("box_range", "element_stride_range", "box_inner_bytes"), _box_holds, _check_box, "box"),
    Rule(("interleave_rank", "interleave_swizzle"), _interleave_holds, _check_interleave, "box"),
    Rule(("swizzle_span",), _swizzle_holds, _check_swizzle, "box", after=_ENUMS),
    Rule(("nan_fill_type",), _fill_holds, _check_fill, "box"),
    PACKED_BOX_RULE,
    Rule(("box_bytes", "smem_budget"), _smem_holds, _check_smem, "box",
         after=_ENUMS | {"box_range", "element_stride_range"}),
)


def validate_all(spec: TensorMapSpec, *, smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> list[TensorMapError]:
    """Every broken rule, in a fixed order (RULES). Checks that depend on a broken one (shapes of arrays, enums)
    skip.

    A smaller ``smem_limit`` checks a budget of your own; a larger one only leaves the refusal to the driver.
    """
    return cast(list[TensorMapError], broken_rules(RULES, spec, smem_limit))  # RULES yield TensorMapErrors


def driver_should_accept(errors: list[TensorMapError]) -> bool:
    """True when no broken rule is one the driver enforces (drvtma's own rules leave the driver willing)."""
    return not any(e.rule in DRIVER_RULES for e in errors)


# ---------------------------------------------------------------------------------------------- description

def describe_spec(spec: TensorMapSpec) -> str:
    assert spec.element_strides is not None  # __post_init__ fills it
    dt = spec.dtype
    size = f"{dt.bits}-bit values, {dt.smem_bits} bits each in shared memory" if dt.bits else f"{dt.itemsize} B"
    kind = f"tensor-map type {dt.enum}"
    if dt.is_view:  # int8 / int16: say which map carries them and that nothing reads the sign
        kind += (f" = {dt.map_type.name.upper()}: loads and stores copy the bytes unchanged, TMA does not interpret "
                 f"the sign; values read as {dt.values}")
    lines = [f"TensorMapSpec {dt.name} ({kind}, {size}), NumPy order (outermost first):",
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
    if spec.target is not None:
        lines.append(f"  target {spec.target}")
    if spec.allow_overlap or spec.allow_undocumented:
        lines.append(f"  allowed: {'overlap ' if spec.allow_overlap else ''}"
                     f"{'undocumented' if spec.allow_undocumented else ''}".rstrip())
    return "\n".join(lines)
