"""The coverage model of tiled loads (`loads`, `kernel-loads`): enum values per rank, each axis' fields, where each
box meets each axis, and every pair of enum values.

The universe is derived, not listed: an enum class is in it when a canonical spec with that value passes the rule
table (`validate_all`, the target's rules: sm_90a unless the options' spec names another), and it is refused
(with the rule) when the rules accept it but the load oracle does not (an interleaved load: `oracle_interleave`).
"""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np

from ...errors import RuleError
from ...testing.strategies import ADDRESS_BASE
from ...tma.dtypes import ALL_DTYPES, PACKED_DTYPES
from ...tma.tiled import oracle
from ...tma.tiled.rules import validate_all
from ...tma.tiled.spec import MAX_RANK, Interleave, L2Promotion, OobFill, Swizzle, TensorMapSpec
from .core import (
    AXIS_FIELDS,
    CoverageModel,
    Universe,
    boundaries,
    case_pairs,
    completions,
    count_names,
    element_stride_class,
    extent_class,
    feasible_by,
    name,
    pairwise,
    sign_class,
)

RANKS = tuple(range(1, MAX_RANK + 1))
ENUMS = {"dtype": tuple(d.name for d in (*ALL_DTYPES, *PACKED_DTYPES)),
         "swizzle": tuple(s.name for s in Swizzle), "l2": tuple(p.name for p in L2Promotion),
         "fill": tuple(f.name for f in OobFill), "interleave": tuple(i.name for i in Interleave)}


def canonical_spec(values: dict) -> TensorMapSpec:
    """A small spec with the given enum values (and rank): a 16-byte inner box row, each outer box 2 of 4."""
    rank = values.get("rank", 3)
    il = Interleave[values.get("interleave", "NONE")]
    spec = TensorMapSpec.create(values.get("dtype", "uint8"), (4,) * (rank - 1) + (64,), (2,) * (rank - 1) + (1,),
                                swizzle=Swizzle[values.get("swizzle", "NONE")], interleave=il,
                                l2_promotion=L2Promotion[values.get("l2", "NONE")],
                                oob_fill=OobFill[values.get("fill", "ZERO")], base_address=ADDRESS_BASE)
    inner = max(1, 16 * 8 // (spec.dtype.smem_bits or 8 * spec.itemsize))  # 16 B of the type, packed ones too
    return spec.replace(box=spec.box[:-1] + (inner,))


def _rules_broken(values: dict) -> list[str]:
    try:
        spec = canonical_spec(values)
    except RuleError as exc:  # TensorMapError: the rule the spec cannot even be built under
        return [exc.rule]
    return [e.rule for e in validate_all(spec)]


def _oracle_refuses(values: dict) -> str | None:
    try:
        oracle._check_oracle_spec(canonical_spec(values), 0)
        oracle.swizzle_addresses(0, Swizzle[values.get("swizzle", "NONE")])
    except RuleError as exc:  # TensorMapError: the oracle's rule
        return exc.rule
    return None


def _domains(rank: int | None) -> dict:
    return {**({"rank": (rank,)} if rank else {"rank": RANKS}), **ENUMS}


@functools.lru_cache(maxsize=None)
def tiled_universe(loads: bool = True) -> Universe:
    """Every class of a tiled load (`loads`) or of a tiled map the validator judges (`loads=False`: no oracle)."""
    classes, refused = [], {}

    def judge(label: str, values: dict) -> None:
        broken = feasible_by(_rules_broken, _domains(values.get("rank")), values)
        if broken is not None:
            refused[label] = broken
            return
        why = _oracle_refuses(_complete(values)) if loads else None
        (refused.__setitem__(label, why) if why else classes.append(label))

    for rank in RANKS:
        for field, values in ENUMS.items():
            for v in values:
                judge(name(rank=rank, **{field: v}), {"rank": rank, field: v})
        if loads:
            for axis in range(rank):
                for field, values in AXIS_FIELDS.items():
                    if field == "stride" and axis == rank - 1:
                        continue  # the innermost stride is the element size
                    classes += [name(rank=rank, axis=axis, **{field: v}) for v in values]
    usable = {k: [v for v in vals if name(**{k: v}) not in _unusable(refused, k)] for k, vals in ENUMS.items()}
    for label in pairwise(usable, lambda pair: _pair_ok(pair, loads)):
        classes.append(label)
    return Universe(tuple(classes), refused)


def _unusable(refused: dict, field: str) -> set:
    """Enum values refused at every rank: no pair with them is expected either."""
    out = set()
    for v in ENUMS[field]:
        if all(name(rank=r, **{field: v}) in refused for r in RANKS):
            out.add(name(**{field: v}))
    return out


def _complete(values: dict) -> dict:
    """`values` completed with the first free enum values the rules accept (the canonical instance of a class)."""
    for full in completions(_domains(values.get("rank")), values):
        if not _rules_broken(full):
            return full
    return values


def _pair_ok(pair: dict, loads: bool) -> bool:
    if feasible_by(_rules_broken, _domains(None), pair) is not None:
        return False
    return not loads or _oracle_refuses(_complete(pair)) is None


def spec_classes(spec: TensorMapSpec) -> list[str]:
    """The spec-level classes of one map: its enum values at its rank, and every pair of them (the type is the
    driver's: an int8 view counts as the UINT8 map it is)."""
    values = {"dtype": spec.dtype.map_type.name, "swizzle": Swizzle(spec.swizzle).name,
              "l2": L2Promotion(spec.l2_promotion).name, "fill": OobFill(spec.oob_fill).name,
              "interleave": Interleave(spec.interleave).name}
    return [name(rank=spec.rank, **{k: v}) for k, v in values.items()] + case_pairs(values)


def axis_classes(spec: TensorMapSpec) -> list[str]:
    """Each axis' element stride, box against extent and stride (tight: the least 16-byte multiple that holds the
    next inner axis)."""
    assert spec.element_strides is not None  # __post_init__ fills it
    out, r = [], spec.rank
    order = sorted(range(r), key=lambda a: spec.strides_bytes[a])
    for axis in range(r):
        head = f"rank={r}|axis={axis}|"
        out.append(head + f"element_stride={element_stride_class(spec.element_strides[axis], spec.box[axis])}")
        box, n = spec.box[axis], spec.shape[axis]
        out.append(head + f"box={extent_class(box, n)}")
        if axis != r - 1:
            inner = order[order.index(axis) - 1]
            tight = -(-spec.strides_bytes[inner] * spec.shape[inner] // 16) * 16
            out.append(head + "stride=" + ("tight" if spec.strides_bytes[axis] <= tight else "padded"))
    return out


def box_classes(spec: TensorMapSpec, coords) -> Counter:
    """Per axis, for every box at `coords` (NumPy order): the sign of its coordinate and where it meets the axis."""
    c = np.asarray(coords, dtype=np.int64).reshape(-1, spec.rank)
    assert spec.element_strides is not None  # __post_init__ fills it
    counts: Counter[str] = Counter()
    loaded = spec.loaded_counts
    for axis in range(spec.rank):
        step = spec.element_strides[axis] if axis < spec.rank - 1 else 1
        first = c[:, axis]
        last = first + (loaded[axis] - 1) * step
        head = f"rank={spec.rank}|axis={axis}|"
        counts.update(count_names(head + "coordinate=", sign_class(first)))
        counts.update(count_names(head + "boundary=", boundaries(first, last, spec.shape[axis])))
    return counts


def load_classes(spec: TensorMapSpec, coords) -> Counter:
    """Every class of the loads model that loading `coords` (NumPy order) through `spec` falls into, with its count:
    pass it to `hypothesis_events` in a hypothesis test of your own kernel to see which classes it reaches."""
    counts = Counter(spec_classes(spec))
    counts.update(axis_classes(spec))
    counts.update(box_classes(spec, coords))
    return counts


def _reachable(spec: TensorMapSpec, axis: int, boundary: str) -> bool:
    """Whether a box of this map can meet `axis` as `boundary` (a box shorter than the axis never spans it, a
    longer one is never inside)."""
    assert spec.element_strides is not None  # __post_init__ fills it
    step = spec.element_strides[axis] if axis < spec.rank - 1 else 1
    reach = (spec.loaded_counts[axis] - 1) * step
    return {"spans": reach > spec.shape[axis], "inside": reach < spec.shape[axis]}.get(boundary, True)


def restricted(universe: Universe, refuses) -> Universe:
    """`universe` less the enum and pair classes whose canonical instance `refuses(spec)` (-> a rule name or None)
    turns down: a toolchain that cannot express them (they move to refused, with its rule)."""
    classes, refused = [], dict(universe.refused)
    for label in universe.classes:
        parts = dict(p.split("=", 1) for p in label.split("|") if "=" in p)
        values = {k: (int(v) if k == "rank" else v) for k, v in parts.items() if k not in ("axis", "box", "boundary")}
        spec = canonical_spec(_complete(values))
        # a box longer than its axis (box=larger, and boundary=spans: a box reaches past both ends only when it is
        # longer than the axis): the one axis field some toolchains refuse
        if parts.get("box") == "larger" or parts.get("boundary") == "spans":
            axis = int(parts["axis"])
            spec = spec.replace(box=spec.box[:axis] + (spec.shape[axis] + 1,) + spec.box[axis + 1:])
        if parts.get("element_stride") in ("divides", "not_divides"):  # a toolchain may have no element strides
            axis = int(parts["axis"])
            stride = 2 if parts["element_stride"] == "divides" else 3
            assert spec.element_strides is not None  # __post_init__ fills it
            spec = spec.replace(element_strides=spec.element_strides[:axis] + (stride,)
                                + spec.element_strides[axis + 1:])
        why = refuses(spec)
        (refused.__setitem__(label, why) if why else classes.append(label))
    return Universe(tuple(classes), refused)


class TiledLoadsCoverage(CoverageModel):
    """`loads` and `kernel-loads`: a case has ``spec`` and ``coords``. A campaign over the user's one map
    (options' ``spec``) is judged against that map's classes only: its enum values, its axes, every boundary."""

    def universe(self, options: dict) -> Universe:
        full = tiled_universe(True)
        user = (options or {}).get("spec")
        if not user:
            return full
        spec = TensorMapSpec.from_dict({k: v for k, v in user.items() if k != "base_address"})
        own = set(spec_classes(spec)) | set(axis_classes(spec))
        boxes = {f"rank={spec.rank}|axis={a}|{f}={v}" for a in range(spec.rank)
                 for f in ("coordinate", "boundary") for v in AXIS_FIELDS[f] if _reachable(spec, a, v)}
        return Universe(tuple(c for c in full.classes if c in own or c in boxes), {})

    def classes(self, case) -> Counter:
        return load_classes(case.spec, case.coords)
