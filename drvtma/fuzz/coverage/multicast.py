"""Coverage of the multicast fuzz (tests/test_cluster_gpu.py): batches of multicast ops checked byte for byte in
every receiving CTA.

Classes, per op: each cluster size the multicast rules accept with each mask kind (one CTA, a part, all) and
whether the issuer receives; each size with tiled and bulk copies; per tiled map its dtype, swizzle and rank and
where the box meets each axis (counted from the innermost); bulk copies of one 16-B unit or more; every pair of the
op's enum fields. The universe comes from `check_multicast` and the tensor-map rules on canonical instances.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ...cluster import multicast as M
from ...errors import ClusterError
from ...tma import target_rules
from ...tma.dtypes import ALL_DTYPES, PACKED_DTYPES
from ...tma.tiled import spec as S
from .core import BOUNDARIES, CoverageModel, Universe, boundaries, case_pairs, count_names, name, pairwise
from .decode import _broken

MASK_KINDS = ("one", "partial", "all")


def mask_kind(mask: int, ctas: int) -> str:
    ones = bin(mask).count("1")
    return "all" if ones == ctas else ("one" if ones == 1 else "partial")


def _canonical_ops(ctas: int) -> dict:
    """(kind, issuer side) -> an op of that kind for a cluster of `ctas`, where one can be written down."""
    masks = {"one": 1 << (ctas - 1), "partial": 0b11 if ctas > 2 else None, "all": (1 << ctas) - 1}
    out = {}
    for kind, mask in masks.items():
        if mask is None or mask_kind(mask, ctas) != kind:
            continue
        inside = [r for r in range(ctas) if mask >> r & 1]
        outside = [r for r in range(ctas) if not mask >> r & 1]
        for side, ranks in (("in", inside), ("out", outside)):
            if ranks:
                out[(kind, side)] = M.Multicast(ranks[0], mask, 0, coords=(0,))
    return out


def _accepted(op: M.Multicast, ctas: int) -> bool:
    try:
        M.check_multicast(op, ctas)
        return True
    except ClusterError:
        return False


def _map_verdict(**values):
    """"ok", a Blackwell-only rule (refused), or None for a tensor-map enum value (the rest canonical)."""
    v = {"rank": 2, "dtype": ALL_DTYPES[0], "interleave": S.Interleave.NONE, "swizzle": S.Swizzle.NONE,
         "l2_promotion": S.L2Promotion.NONE, "oob_fill": S.OobFill.ZERO, **values}
    broken = _broken(v)
    if not broken:
        return "ok"
    return ", ".join(sorted(broken)) if broken <= target_rules.NEEDS_RULES else None


class MulticastModel(CoverageModel):
    """The multicast fuzz's classes; a case is one `drvtma.cluster.probe.Batch`."""

    def universe(self, options=None) -> Universe:
        classes, refused = [], {}
        sizes = [n for n in range(1, 2 * M.MASK_BITS + 1) if _accepted(M.Multicast(0, 1, 0, coords=(0,)), n)]
        seen: dict[str, set[str]] = {}  # mask kind -> the issuer sides accepted with it
        for n in sizes:
            classes.append(name(cluster=n))
            for (kind, side), op in _canonical_ops(n).items():
                if _accepted(op, n):
                    classes.append(name(cluster=n, mask=kind, issuer=side))
                    seen.setdefault(kind, set()).add(side)
            for copy, op in (("tiled", M.Multicast(0, 1, 0, coords=(0,))),
                             ("bulk", M.Multicast(0, 1, 0, bulk=(0, 16)))):
                if _accepted(op, n):
                    classes.append(name(cluster=n, copy=copy))
        for field, values in (("dtype", ALL_DTYPES + PACKED_DTYPES), ("swizzle", tuple(S.Swizzle))):
            for x in values:
                verdict = _map_verdict(**{field: x})
                cls = name(copy="tiled", **{field: getattr(x, "name", x)})
                if verdict == "ok":
                    classes.append(cls)
                elif verdict:
                    refused[cls] = verdict
        classes += [name(copy="tiled", rank=r) for r in range(1, S.MAX_RANK + 1)]
        classes += [name(copy="tiled", axis=k, boundary=b) for k in range(S.MAX_RANK) for b in BOUNDARIES]
        classes += [name(copy="bulk", bytes=b) for b in ("16", "more")]
        classes += [name(copy=c, box_offset=o) for c in ("tiled", "bulk") for o in ("zero", "nonzero")]
        fields = {"copy": ("tiled", "bulk"), "mask": MASK_KINDS, "issuer": ("in", "out"), "late_expect": ("no", "yes"),
                  "swizzle": tuple(s.name for s in S.SM90_SWIZZLES)}

        def feasible(v):
            if v.get("copy") == "bulk" and "swizzle" in v:
                return False  # a bulk copy has no map, so no swizzle
            return v.get("issuer") is None or v.get("mask") is None or v["issuer"] in seen.get(v["mask"], ())
        classes += pairwise(fields, feasible)
        return Universe(tuple(classes), refused)

    def classes(self, case) -> Counter:
        batch = case
        out: Counter[str] = Counter()
        n, spec = batch.ctas, batch.spec
        copy = "bulk" if spec is None else "tiled"
        late = "yes" if batch.flags & 4 else "no"  # probe.HAZARD_FLAGS["late_expect"]
        ops = [op for ops in batch.op_lists for op in ops]
        out[name(cluster=n)] += len(ops)
        out[name(cluster=n, copy=copy)] += len(ops)
        out[name(copy=copy, box_offset="nonzero" if batch.box_offset else "zero")] += len(ops)
        for op in ops:
            kind, side = mask_kind(op.mask, n), "in" if op.mask >> op.issuer & 1 else "out"
            out[name(cluster=n, mask=kind, issuer=side)] += 1
            values = {"copy": copy, "mask": kind, "issuer": side, "late_expect": late}
            if spec is not None:
                values["swizzle"] = spec.swizzle.name
            out.update(case_pairs(values))
            if op.bulk is not None:
                out[name(copy="bulk", bytes="16" if op.bulk[1] == 16 else "more")] += 1
        if spec is not None and ops:
            out[name(copy="tiled", dtype=spec.dtype.map_type.name)] += len(ops)
            out[name(copy="tiled", swizzle=spec.swizzle.name)] += len(ops)
            out[name(copy="tiled", rank=spec.rank)] += len(ops)
            first = np.array([op.coords for op in ops], dtype=np.int64)
            last = first + np.array(spec.box, dtype=np.int64) - 1
            for a in range(spec.rank):  # axis counted from the innermost
                out.update(count_names(name(copy="tiled", axis=spec.rank - 1 - a, boundary=""),
                                       boundaries(first[:, a], last[:, a], spec.shape[a])))
        return out


MODEL = MulticastModel()
