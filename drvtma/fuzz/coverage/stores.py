"""The coverage model of the `stores` and `reductions` targets (and the kernel-stores / kernel-reductions ones).

Classes, per rank R (1..5):
- ``rank=R|dtype=D``, ``rank=R|swizzle=S``, ``rank=R|l2=L``, ``rank=R|op=O`` for every TmaDtype (packed ones
  included), Swizzle, L2Promotion and op of the target; with several ops also ``rank=R|op=O|dtype=D``;
- per axis a (0 = outermost, NumPy order): ``rank=R|axis=a|element_stride=1|divides|not_divides``,
  ``..|box=smaller|equal|larger`` (box against the extent), ``..|stride=tight|padded`` (outer axes),
  ``..|coordinate=negative|zero|positive`` and ``..|boundary=`` one of `core.BOUNDARIES` (first and last element
  the store writes on that axis against its extent);
- ``pair|dtype=D|swizzle=S`` etc.: every two enum fields (op only when the target has several).
Whether a class is possible is decided by building a canonical StoreCase for it and running `check_case` (the tiled
rules, `check_store_spec`, `check_reduction`, `check_store_coordinates`): a refused class is listed with the rule.
Stores of a type outside `STORE_DTYPES` (tf32 and fp32_ftz may convert on the way out) are refused by
`check_store_spec`'s rule ``store_dtype``.
"""

from __future__ import annotations

import functools
import itertools
import json
import warnings
from collections.abc import Sequence
from typing import Any

from ...errors import StoreStraddleWarning, TensorMapError
from ...tma.dtypes import ALL_DTYPES, PACKED_DTYPES
from ...tma.stores import rules as S
from ...tma.stores.cases import StoreCase, check_case
from ...tma.targets import spec_target
from ...tma.tiled.rules import validate_all
from ...tma.tiled.spec import L2Promotion, Swizzle, TensorMapSpec
from . import tiled
from .core import (
    AXIS_FIELDS,
    CoverageModel,
    Universe,
    boundaries,
    case_pairs,
    element_stride_class,
    extent_class,
    feasible_by,
    name,
    pairwise,
)

NOT_MODELLED = "store_dtype"  # check_store_spec's rule for a store type the oracle leaves out (STORE_DTYPES)


def enum_label(member) -> str:
    """A Swizzle or L2Promotion member's name (B128, NONE), as the tiled model names them."""
    return getattr(member, "name", str(member))


def axis_classes(case: StoreCase) -> list[tuple[int, str, str]]:
    """(axis, field, value) of every per-axis class `case` falls into."""
    spec, coords = case.spec, case.coords
    assert spec.element_strides is not None  # __post_init__ fills it
    rank, shape, box, es = spec.rank, spec.shape, spec.box, spec.element_strides
    # the last element written on each axis: the inner axis ignores its element stride
    last = [c + (-(-b // e) - 1) * e for c, b, e in zip(coords, box, es)]
    last[-1] = coords[-1] + box[-1] - 1
    where = boundaries(coords, last, shape)  # one call for every axis: a campaign classifies every case
    out = []
    for a in range(rank):
        n, b, c = shape[a], box[a], coords[a]
        out += [(a, "element_stride", element_stride_class(es[a], b)), (a, "box", extent_class(b, n))]
        if a < rank - 1:
            tight = spec.strides_bytes[a] == shape[a + 1] * spec.strides_bytes[a + 1]
            out.append((a, "stride", "tight" if tight else "padded"))
        out += [(a, "coordinate", "negative" if c < 0 else ("zero" if c == 0 else "positive")),
                (a, "boundary", where[a])]
    return out


def enum_values(case: StoreCase, with_op: bool) -> dict:
    spec = case.spec
    values = {"dtype": spec.dtype.map_type.name, "swizzle": enum_label(spec.swizzle), "l2": enum_label(spec.l2_promotion)}
    return {**values, "op": case.op} if with_op else values


def broken(case: StoreCase) -> list[str]:
    """The rules `case` breaks (the first one check_case raises), or the pseudo-rule of an unmodelled store type."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreStraddleWarning)
            check_case(case)
    except TensorMapError as error:
        return [error.rule]
    if case.op == S.STORE and case.spec.dtype not in S.STORE_DTYPES:
        return [NOT_MODELLED]
    return []


# ---------------------------------------------------------------------------------------------- canonical cases

def canonical_spec(rank: int, dtype, swizzle=Swizzle.NONE, l2=L2Promotion.NONE) -> TensorMapSpec:
    """The smallest map of a rank and enum values the rules could take: one 16-byte chunk per row (a packed type:
    its 128-value row), two rows per outer axis."""
    inner = 128 if dtype.bits else 16 // dtype.itemsize
    return TensorMapSpec.create(dtype, (2,) * (rank - 1) + (inner,), (1,) * (rank - 1) + (inner,), swizzle=swizzle,
                                l2_promotion=l2)


def geometry_case(base: StoreCase, axis: int, n: int, b: int, e: int = 1, c: int = 0,
                  pad: int = 0) -> StoreCase:
    """`base` with axis `axis` of extent n, box b, element stride e, coordinate c (in 16-byte chunks on the inner
    axis, elements on outer ones) and its stride padded by `pad` chunks; the other axes one box row of two."""
    spec = base.spec
    rank, unit = spec.rank, S.CHUNK_BYTES // spec.itemsize
    shape, box, es, coords = [2] * rank, [1] * rank, [1] * rank, [0] * rank
    shape[-1] = box[-1] = unit
    scale = unit if axis == rank - 1 else 1
    shape[axis], box[axis], es[axis], coords[axis] = n * scale, b * scale, e, c * scale
    strides = [spec.itemsize] * rank
    for k in range(rank - 2, -1, -1):
        strides[k] = shape[k + 1] * strides[k + 1] + (S.CHUNK_BYTES * pad if k == axis else 0)
    geometry = spec.replace(shape=tuple(shape), box=tuple(box), element_strides=tuple(es),
                            strides_bytes=tuple(strides))
    return StoreCase(geometry, tuple(coords), base.op)


def axis_candidates(base: StoreCase, axis: int) -> dict:
    """(field, value) -> a case of that class on `axis`: one per value of every per-axis field."""
    g = functools.partial(geometry_case, base, axis)
    out = {("element_stride", "1"): g(4, 4), ("element_stride", "divides"): g(4, 4, 2),
           ("element_stride", "not_divides"): g(4, 4, 3),
           ("box", "smaller"): g(4, 2), ("box", "equal"): g(4, 4), ("box", "larger"): g(2, 4),
           ("coordinate", "negative"): g(4, 2, c=-1), ("coordinate", "zero"): g(4, 2),
           ("coordinate", "positive"): g(4, 2, c=1),
           ("boundary", "before"): g(4, 2, c=-2), ("boundary", "straddle_start"): g(4, 2, c=-1),
           ("boundary", "inside"): g(4, 2), ("boundary", "straddle_end"): g(4, 2, c=3),
           ("boundary", "past"): g(4, 2, c=4), ("boundary", "spans"): g(2, 4, c=-1)}
    if axis < base.spec.rank - 1:
        out[("stride", "tight")], out[("stride", "padded")] = g(4, 2), g(4, 2, pad=1)
    return out


def fixed_candidates(case: StoreCase, axis: int) -> list[StoreCase]:
    """A fixed map's reach on `axis`, as its builders draw coordinates (outer 0..n, inner chunks 0..ceil(n/unit)):
    at 0, the last coordinate inside and the first past the end (the boundary class only grows with the
    coordinate), and one chunk before 0."""
    spec = case.spec
    n, step = spec.shape[axis], (S.CHUNK_BYTES // spec.itemsize if axis == spec.rank - 1 else 1)
    past = -(-n // step) * step
    out = []
    for c in (0, past - step, past, -step):
        coords = list(case.coords)
        coords[axis] = c
        out.append(StoreCase(spec, tuple(coords), case.op))
    return out


# ---------------------------------------------------------------------------------------------- the model

class StoresCoverage(CoverageModel):
    """The classes of a stores or reductions target whose operations are `ops`."""

    def __init__(self, ops):
        self.ops = tuple(ops)
        self.with_op = len(self.ops) > 1

    def classes(self, fuzz_case):
        case = fuzz_case.case
        rank = case.spec.rank
        values = enum_values(case, True)
        out = [name(rank=rank, **{k: v}) for k, v in values.items()]
        if self.with_op:
            out.append(name(rank=rank, op=case.op, dtype=values["dtype"]))
        out += [name(rank=rank, axis=a, **{f: v}) for a, f, v in axis_classes(case)]
        if not self.with_op:
            del values["op"]
        return out + case_pairs(values)

    def universe(self, options: dict) -> Universe:
        user = (options or {}).get("spec")
        key = json.dumps(user, sort_keys=True) if user else None
        tables = (tuple(d.name for d in S.STORE_DTYPES),
                  tuple((op, tuple(d.name for d in ds)) for op, ds in sorted(S.REDUCE_DTYPES.items())))
        target = spec_target(canonical_spec(1, ALL_DTYPES[0]))  # the open context's GPU, else sm_90a
        return _universe(self.ops, key, target, tables)


@functools.lru_cache(maxsize=64)
def _universe(ops: tuple, user_key: str | None, target: str, tables: tuple) -> Universe:
    """The universe of a target with `ops` (on a user's fixed map when `user_key` holds its JSON). `target` and
    `tables` (STORE_DTYPES, REDUCE_DTYPES) key the cache: the answer is theirs."""
    del target, tables
    user = None
    if user_key:
        d = json.loads(user_key)
        user = TensorMapSpec.from_dict({k: v for k, v in d.items() if k != "base_address"})
    domains: dict[str, Sequence[Any]]  # field -> its values (the dtypes re-ordered below, as a list)
    if user is None:
        domains = {"dtype": ALL_DTYPES + PACKED_DTYPES, "swizzle": tuple(Swizzle), "l2": tuple(L2Promotion),
                   "op": ops, "rank": tiled.RANKS}
    else:
        domains = {"dtype": (user.dtype,), "swizzle": (user.swizzle,), "l2": (user.l2_promotion,), "op": ops,
                   "rank": (user.rank,)}

    listed = dict(domains)
    # Completions start from each field's first value: the types most ops take first, so a feasible class is
    # found in a check or two (the listing order stays the enum's).
    domains["dtype"] = sorted(domains["dtype"], key=lambda d: -sum(op == S.STORE or d in S.REDUCE_DTYPES.get(op, ())
                                                                   for op in ops))
    spec_of = functools.lru_cache(maxsize=None)(canonical_spec)

    @functools.lru_cache(maxsize=None)
    def map_rules(spec):  # check_case validates the map first, whatever the op: once per map
        errors = validate_all(spec)
        return (errors[0].rule,) if errors else ()

    @functools.lru_cache(maxsize=None)
    def check_key(dtype, swizzle, l2, op, rank):
        spec = user if user is not None else spec_of(rank, dtype, swizzle, l2)
        return map_rules(spec) or tuple(broken(StoreCase(spec, (0,) * rank, op)))

    def check(v: dict) -> list[str]:
        return list(check_key(v["dtype"], v["swizzle"], v["l2"], v["op"], v["rank"]))

    def label(field: str, value) -> str:
        return value.name if field == "dtype" else (value if field == "op" else enum_label(value))

    classes, refused = [], {}

    def put(cls: str, rule: str | None) -> None:
        if rule is None:
            classes.append(cls)
        else:
            refused[cls] = rule

    with_op = len(ops) > 1
    for rank in domains["rank"]:
        for field in ("dtype", "swizzle", "l2", "op"):
            for value in listed[field]:
                put(name(rank=rank, **{field: label(field, value)}), feasible_by(check, domains,
                                                                                 {"rank": rank, field: value}))
        if with_op:
            for op, dtype in itertools.product(ops, listed["dtype"]):
                put(name(rank=rank, op=op, dtype=dtype.name), feasible_by(check, domains,
                                                                          {"rank": rank, "op": op, "dtype": dtype}))
        _axis_universe(rank, domains, check, user, put)
    # pairwise names values by str(): hand it the labels classes() uses, and map them back for the check
    fields = {f: {label(f, v): v for v in listed[f]} for f in ("dtype", "swizzle", "l2", "op") if f != "op" or with_op}

    def feasible(labels: dict) -> bool:
        rule = feasible_by(check, domains, {f: fields[f][x] for f, x in labels.items()})
        if rule is not None:
            refused[name("pair", **labels)] = rule
        return rule is None

    classes += pairwise({f: list(v) for f, v in fields.items()}, feasible)
    return Universe(tuple(classes), refused)


def _axis_universe(rank: int, domains: dict, check, user, put) -> None:
    """Every per-axis class of `rank`: each candidate case of a class, checked by the real rules."""
    free = {k: v for k, v in domains.items() if k != "rank"}
    for combo in itertools.product(*free.values()):  # the first enum values the rules take, as the base
        values = {**dict(zip(free, combo)), "rank": rank}
        if not check(values):
            break
    else:
        return  # no map of this rank at all: every class of it is refused above
    op = values["op"]
    base = StoreCase(user if user is not None else canonical_spec(rank, values["dtype"], values["swizzle"],
                                                                     values["l2"]), (0,) * rank, op)
    for axis in range(rank):
        if user is None:
            candidates = list(axis_candidates(base, axis).items())
        else:
            candidates = [(None, case) for case in fixed_candidates(base, axis)]
        seen: dict[str, str | None] = {}  # class -> the rule refusing it (None: a case of it passes)
        for want, case in candidates:
            rules = broken(case)
            got = [(f, v) for a, f, v in axis_classes(case) if a == axis and (want is None or f == want[0])]
            if want is not None and got != [want]:
                raise AssertionError(f"canonical case for {want} on axis {axis} classifies as {got}")
            for f, v in got:
                cls = name(rank=rank, axis=axis, **{f: v})
                if not rules:
                    seen[cls] = None
                else:
                    seen.setdefault(cls, rules[0])
        order = [name(rank=rank, axis=axis, **{f: v}) for f, vs in AXIS_FIELDS.items() for v in vs]
        for cls in sorted(seen, key=order.index):
            put(cls, seen[cls])
