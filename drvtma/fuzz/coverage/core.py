"""Measured coverage: the classes of input a fuzz target's oracle answers for, and how often a campaign hit each.

A target's `CoverageModel` names its universe and the classes each case falls into. The universe is derived from
what the driver and the PTX ISA accept, not from what the generator draws: every value of every enum field per rank,
each per-axis field axis by axis, each boundary a load or store can meet, and every pair of enum values. A class
whose canonical instance a rule table refuses is not in the universe (a new enum value or rule adds or removes
classes by itself); a class the rules accept but the oracle refuses by a named rule (a Blackwell-only layout, an
interleaved load) is listed as refused, with that rule. Every other class must be hit: `Coverage.unhit` lists those
a campaign never reached, and the coverage figure line
``{"test": "coverage", "target": T, "classes": N, "hit": H, "unhit": [...]}`` records them.

Classes are text, fields joined by ``|`` in a fixed order: ``rank=3|dtype=float16``,
``rank=3|axis=0|boundary=straddle_start``, ``pair|dtype=float16|swizzle=B128`` (enum member names).
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ...errors import ArgumentError
from ...testing.optional import hypothesis

MIN_HITS = 20  # what gpu-check's budget must reach for every class


def name(*parts, **fields) -> str:
    """A class name: the positional parts, then ``key=value`` per field, joined by ``|``."""
    return "|".join([*map(str, parts), *(f"{k}={v}" for k, v in fields.items())])


@dataclass(frozen=True)
class Universe:
    """The classes a target must reach (`classes`, in report order) and those refused by a named rule (class ->
    rule): the oracle answers for none of the latter."""

    classes: tuple[str, ...]
    refused: dict = field(default_factory=dict)


class CoverageModel:
    """What a target's model provides: `universe(options)` and `classes(case)` (an iterable of class names; a
    class may repeat, e.g. once per box)."""

    def universe(self, options: dict) -> Universe:
        raise NotImplementedError

    def classes(self, case):
        raise NotImplementedError


def pairwise(fields: dict, feasible) -> list[str]:
    """``pair|a=x|b=y`` for every two fields a < b (in `fields` order) and values x, y with ``feasible({a: x, b: y})``:
    all pairs of the enum fields, each pair once."""
    out = []
    for (fa, va), (fb, vb) in itertools.combinations(fields.items(), 2):
        for x, y in itertools.product(va, vb):
            if feasible({fa: x, fb: y}):
                out.append(name("pair", **{fa: x, fb: y}))
    return out


def case_pairs(values: dict) -> list[str]:
    """The pair classes one case hits (its value of each enum field, two at a time, in `values` order)."""
    return [name("pair", **{fa: x, fb: y}) for (fa, x), (fb, y) in itertools.combinations(values.items(), 2)]


@dataclass
class Coverage:
    """Hits per class over a campaign (or several: `merge`)."""

    target: str
    universe: Universe
    counts: Counter = field(default_factory=Counter)

    def add(self, classes) -> None:
        self.counts.update(classes)

    def merge(self, other: Coverage) -> None:
        self.counts.update(other.counts)

    @property
    def hit(self) -> int:
        return sum(1 for c in self.universe.classes if self.counts[c])

    def unhit(self, at_least: int = 1) -> list[str]:
        """The universe's classes hit fewer than `at_least` times, in universe order."""
        return [c for c in self.universe.classes if self.counts[c] < at_least]

    def refused_hits(self) -> list[str]:
        """Refused classes a case still fell into: the generator drew what the oracle must not answer for."""
        return sorted(c for c in self.universe.refused if self.counts[c])

    def outside(self) -> list[str]:
        """Classes a case fell into that the universe does not know (a model out of step with its generator)."""
        known = set(self.universe.classes) | set(self.universe.refused)
        return sorted(c for c in self.counts if c not in known)

    def figure(self) -> dict:
        """The coverage figure line's fields."""
        hits = [self.counts[c] for c in self.universe.classes]
        return {"test": "coverage", "target": self.target, "classes": len(self.universe.classes), "hit": self.hit,
                "unhit": self.unhit(), "min_hits": min(hits, default=0),
                f"below_{MIN_HITS}": len(self.unhit(MIN_HITS)), "refused": len(self.universe.refused),
                "refused_hit": self.refused_hits(), "outside": self.outside()[:20]}

    def to_json(self) -> dict:
        return {"target": self.target, "counts": dict(self.counts)}

    def rows(self) -> list[tuple[str, int, int, int]]:
        """(family, classes, hit, fewest hits) per class family (the name up to its last field): the docs' table."""
        families: dict[str, list[int]] = {}
        for c in self.universe.classes:
            parts = c.split("|")
            key = "|".join(p.split("=")[0] for p in parts)
            families.setdefault(key, []).append(self.counts[c])
        return [(k, len(v), sum(1 for h in v if h), min(v)) for k, v in families.items()]

    def summary(self) -> str:
        """Text for the end of a campaign: hit of classes, and the unhit ones (the first 20)."""
        unhit = self.unhit()
        head = f"coverage of {self.target}: {self.hit} of {len(self.universe.classes)} classes hit"
        weak = self.unhit(MIN_HITS)
        head += f", {len(weak)} fewer than {MIN_HITS} times" if weak else f", each at least {MIN_HITS} times"
        if self.universe.refused:
            head += f"; {len(self.universe.refused)} refused by a named rule"
        lines = [head]
        if unhit:
            lines.append("unhit: " + ", ".join(unhit[:20]) + (f" and {len(unhit) - 20} more" if len(unhit) > 20
                                                             else ""))
        bad = self.refused_hits()
        if bad:
            lines.append("drawn though refused: " + ", ".join(bad[:10]))
        return "\n".join(lines)


def hypothesis_events(classes, *, steer: str | None = "boundary=") -> list[str]:
    """Inside a hypothesis test, one ``hypothesis.event`` per distinct class in `classes` (a test run with
    ``--hypothesis-show-statistics`` then says what share of its examples reached each class), and with `steer`,
    ``hypothesis.target`` on how many distinct classes containing it the example hit: hypothesis' targeted phase
    then favours examples meeting more kinds of boundary. Returns the distinct classes (in first-seen order)."""
    hyp = hypothesis("coverage events")
    seen = list(dict.fromkeys(classes))
    for c in seen:
        hyp.event(c)
    if steer:
        hyp.target(float(sum(steer in c for c in seen)), label=f"distinct {steer.rstrip('=')} classes")
    return seen


def coverage_of(target, options: dict) -> Coverage | None:
    """An empty Coverage for `target` (None when it has no model)."""
    model = getattr(target, "coverage", None)
    if model is None:
        return None
    return Coverage(target.name, model.universe(options))


def measure(target, options: dict, cases) -> Coverage:
    """The coverage of `cases` (built by `target`) without running them: what a campaign of them would record."""
    cov = coverage_of(target, options)
    if cov is None:
        raise ArgumentError("coverage_model", "target", target.name, "give a target whose `coverage` is a "
                            "CoverageModel (every built-in one has)", "this target measures no coverage")
    for case in cases:
        cov.add(target.coverage.classes(case))
    return cov


# ---------------------------------------------------------------------------------------------- shared class kinds

BOUNDARIES = ("before", "straddle_start", "inside", "straddle_end", "past", "spans")


SIGNS = ("negative", "zero", "positive")
EXTENTS = ("smaller", "equal", "larger")
# The per-axis fields of a tiled access (loads and stores): what each axis of a case is, whatever the target
AXIS_FIELDS = {"element_stride": ("1", "divides", "not_divides"), "box": EXTENTS, "stride": ("tight", "padded"),
               "coordinate": SIGNS, "boundary": BOUNDARIES}


def extent_class(length: int, extent: int) -> str:
    """A box (or channel run) against its axis' extent: "smaller", "equal" or "larger"."""
    return EXTENTS[(length >= extent) + (length > extent)]


class Labels:
    """Labels of many accesses as codes into `names` (cheap to count: a campaign classifies every box)."""

    def __init__(self, codes, names):
        self.codes, self.names = np.asarray(codes, dtype=np.int64).reshape(-1), names

    def __getitem__(self, i):
        return self.names[int(self.codes[i])]

    def __len__(self):
        return len(self.codes)

    def __iter__(self):
        return (self.names[int(c)] for c in self.codes)


def boundaries(first, last, extent) -> Labels:
    """Where each access meets one axis of the tensor (`BOUNDARIES`), from its first and last element index on
    that axis and the axis' extent (arrays broadcast): wholly before 0, straddling 0, inside, straddling the end,
    wholly past the end, or over both ends."""
    first, last, extent = (np.asarray(v, dtype=np.int64) for v in (first, last, extent))
    kind = np.select([last < 0, first >= extent, (first < 0) & (last >= extent), first < 0, last >= extent],
                     [0, 4, 5, 1, 3], 2)
    return Labels(kind, BOUNDARIES)


def sign_class(values) -> Labels:
    """"negative", "zero" or "positive" per value."""
    return Labels(np.sign(np.asarray(values, dtype=np.int64)) + 1, SIGNS)


def count_names(prefix: str, labels) -> Counter:
    """``prefix`` + label, counted over `labels` (`Labels`, or any iterable of texts)."""
    if isinstance(labels, Labels):
        counts = np.bincount(labels.codes, minlength=len(labels.names))
        return Counter({f"{prefix}{n}": int(k) for n, k in zip(labels.names, counts) if k})
    return Counter(f"{prefix}{v}" for v in labels)


def element_stride_class(stride: int, box: int) -> str:
    """"1", "divides" (> 1 and a divisor of the box) or "not_divides": the element-stride classes of one axis."""
    return "1" if stride == 1 else ("divides" if box % stride == 0 else "not_divides")


def completions(domains: dict, assignment: dict):
    """`assignment` completed over the free fields of `domains`: each free field at its first value, then one, two
    and three free fields varied (a pair can need three others: interleave 32B with NaN fill needs rank 3 or more,
    a float type and swizzle 32B)."""
    free = [k for k in domains if k not in assignment]
    base = {k: domains[k][0] for k in free}
    yield {**assignment, **base}
    for width in (1, 2, 3):
        for fields in itertools.combinations(free, width):
            for combo in itertools.product(*(domains[k][1:] for k in fields)):
                yield {**assignment, **base, **dict(zip(fields, combo))}


def feasible_by(check, domains: dict, assignment: dict) -> str | None:
    """None when a completion of `assignment` (`completions`) passes `check(values) -> broken rule names`; else the
    rules the first completion broke, joined."""
    first = None
    for values in completions(domains, assignment):
        broken = check(values)
        if not broken:
            return None
        first = first or broken
    return ", ".join(first) if first else "no completion"
