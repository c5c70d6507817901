"""The coverage models of the validator-vs-driver targets (`encode`, `im2col_encode`): every rule of the table
broken, both verdicts at every rank, every enum value per rank, and every pair of enum values the rules accept.

The rule classes are the rule table's own names (`Rule.rules` of every entry of `RULES` / `IM2COL_RULES`): a new
rule is a new class, and a campaign that never breaks it shows it unhit.
"""

from __future__ import annotations

import functools
from collections import Counter

from ...tma.im2col.rules import IM2COL_RULES, validate_im2col
from ...tma.im2col.spec import IM2COL_RANKS
from ...tma.tiled.rules import RULES, validate_all
from ...tma.tiled.spec import Interleave, L2Promotion, OobFill, Swizzle
from . import im2col as im2col_model
from . import tiled as tiled_model
from .core import CoverageModel, Universe, case_pairs, name


def _enum_name(enum, value) -> str:
    try:
        return enum(value).name
    except ValueError:
        return "other"  # a value no member has: what the `enum` rule refuses


def enum_values(spec) -> dict:
    return {"dtype": spec.dtype.map_type.name, "swizzle": _enum_name(Swizzle, spec.swizzle),
            "l2": _enum_name(L2Promotion, spec.l2_promotion), "fill": _enum_name(OobFill, spec.oob_fill),
            "interleave": _enum_name(Interleave, spec.interleave)}


# The lists of a spec travel to the driver as arrays of the rank's length: lists of other lengths cannot be asked
UNASKABLE = {"rule=rank_mismatch": "rank_mismatch (lists of another length than the rank cannot reach the driver)"}


class ValidatorCoverage(CoverageModel):
    """A validator target: the table's rules, both verdicts per rank, every enum value (the whole domain, and per
    rank those a map of that rank can hold on sm_90a, from the maps' universe `maps()`) and the pairs of enum values
    the rules accept."""

    def __init__(self, table, validate, ranks, maps):
        self.table, self.validate, self.ranks, self.maps = table, validate, tuple(ranks), maps

    @functools.cached_property
    def _universe(self) -> Universe:
        maps = self.maps()
        rules = [f"rule={r}" for entry in self.table for r in entry.rules if f"rule={r}" not in UNASKABLE]
        verdicts = [name(rank=r, verdict=v) for r in self.ranks for v in ("accept", "refuse")]
        domain = [name(**{field: v}) for field, values in tiled_model.ENUMS.items() for v in values]
        per_rank = [c for c in maps.classes if c.startswith("rank=") and c.count("|") == 1]
        pairs = [c for c in maps.classes if c.startswith("pair|")]
        return Universe(tuple(rules + verdicts + domain + per_rank + pairs), dict(UNASKABLE))

    def universe(self, options: dict) -> Universe:
        return self._universe

    @functools.cached_property
    def _known(self) -> frozenset:
        return frozenset(self._universe.classes)

    def classes(self, spec) -> Counter:
        """The rules the spec breaks, its verdict at its rank, and its enum values and their pairs (whatever the
        verdict: the validator judged them), those of the universe only."""
        broken = [e.rule for e in self.validate(spec)]
        out = Counter(f"rule={r}" for r in set(broken))
        rank = len(spec.shape)
        values = enum_values(spec)
        out.update(name(**{k: v}) for k, v in values.items() if v != "other")
        if rank in self.ranks:
            out[name(rank=rank, verdict="refuse" if broken else "accept")] += 1
            out.update(c for c in (name(rank=rank, **{k: v}) for k, v in values.items()) if c in self._known)
            out.update(c for c in case_pairs(values) if c in self._known)
        return out


ENCODE_COVERAGE = ValidatorCoverage(RULES, validate_all, tiled_model.RANKS,
                                    lambda: tiled_model.tiled_universe(False))
IM2COL_ENCODE_COVERAGE = ValidatorCoverage(IM2COL_RULES, validate_im2col, IM2COL_RANKS,
                                           lambda: im2col_model.im2col_universe(False))
