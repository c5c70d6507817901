"""Coverage of the decode round trip (tests/test_tensormap_global_gpu.py): driver-encoded maps of random valid specs
decoded by drvtma.tma.tiled.decode.

Classes: every enum value per rank (dtype, interleave, swizzle, L2 promotion, fill); per rank and axis (NumPy
order) the dim, stride, box and element-stride classes; every pair of enum values. A class is in the universe when
a canonical spec of it passes `validate_all` for sm_90a; one only a Blackwell target takes (packed types, swizzle
atoms) is refused by that rule. `count(specs)` tallies many specs at once in NumPy.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import cast

import numpy as np

from ...tma import target_rules
from ...tma.dtypes import ALL_DTYPES, PACKED_DTYPES
from ...tma.tiled import rules
from ...tma.tiled import spec as S
from .core import CoverageModel, Universe, completions, name

# (label, lo, hi): where a field's encoding changes (dim - 1 in 32 bits, stride >> 4 in 36 bits, box - 1 in 8 bits)
DIM_CLASSES = (("1", 1, 1), ("small", 2, 1 << 16), ("large", (1 << 16) + 1, 1 << 31),
               ("top", (1 << 31) + 1, (1 << 32) - 1), ("max", 1 << 32, 1 << 32))
STRIDE_CLASSES = (("small", 1, (1 << 16) - 1), ("mid", 1 << 16, (1 << 32) - 1), ("wide", 1 << 32, (1 << 39) - 1),
                  ("top", 1 << 39, S.MAX_STRIDE_BYTES - 1))
BOX_CLASSES = (("1", 1, 1), ("mid", 2, S.MAX_BOX - 1), ("max", S.MAX_BOX, S.MAX_BOX))
# a canonical instance of each class (None: the canonical spec's own value, a small contiguous stride)
STRIDE_REPS, BOX_REPS = (None, 1 << 16, 1 << 32, 1 << 39), (1, 128, S.MAX_BOX)
ES_CLASSES = ("1", "divides", "not_divides")
ENUMS = ("dtype", "interleave", "swizzle", "l2_promotion", "oob_fill")


def _domains() -> dict:
    """Every value of each enum field (the tables as they are now), sm_90's and Blackwell's."""
    return {"dtype": ALL_DTYPES + PACKED_DTYPES, "interleave": tuple(S.Interleave), "swizzle": tuple(S.Swizzle),
            "l2_promotion": tuple(S.L2Promotion), "oob_fill": tuple(S.OobFill)}


def _label(v) -> str:
    return getattr(v, "name", str(v))


def _canonical(v: dict) -> S.TensorMapSpec:
    """A small spec with the enum values of `v` and, for v["axis"], its dim / stride / box / element stride."""
    r, dt = v["rank"], v["dtype"]
    il, sw = v["interleave"], v["swizzle"]
    s, align = dt.itemsize, rules.address_alignment(il)
    inner = target_rules.PACKED_BOX if dt.bits else 16 // s
    shape, box, es = [1] * r, [2] * r, [1] * r
    shape[-1], box[-1] = inner, inner
    a = cast(int, v.get("axis"))  # there whenever a per-axis field (dim, box, es, stride) is
    if "dim" in v:
        shape[a] = v["dim"]
    if "box" in v:
        box[a] = v["box"]
    if "es" in v:  # (element stride, box or None: keep the inner box)
        es[a] = v["es"][0]
        box[a] = v["es"][1] or box[a]
    strides, step = [0] * r, shape[-1] * s
    strides[-1] = s
    for k in range(r - 2, -1, -1):
        strides[k] = -(-max(step, strides[k + 1] + 1) // align) * align  # strictly increasing
        step = strides[k] * shape[k]
    if v.get("stride"):
        strides[a] = -(-v["stride"] // align) * align
    return S.TensorMapSpec(dt, tuple(shape), tuple(strides), tuple(box), tuple(es), il, sw, v["l2_promotion"],
                           v["oob_fill"], base_address=1 << 20, target="sm_90a")


def _broken(values: dict) -> set:
    try:
        return {e.rule for e in rules.validate_all(_canonical(values))}
    except Exception as exc:  # a value the spec cannot even hold
        return {getattr(exc, "rule", type(exc).__name__)}


def _verdict(assignment: dict, domains: dict):
    """"ok" when a completion (`core.completions`) validates; the rule when completions fail only by a Blackwell-only
    need; else None."""
    refused = None
    for values in completions(domains, assignment):
        broken = _broken(values)
        if not broken:
            return "ok"
        if refused is None and broken <= target_rules.NEEDS_RULES:
            refused = ", ".join(sorted(broken))
    return refused


class DecodeModel(CoverageModel):
    """The decode round trip's classes; a case is one TensorMapSpec."""

    def universe(self, options=None) -> Universe:
        enums = _domains()
        # l2 promotion constrains nothing: completions keep it at NONE (fewer specs to validate)
        search = {"rank": tuple(range(1, S.MAX_RANK + 1)), **enums, "l2_promotion": (S.L2Promotion.NONE,)}
        classes, refused = [], {}

        def consider(cls, assignment, domains=search):
            verdict = _verdict(assignment, domains)
            if verdict == "ok":
                classes.append(cls)
            elif verdict is not None:
                refused[cls] = verdict

        for r in search["rank"]:
            one = {**search, "rank": (r,)}
            for f in ENUMS:
                for x in enums[f]:
                    consider(name(rank=r, **{f: _label(x)}), {"rank": r, f: x}, one)
            sm90 = {**one, "dtype": ALL_DTYPES, "swizzle": S.SM90_SWIZZLES}
            for a in range(r):
                for lab, _lo, hi in DIM_CLASSES:
                    consider(name(rank=r, axis=a, dim=lab), {"rank": r, "axis": a, "dim": hi}, sm90)
                for (lab, _, _), rep in zip(STRIDE_CLASSES, STRIDE_REPS) if a < r - 1 else ():
                    consider(name(rank=r, axis=a, stride=lab), {"rank": r, "axis": a, "stride": rep}, sm90)
                for (lab, _, _), rep in zip(BOX_CLASSES, BOX_REPS):
                    consider(name(rank=r, axis=a, box=lab), {"rank": r, "axis": a, "box": rep}, sm90)
                for lab, e in zip(ES_CLASSES, (1, 2, 3)):  # inner boxes (16 B of elements) are even, never 3k
                    consider(name(rank=r, axis=a, element_stride=lab),
                             {"rank": r, "axis": a, "es": (e, 4 if a < r - 1 else None)}, sm90)
        for (fa, va), (fb, vb) in itertools.combinations(enums.items(), 2):
            for x, y in itertools.product(va, vb):
                consider(name("pair", **{fa: _label(x), fb: _label(y)}), {fa: x, fb: y})
        return Universe(tuple(classes), refused)

    def classes(self, case):
        return self.count([case])

    def count(self, specs) -> Counter:
        """The classes of many specs, tallied in NumPy."""
        specs = list(specs)
        if not specs:
            return Counter()
        n = len(specs)
        rank = np.array([sp.rank for sp in specs])
        enum = {f: np.array([int(getattr(sp, f)) if f != "dtype" else sp.dtype.enum for sp in specs])
                for f in ENUMS}
        pad = np.zeros((n, S.MAX_RANK), np.int64)
        dims, strides, boxes, es = (pad.copy() for _ in range(4))
        for i, sp in enumerate(specs):
            r = sp.rank
            dims[i, :r], strides[i, :r], boxes[i, :r], es[i, :r] = sp.shape, sp.strides_bytes, sp.box, \
                sp.element_strides
        labels = {f: {int(x) if f != "dtype" else x.enum: _label(x) for x in vals} for f, vals in _domains().items()}
        out: Counter[str] = Counter()

        def tally(fmt, *cols, mask=None):
            m = np.ones(n, bool) if mask is None else mask
            if not m.any():
                return
            rows, counts = np.unique(np.stack([c[m] for c in cols], axis=1), axis=0, return_counts=True)
            for row, k in zip(rows, counts):
                out[fmt(*row)] += int(k)

        for f in ENUMS:
            tally(lambda r, x, f=f: name(rank=r, **{f: labels[f][x]}), rank, enum[f])
        for a in range(S.MAX_RANK):
            has = rank > a
            for fld, arr, table in (("dim", dims, DIM_CLASSES), ("box", boxes, BOX_CLASSES)):
                cls = np.searchsorted([lo for _, lo, _ in table], arr[:, a], side="right") - 1
                tally(lambda r, c, fld=fld, table=table: name(rank=r, axis=a, **{fld: table[c][0]}), rank, cls,
                      mask=has)
            cls = np.searchsorted([lo for _, lo, _ in STRIDE_CLASSES], strides[:, a], side="right") - 1
            tally(lambda r, c: name(rank=r, axis=a, stride=STRIDE_CLASSES[c][0]), rank, cls, mask=rank - 1 > a)
            e, b = es[:, a], boxes[:, a]
            cls = np.where(e == 1, 0, np.where(b % np.maximum(e, 1) == 0, 1, 2))
            tally(lambda r, c: name(rank=r, axis=a, element_stride=ES_CLASSES[c]), rank, cls, mask=has)
        for fa, fb in itertools.combinations(ENUMS, 2):
            tally(lambda x, y, fa=fa, fb=fb: name("pair", **{fa: labels[fa][x], fb: labels[fb][y]}),
                  enum[fa], enum[fb])
        return out


MODEL = DecodeModel()
