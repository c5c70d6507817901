"""Coverage of the wgmma fuzz (tests/test_wgmma_gpu.py): probe cases whose accumulators must equal the oracle's,
right and deliberately wrong descriptors alike.

Classes, per case: every operand type; every (type, N) the shape rules accept (those the probe has no kernel for
are refused by its ``shape_n``); SS and RS; per operand each tile layout descriptor_for reads (majorness, swizzle,
inner box bytes), the LBO / SBO magnitude (below or from 1 KiB, or not read), the tile placement; k-steps 1..MAX;
scale-d; each wrong-descriptor kind per operand and each descriptor rule a wrong case breaks; every pair of the
group's enum fields (type, form, majors, swizzles; "reg" for A in registers).
"""

from __future__ import annotations

from collections import Counter
from typing import cast

from ...errors import TensorMapError, WgmmaError
from ...tma.tiled.spec import SM90_SWIZZLES, SWIZZLE_SPAN_BYTES, Swizzle, TensorMapSpec
from ...wgmma import cases as wc
from ...wgmma import probe as wp
from ...wgmma import rules
from ...wgmma.descriptor import WgmmaSwizzle
from ...wgmma.dtypes import ALL_TYPES, M
from .core import CoverageModel, Universe, case_pairs, feasible_by, name, pairwise

# Rules that judge a group (shape, types, majors), not a descriptor: no wrong descriptor breaks them.
GROUP_RULES = ("shape_m", "shape_k", "shape_n", "major_dtype", "register_a_major", "operand", "dtype")
# Descriptor rules no probe case can carry: the probe encodes every descriptor (encode refuses these first), and a
# SmemDescriptor cannot hold a bad swizzle code, reserved bits or a non-integer field.
UNLAUNCHABLE = {"start_alignment": "field_alignment", "field_range": "field_range",
                "field_alignment": "field_alignment", "base_offset_range": "base_offset_range",
                "swizzle_code": "swizzle_code", "reserved_bits": "reserved_bits", "field_type": "field_type",
                "descriptor_type": "descriptor_type"}
SWIZZLES = tuple(s.name for s in SM90_SWIZZLES)


def _bucket(value: int) -> str:
    return "lt1K" if value < 1024 else "ge1K"


def _layout(spec: TensorMapSpec, major: str) -> str:
    # normalise_fields leaves the member (the field is annotated int)
    return name(major=major, swizzle=cast(Swizzle, spec.swizzle).name, inner=spec.box[-1] * spec.itemsize)


def _fields(desc, major: str) -> dict:
    read = desc.swizzle == WgmmaSwizzle.NONE or major == "MN"
    return {"lbo": _bucket(desc.lbo) if read else "unread", "sbo": _bucket(desc.sbo)}


def _operand_classes(dtype, rows: int, major: str, swizzle, steps: int, inner: int | None):
    """The layout and LBO / SBO classes of one canonical tile (the fuzz's own layout), or () when no descriptor
    reads it."""
    try:
        rng = _Zero()
        plan = wc.operand_plan(rng, dtype, rows, steps, major, swizzle, inner)
        d = plan.descriptors(0, "A" if rows == M else "B", dtype)[0]
    except (WgmmaError, TensorMapError):  # no descriptor reads this tile
        return ()
    return _layout(plan.spec, major), _fields(d, major)


class _Zero:
    """A stand-in Generator for canonical plans: zeros (the data does not matter to the layout)."""

    def integers(self, lo, hi=None, size=None, **_):
        import numpy as np

        return np.zeros(size, np.int64) if size is not None else 0

    def choice(self, values, size=None, **_):
        import numpy as np

        return np.full(size, values[0]) if size is not None else values[0]


def _group_check(v: dict) -> list[str]:
    """Rules a group with these enum values breaks (for the pairwise universe)."""
    t = v["dtype"]
    rs = v["form"] == "rs"
    if rs != (v["major_a"] == "reg") or rs != (v["swizzle_a"] == "reg"):
        return ["operand"]
    try:
        rules.check_operands(t, "K" if rs else v["major_a"], v["major_b"], a_from_registers=rs)
    except WgmmaError as exc:
        return [exc.rule]
    return []


class WgmmaModel(CoverageModel):
    """The wgmma fuzz's classes; a case is (group, case) of a `drvtma.wgmma.probe.ProbeGroup`."""

    def universe(self, options=None) -> Universe:
        classes, refused = [], {}
        for t in ALL_TYPES:
            classes.append(name(dtype=t.name))
            for n in t.ns:
                cls = name(dtype=t.name, n=n)
                if n in wp.PROBE_NS:
                    classes.append(cls)
                else:
                    refused[cls] = "shape_n"  # the probe is built for PROBE_NS only
        classes += [name(form=f) for f in ("ss", "rs")]
        for op, _rows in (("A", M), ("B", wp.PROBE_NS[-1])):
            found: dict[str, set[str]] = {}  # layout -> its LBO / SBO classes
            for t in ALL_TYPES:
                for major in ("K", "MN"):
                    for swz in SM90_SWIZZLES:
                        span = SWIZZLE_SPAN_BYTES[swz]
                        for inner in (None, 32, 64):
                            if inner is not None and not (major == "K" and span > inner):
                                continue  # the fuzz narrows K-major boxes below the span only
                            for steps in (1, wp.MAX_STEPS):
                                for n in ((M,) if op == "A" else wp.PROBE_NS):
                                    got = _operand_classes(t, n, major, swz, steps, inner)
                                    if got:
                                        found.setdefault(got[0], set()).update(
                                            name(operand=op, major=major, **{k: v}) for k, v in got[1].items())
            classes += [name(operand=op, layout="") + lay for lay in sorted(found)]
            classes += sorted(set().union(*found.values()))
            classes += [name(operand=op, placement=p) for p in ("atom", "line")]
        classes += [name(steps=s) for s in range(1, wp.MAX_STEPS + 1)]
        classes += [name(scale_d=s) for s in (0, 1)]
        classes += [name("wrong", kind=k, operand=op) for k in wc.WRONG_KINDS for op in ("A", "B")]
        for rule in rules.RULES:
            if rule in GROUP_RULES:
                continue
            if rule in UNLAUNCHABLE:
                refused[name("wrong", rule=rule)] = UNLAUNCHABLE[rule]
            else:
                classes.append(name("wrong", rule=rule))
        fields = self._enum_fields()
        domains = {"dtype": ALL_TYPES, **{k: v for k, v in fields.items() if k != "dtype"}}
        by_name = {t.name: t for t in ALL_TYPES}
        classes += pairwise(fields, lambda v: feasible_by(
            _group_check, domains, {k: by_name[x] if k == "dtype" else x for k, x in v.items()}) is None)
        return Universe(tuple(classes), refused)

    @staticmethod
    def _enum_fields() -> dict:
        return {"dtype": tuple(t.name for t in ALL_TYPES), "form": ("ss", "rs"), "major_a": ("K", "MN", "reg"),
                "major_b": ("K", "MN"), "swizzle_a": SWIZZLES + ("reg",), "swizzle_b": SWIZZLES}

    def classes(self, case) -> Counter:
        group, c = case
        t = group.dtype
        out = Counter([name(dtype=t.name), name(dtype=t.name, n=group.n), name(form="rs" if c.rs else "ss"),
                       name(steps=c.steps), name(scale_d=int(c.scale_d))])
        for op, boxes, want, major in (("A", c.a_boxes, c.expected_a, c.major_a),
                                       ("B", c.b_boxes, c.expected_b, c.major_b)):
            plan = group.plans.get(op)
            if plan is None:
                continue
            out[name(operand=op, layout="") + _layout(plan.spec, major)] += 1
            if want:
                out.update(name(operand=op, major=major, **{k: v}) for k, v in _fields(want[0], major).items())
            span = plan.spec.swizzle_span_bytes
            if span and boxes and c.label == "valid":
                out[name(operand=op, placement="line" if boxes[0].dst % (8 * span) else "atom")] += 1
        a_sw = "reg" if c.rs else group.plans["A"].spec.swizzle.name
        out.update(case_pairs({"dtype": t.name, "form": "rs" if c.rs else "ss",
                               "major_a": "reg" if c.rs else c.major_a, "major_b": c.major_b,
                               "swizzle_a": a_sw, "swizzle_b": group.plans["B"].spec.swizzle.name}))
        if c.label != "valid":
            kind, op = c.label.split(":")
            out[name("wrong", kind=kind, operand=op)] += 1
            try:
                wp.check_case(group, c)
            except WgmmaError as exc:
                out[name("wrong", rule=exc.rule)] += 1
        return out

    def count_group(self, group) -> Counter:
        out: Counter[str] = Counter()
        for c in group.cases:
            out.update(self.classes((group, c)))
        return out


MODEL = WgmmaModel()
