"""Generators of tensor-map specs and coordinates: hypothesis strategies for tests, seeded NumPy for GPU fuzzing.

Each generator is written once against a small `Chooser` (integer, choice), driven either by hypothesis' `draw`
(shrinkable) or by a NumPy Generator (fast, for thousands of GPU cases). Valid specs are valid by construction;
invalid ones break exactly one named rule, chosen first, so the validator is never used to filter its own input.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentError, as_int
from ..tma.dtypes import ALL_DTYPES, FLOAT_DTYPES, UINT8, UINT16, UINT32, UINT64, TmaDtype, tma_dtype
from ..tma.tiled.rules import address_alignment
from ..tma.tiled.spec import (
    ALL_RULES,
    MAX_BOX,
    MAX_STRIDE_BYTES,
    SM90_SWIZZLES,
    SMEM_PER_BLOCK_OPTIN_SM90,
    SWIZZLE_SPAN_BYTES,
    Interleave,
    L2Promotion,
    OobFill,
    Swizzle,
    TensorMapSpec,
)
from .optional import hypothesis

ADDRESS_BASE = 0x7F00_0000_0000  # CPU specs get plausible device addresses above this
_SAME_SIZE_INT = {1: UINT8, 2: UINT16, 4: UINT32, 8: UINT64}


# ---------------------------------------------------------------------------------------------- choosers

class RngChooser:
    """Chooser backed by a seeded NumPy Generator."""

    def __init__(self, rng: np.random.Generator):
        if not isinstance(rng, np.random.Generator):
            raise ArgumentError("chooser", "rng", type(rng).__name__, "give np.random.default_rng(seed)")
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(*_bounds(lo, hi)))

    def choice(self, options):
        options = list(options)
        return options[int(self.rng.integers(0, len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)


class DrawChooser:
    """Chooser backed by hypothesis' draw (so examples shrink towards small integers and early options)."""

    def __init__(self, draw):
        self.draw, self.st = draw, hypothesis("DrawChooser", "hypothesis.strategies")

    def integer(self, lo: int, hi: int) -> int:
        lo, hi = _bounds(lo, hi)
        return self.draw(self.st.integers(lo, hi - 1))

    def choice(self, options):
        return self.draw(self.st.sampled_from(list(options)))

    def chance(self, p: float) -> bool:
        # Shrinks towards False (a draw of 0 is False unless p = 1); p only sets the odds, in hundredths.
        return self.draw(self.st.integers(0, 99)) >= 100 - int(p * 100)


def _bounds(lo, hi) -> tuple[int, int]:
    """(lo, hi + 1) of an inclusive integer range, refused by name when it is empty or not of ints."""
    lo, hi = as_int(lo, "lo", rule="chooser"), as_int(hi, "hi", rule="chooser")
    if hi < lo:
        raise ArgumentError("chooser", "lo, hi", (lo, hi), "give lo <= hi (an inclusive range)", "the range is empty")
    return lo, hi + 1


def _check_valid_options(dtypes, max_rank, max_dim, max_smem_bytes, max_extent_bytes) -> tuple[TmaDtype, ...]:
    """build_valid_spec's options, refused by name before anything is drawn."""
    if isinstance(dtypes, (str, TmaDtype)) or not hasattr(dtypes, "__iter__"):
        raise ArgumentError("spec_options", "dtypes", dtypes, "give a sequence of dtypes, e.g. ('float16',)")
    dtypes = tuple(tma_dtype(d) for d in dtypes)
    if not dtypes:
        raise ArgumentError("spec_options", "dtypes", dtypes, "give at least one dtype")
    as_int(max_rank, "max_rank", rule="spec_options", lo=1, hi=5)
    as_int(max_dim, "max_dim", rule="spec_options", lo=1, hi=1 << 20)
    as_int(max_smem_bytes, "max_smem_bytes", rule="spec_options", lo=16)
    if max_extent_bytes is not None:
        as_int(max_extent_bytes, "max_extent_bytes", rule="spec_options", lo=16)
    return dtypes


# ---------------------------------------------------------------------------------------------- valid specs

def build_valid_spec(ch, *, dtypes=ALL_DTYPES, max_rank: int = 5, max_dim: int = 300, huge_dims: bool = True,
                     interleave: bool = True, max_smem_bytes: int = SMEM_PER_BLOCK_OPTIN_SM90,
                     max_extent_bytes: int | None = None, address: bool = True) -> TensorMapSpec:
    """A spec every rule accepts, built by construction.

    ``max_extent_bytes`` bounds the bytes the tensor spans (GPU fuzzing: it must fit a real buffer);
    ``huge_dims`` lets the outermost axis (by stride) reach 2^32 elements when no extent bound is given.
    """
    dtypes = _check_valid_options(dtypes, max_rank, max_dim, max_smem_bytes, max_extent_bytes)
    dt: TmaDtype = ch.choice(dtypes)
    s = dt.itemsize
    rank = ch.integer(1, max_rank)
    il = Interleave.NONE
    if interleave and rank >= 3 and ch.chance(0.25):
        il = ch.choice([Interleave.B16, Interleave.B32])
    align = address_alignment(il)
    if il == Interleave.B32:
        swizzle = Swizzle.B32
    else:
        swizzle = ch.choice(SM90_SWIZZLES)
    span = SWIZZLE_SPAN_BYTES[swizzle]
    unit = 16 // s  # elements per 16 bytes (s <= 8)
    if il == Interleave.NONE:
        most = (span if span else MAX_BOX * s) // 16  # 16-byte units in the inner box row
        most = max(1, min(most, MAX_BOX // unit, max_smem_bytes // 16))
        inner_box = unit * ch.integer(1, most)
    else:
        inner_box = unit * ch.choice([1, 2])  # the interleave chunk: 16 or 32 bytes
    pitch = max(inner_box * s, span)

    element_strides = [ch.integer(1, 8) for _ in range(rank)]
    box = [0] * rank
    box[-1] = inner_box
    rows_left = max(1, max_smem_bytes // pitch)
    for axis in range(rank - 1):
        e = element_strides[axis]
        n = ch.integer(1, max(1, min(-(-MAX_BOX // e), rows_left)))
        rows_left = max(1, rows_left // n)
        box[axis] = ch.integer((n - 1) * e + 1, min(n * e, MAX_BOX))

    # Shapes, then strides nested in a random order of the outer axes (a permuted, non-overlapping view).
    shape = [ch.integer(1, max_dim) for _ in range(rank)]
    for axis in range(rank):  # a box exactly the tensor's extent: a class of its own (drvtma.fuzz.coverage)
        if ch.chance(0.15) and box[axis] <= max_dim:
            shape[axis] = box[axis]
    order = list(range(rank - 1))
    if rank > 2 and ch.chance(0.3):
        order = _shuffled(ch, order)
    order = order[::-1]  # innermost-first nesting: the last outer axis of `order` sits closest to the row
    strides = [0] * rank
    strides[-1] = s
    step, previous = shape[-1] * s, 0
    for k, axis in enumerate(order):
        outermost = k == len(order) - 1
        if outermost and huge_dims and max_extent_bytes is None and ch.chance(0.1):
            shape[axis] = ch.integer(1, 1 << 32)
        stride = -(-step // align) * align + align * ch.choice([0, 0, 1, 2])
        # Strictly increasing strides (even past extent-1 axes) keep "the outermost axis" unambiguous.
        stride = max(stride, previous + align)
        strides[axis] = previous = stride
        step = stride * shape[axis]
    if max_extent_bytes is not None:
        _shrink_to_extent(shape, strides, order, max_extent_bytes, s, align)
    if max(strides[:-1], default=0) >= MAX_STRIDE_BYTES:
        raise AssertionError("stride construction overflowed")  # cannot happen with max_dim <= 2^20

    fill = OobFill.NAN if dt in FLOAT_DTYPES and ch.chance(0.4) else OobFill.ZERO
    base = None
    if address:
        base = ADDRESS_BASE + align * ch.integer(0, 4096)
    return TensorMapSpec(dt, tuple(shape), tuple(strides), tuple(box), tuple(element_strides), il, swizzle,
                         ch.choice(list(L2Promotion)), fill, base)


def _shuffled(ch, items):
    items, out = list(items), []
    while items:
        out.append(items.pop(ch.integer(0, len(items) - 1)))
    return out


def _shrink_to_extent(shape, strides, order, limit, s, align):
    """Halve the outermost axes until the tensor spans at most `limit` bytes (rebuilding nested strides)."""
    def extent():
        return sum((n - 1) * st for n, st in zip(shape, strides)) + s

    while extent() > limit:
        biggest = max(range(len(shape)), key=lambda a: (shape[a] - 1) * strides[a])
        if shape[biggest] == 1:
            raise ValueError(f"cannot fit a tensor in {limit} B")
        shape[biggest] = max(1, shape[biggest] // 2)
        step = shape[-1] * s
        for axis in order:
            strides[axis] = max(strides[axis] // align * align, -(-step // align) * align)
            step = strides[axis] * shape[axis]


# ---------------------------------------------------------------------------------------------- invalid specs

def applicable_rules(spec: TensorMapSpec) -> list[str]:
    """Rules `break_rule` can break in this (valid) spec while keeping every other rule intact."""
    rules = [*_BLACKWELL_BREAKS, "rank", "rank_mismatch", "enum", "dim_range", "box_range", "element_stride_range"]
    if spec.base_address is not None:
        rules.append("address_alignment")
    rules.append("inner_stride")
    if spec.rank >= 2:
        rules += ["stride_alignment", "stride_range", "stride_zero", "strides_overlap"]
    if spec.interleave == Interleave.NONE:
        rules.append("box_inner_bytes")
        if spec.rank <= 2:
            rules.append("interleave_rank")
        if spec.box[-1] * spec.itemsize > 32:
            rules.append("swizzle_span")
    rules.append("nan_fill_type")
    if (spec.rank >= 3 and spec.base_address is not None and spec.base_address % 32 == 0
            and all(st % 32 == 0 for st in spec.strides_bytes[:-1])):
        rules.append("interleave_swizzle")
    if spec.rank >= 3 or (spec.rank == 2 and spec.itemsize >= 4):
        rules.append("box_bytes")
    if spec.rank >= 3 and spec.interleave == Interleave.NONE:
        rules.append("smem_budget")
    return rules


def break_rule(ch, spec: TensorMapSpec, rule: str) -> TensorMapSpec:
    """A copy of a valid `spec` that breaks `rule` and no other (see `applicable_rules`)."""
    if not isinstance(spec, TensorMapSpec):
        raise ArgumentError("spec_options", "spec", type(spec).__name__, "give a valid TensorMapSpec")
    assert spec.element_strides is not None  # __post_init__ fills it
    if rule not in ALL_RULES:
        raise ArgumentError("spec_options", "rule", rule, f"use one of {', '.join(sorted(ALL_RULES))}",
                            "not a tensor-map rule")
    r, s = spec.rank, spec.itemsize
    if rule == "rank":
        if ch.chance(0.5):
            return spec.replace(shape=(), strides_bytes=(), box=(), element_strides=())
        extra = 6 - r
        return spec.replace(shape=(1,) * extra + spec.shape, strides_bytes=(spec.extent_bytes + 16,) * extra
                            + spec.strides_bytes, box=(1,) * extra + spec.box,
                            element_strides=(1,) * extra + spec.element_strides)
    if rule == "rank_mismatch":
        field = ch.choice(["strides_bytes", "box", "element_strides"])
        values = getattr(spec, field)
        return spec.replace(**{field: values[:-1] if ch.chance(0.5) else values + (values[-1],)})
    if rule == "enum":
        field = ch.choice(["interleave", "l2_promotion", "oob_fill", "swizzle"])
        return spec.replace(**{field: {"interleave": 3, "l2_promotion": 4, "oob_fill": 2, "swizzle": 7}[field]})
    if rule in _BLACKWELL_BREAKS:  # a Blackwell map of its own (rank 1, 32-B aligned) that breaks just this rule
        shape, box, swizzle, target = _BLACKWELL_BREAKS[rule]
        dtype = "uint8" if rule == "needs_swizzle_atoms" else ch.choice(["16u4_align8b", "16u4_align16b",
                                                                           "16u6_align16b"])
        swizzle = ch.integer(4, 6) if swizzle is None else swizzle
        return TensorMapSpec.create(dtype, shape, box, swizzle=swizzle, target=target, base_address=ADDRESS_BASE)
    if rule == "address_alignment":
        align = address_alignment(spec.interleave)
        return spec.replace(base_address=spec.base_address + ch.choice([d for d in (1, 2, 4, 8, 16) if d < align]))
    if rule == "dim_range":
        if ch.chance(0.5):
            return spec.replace(shape=_set(spec.shape, ch.integer(0, r - 1), 0))
        return spec.replace(shape=_set(spec.shape, _outermost_axis(spec), (1 << 32) + ch.integer(1, 1000)))
    if rule == "box_range":
        axis = ch.integer(0, r - 1)
        if axis < r - 1 and spec.smem_bytes * 257 // max(spec.loaded_counts[axis], 1) <= SMEM_PER_BLOCK_OPTIN_SM90 \
                and ch.chance(0.5):
            return spec.replace(box=_set(spec.box, axis, 257), element_strides=_set(spec.element_strides, axis, 1))
        return spec.replace(box=_set(spec.box, axis, 0))
    if rule == "element_stride_range":
        axis = ch.integer(0, r - 1)
        return spec.replace(element_strides=_set(spec.element_strides, axis, ch.choice([0, 9, 16])))
    if rule == "inner_stride":
        return spec.replace(strides_bytes=_set(spec.strides_bytes, r - 1, s * ch.choice([2, 3])))
    align = address_alignment(spec.interleave)
    if rule == "stride_alignment":
        axis = _outermost_axis(spec)
        return spec.replace(strides_bytes=_set(spec.strides_bytes, axis,
                                               spec.strides_bytes[axis] + ch.choice([s, 8, align // 2])))
    if rule == "stride_range":
        return spec.replace(strides_bytes=_set(spec.strides_bytes, _outermost_axis(spec),
                                               MAX_STRIDE_BYTES + align * ch.integer(0, 4)))
    if rule == "stride_zero":
        axis = _outermost_axis(spec)
        return spec.replace(strides_bytes=_set(spec.strides_bytes, axis, 0),
                            shape=_set(spec.shape, axis, max(2, spec.shape[axis])))
    if rule == "strides_overlap":
        axis = _outermost_axis(spec)
        inner = max(spec.shape[-1], align // s + 1)  # the row spans more than one aligned step
        return spec.replace(strides_bytes=_set(spec.strides_bytes, axis, align),
                            shape=_set(_set(spec.shape, axis, max(2, spec.shape[axis])), r - 1, inner))
    if rule == "box_inner_bytes":  # box[-1] is a multiple of 16 // s >= 2 elements; step off it, downwards
        return spec.replace(box=_set(spec.box, r - 1, spec.box[-1] - ch.integer(1, 16 // s - 1)))
    if rule == "interleave_rank":
        return spec.replace(interleave=Interleave.B16)
    if rule == "swizzle_span":
        inner = spec.box[-1] * s
        return spec.replace(swizzle=ch.choice([sw for sw in SM90_SWIZZLES if 0 < SWIZZLE_SPAN_BYTES[sw] < inner]))
    if rule == "nan_fill_type":
        dt = spec.dtype if spec.dtype not in FLOAT_DTYPES else _SAME_SIZE_INT[s]
        return spec.replace(dtype=dt, oob_fill=OobFill.NAN)
    if rule == "interleave_swizzle":
        # Only swizzles whose span fits the current row pitch, so the footprint cannot grow past the budget.
        options = [sw for sw in (Swizzle.NONE, Swizzle.B64, Swizzle.B128)
                   if SWIZZLE_SPAN_BYTES[sw] <= spec.row_pitch_bytes]
        return spec.replace(interleave=Interleave.B32, swizzle=ch.choice(options))
    if rule == "box_bytes":
        return spec.replace(box=(MAX_BOX,) * r, element_strides=(1,) * r, swizzle=Swizzle.NONE,
                            interleave=Interleave.NONE)
    if rule == "smem_budget":  # 32 KiB of 16-byte rows, each padded to the 128-byte swizzle pitch: 256 KiB
        return spec.replace(box=(1,) * (r - 3) + (8, MAX_BOX, 16 // s), element_strides=(1,) * r,
                            swizzle=Swizzle.B128)
    raise ValueError(f"break_rule does not know rule {rule!r}")


# rule -> (shape, box, swizzle (None: one of Blackwell's atoms), target) of a map breaking only it
_BLACKWELL_BREAKS = {"needs_swizzle_atoms": ((256,), (128,), None, "sm_90a"),
                     "needs_subbyte_maps": ((256,), (128,), Swizzle.B128, "sm_90a"),
                     "packed_dim": ((320,), (128,), Swizzle.NONE, "sm_100a"),
                     "packed_box": ((256,), (64,), Swizzle.NONE, "sm_120a"),
                     "packed_swizzle": ((256,), (128,), Swizzle.B128_ATOM_64B, "sm_100a")}


def _set(values: tuple, index: int, value) -> tuple:
    out = list(values)
    out[index] = value
    return tuple(out)


def _outermost_axis(spec: TensorMapSpec) -> int:
    """The axis with the largest stride among the outer axes: changing it disturbs no other stride."""
    return max(range(spec.rank - 1), key=lambda a: (spec.strides_bytes[a], -a)) if spec.rank > 1 else 0


def build_invalid_spec(ch, **valid_options) -> tuple[TensorMapSpec, str]:
    """(spec, rule): a spec that breaks exactly that one rule."""
    spec = build_valid_spec(ch, **valid_options)
    rule = ch.choice(applicable_rules(spec))
    return break_rule(ch, spec, rule), rule


def build_any_spec(ch, **valid_options) -> TensorMapSpec:
    """Valid, singly broken or doubly broken specs (the validator-vs-driver agreement fuzz)."""
    spec = build_valid_spec(ch, **valid_options)
    for _ in range(ch.choice([0, 1, 1, 2])):
        if spec.rank < 1 or len(spec.box) != spec.rank or len(spec.strides_bytes) != spec.rank:
            break
        try:
            spec = break_rule(ch, spec, ch.choice(applicable_rules(spec)))
        except (ValueError, IndexError):  # a second break may not apply to an already broken spec
            break
    return spec


# ---------------------------------------------------------------------------------------------- coordinates

def build_coordinates(ch, spec: TensorMapSpec, *, outside: bool = True) -> tuple[int, ...]:
    """Load coordinates (NumPy order) that the hardware takes: innermost aligned to 16 B. Mostly near the tensor
    (partly out of bounds, negative), sometimes entirely outside."""
    return coordinate_builder(spec, outside=outside)(ch)


def coordinate_builder(spec: TensorMapSpec, *, outside: bool = True):
    """`build_coordinates` for one spec as a function of the chooser, its per-axis ranges worked out once."""
    if not isinstance(spec, TensorMapSpec):
        raise ArgumentError("spec_options", "spec", type(spec).__name__, "give a TensorMapSpec")
    assert spec.element_strides is not None  # __post_init__ fills it
    unit = 16 // math.gcd(16, spec.itemsize)
    last = spec.rank - 1
    axes = []
    for axis, (n, b) in enumerate(zip(spec.shape, spec.box)):
        reach = b * spec.element_strides[axis] if axis < last else b
        axes.append((-reach - 2, min(n, 1 << 20) + 2, reach, min(n, 1 << 30), unit if axis == last else 1))

    def draw(ch) -> tuple[int, ...]:
        coords = []
        for lo, hi, reach, far, step in axes:
            if outside and ch.chance(0.05):
                c = ch.choice([-reach - ch.integer(0, 1000), far + ch.integer(0, 1000), -(1 << 31) + 256,
                               (1 << 31) - 1024])
            else:
                c = ch.integer(lo, hi)
            coords.append(int(c) // step * step)
        return tuple(coords)

    return draw


def build_misaligned_coordinates(ch, spec: TensorMapSpec) -> tuple[int, ...]:
    """Coordinates whose innermost value times the element size is not a multiple of 16 (a hardware fault)."""
    unit = 16 // math.gcd(16, spec.itemsize)
    if unit == 1:
        raise ValueError(f"every innermost coordinate is aligned for {spec.dtype.name}")
    coords = list(build_coordinates(ch, spec))
    coords[-1] += ch.integer(1, unit - 1)
    return tuple(coords)


# ---------------------------------------------------------------------------------------------- special values

_SPECIAL_BITS = {
    2: [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0x3C01, 0x7BFF, 0x7C00, 0xFC00, 0x7C01, 0x7E00,
        0x7FFF, 0xFE00, 0xFFFF, 0x007F, 0x0080, 0x7F7F, 0x7F80, 0xFF80, 0x7F81, 0x7FC0, 0x7FF7],
    4: [0x00000000, 0x80000000, 0x007FF000, 0x007FFFFF, 0x807FFFFF, 0x00800FFF, 0x00801000, 0x3FFFEFFF,
        0x3FFFF000, 0x7F7FEFFF, 0x7F7FF000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001,
        0xFF800001, 0x7F801000, 0x7FBFFFFF, 0x7FC00000, 0xFFC01234, 0x7FFFE000, 0x7FF77FF7, 0xFFFFFFFF]
    + [high | low for high in (0x3F800000, 0xBF800000, 0x7F000000, 0x00000000, 0x80000000)
       for low in (0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x2FFF, 0x3000, 0x3001)],
    8: [0x0, 0x8000000000000000, 0x1, 0x8000000000000001, 0x000FFFFFFFFFFFFF, 0x0010000000000000,
        0x3FF0000000000001, 0x3FF0000000001000, 0x3FF0000010000000, 0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000,
        0xFFF0000000000000, 0x7FF0000000000001, 0x7FF7FFFFFFFFFFFF, 0x7FF8000000000000, 0xFFF8000000001234],
}


def special_float_bits(dtype, *, random_words: int = 32, seed: int = 5) -> np.ndarray:
    """Raw bits a load could change, for a float type of that size: rounding ties (even and odd kept bits),
    carries into the exponent, overflow to infinity, NaN payloads and signs, infinities, denormals, zeros;
    then `random_words` seeded random ones. Unsigned ints of the type's size."""
    dt = tma_dtype(dtype)
    if not dt.is_float:
        raise ArgumentError("spec_options", "dtype", dt.name, "give a floating type (float16, bfloat16, float32, "
                            "tfloat32, float64, ...)", "special float values exist for floating types only")
    random_words = as_int(random_words, "random_words", rule="spec_options", lo=0)
    carrier = np.dtype(f"u{dt.itemsize}")
    fixed = np.array(_SPECIAL_BITS[dt.itemsize], dtype=carrier)
    rng = np.random.default_rng(seed)
    return np.concatenate([fixed, rng.integers(0, 256, random_words * dt.itemsize, dtype=np.uint8).view(carrier)])


# ---------------------------------------------------------------------------------------------- strategies

def _composite(fn, what: str):
    return hypothesis(f"drvtma.testing.{what}", "hypothesis.strategies").composite(fn)


def valid_specs(**options):
    """Hypothesis strategy of valid TensorMapSpecs (options as `build_valid_spec`)."""
    return _composite(lambda draw: build_valid_spec(DrawChooser(draw), **options), "valid_specs")()


def invalid_specs(**options):
    """Hypothesis strategy of (spec, rule) with exactly that one rule broken."""
    return _composite(lambda draw: build_invalid_spec(DrawChooser(draw), **options), "invalid_specs")()


def load_cases(max_boxes: int = 8, **options):
    """Hypothesis strategy of (spec, [coordinates...]) for oracle properties."""
    def build(draw):
        ch = DrawChooser(draw)
        spec = build_valid_spec(ch, **{"interleave": False, **options})
        n = ch.integer(1, max_boxes)
        return spec, [build_coordinates(ch, spec) for _ in range(n)]
    return _composite(build, "load_cases")()
