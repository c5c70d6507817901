"""The coverage model of im2col loads (`im2col`): enum values per rank, each axis' fields (N, the spatial axes, C),
the corners, the offsets, how far each load's pixel walk goes (within W, into H, into D, into the next image, past
the last one) and where its pixels meet each spatial axis, and every pair of enum values.

Derived like the tiled model: an enum class is in the universe when a canonical im2col spec with that value passes
`IM2COL_RULES`; it is refused (with the rule) when the rules accept it and the oracle does not.
"""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np

from ...errors import RuleError
from ...testing.strategies import ADDRESS_BASE
from ...tma.im2col import oracle
from ...tma.im2col.rules import validate_im2col
from ...tma.im2col.spec import IM2COL_RANKS, SPATIAL_NAMES, Im2colSpec
from ...tma.tiled.spec import Interleave, L2Promotion, OobFill, Swizzle
from .core import (
    BOUNDARIES,
    EXTENTS,
    SIGNS,
    CoverageModel,
    Labels,
    Universe,
    boundaries,
    case_pairs,
    completions,
    count_names,
    extent_class,
    feasible_by,
    name,
    pairwise,
)
from .tiled import ENUMS

WALKS = ("within_w", "into_h", "into_d", "next_image")  # the outermost axis a load's walk carried into
STEP = ("1", "many")


def walks(rank: int) -> tuple[str, ...]:
    """The walk classes a rank has: rank 3 has no H or D to carry into, rank 4 no D."""
    return tuple(w for w in WALKS if not (w == "into_h" and rank < 4 or w == "into_d" and rank < 5))


def canonical_spec(values: dict) -> Im2colSpec:
    """A small im2col spec with the given enum values and rank: 2 images of 4^ns pixels, 16 B of channels."""
    rank = values.get("rank", 4)
    ns = rank - 2
    spec = Im2colSpec.create(values.get("dtype", "uint8"), (2,) + (4,) * ns + (64,), (0,) * ns, (0,) * ns, 1, 8,
                             swizzle=Swizzle[values.get("swizzle", "NONE")],
                             interleave=Interleave[values.get("interleave", "NONE")],
                             l2_promotion=L2Promotion[values.get("l2", "NONE")],
                             oob_fill=OobFill[values.get("fill", "ZERO")], base_address=ADDRESS_BASE)
    return spec.replace(channels_per_pixel=max(1, 16 // spec.itemsize))


def _rules_broken(values: dict) -> list[str]:
    try:
        return [e.rule for e in validate_im2col(canonical_spec(values))]
    except RuleError as exc:  # TensorMapError: the rule the spec cannot even be built under
        return [exc.rule]


def _oracle_refuses(values: dict) -> str | None:
    try:
        oracle.im2col_images(canonical_spec(values), np.zeros(1 << 12, np.uint8), [(0,) * values["rank"]],
                             [(0,) * (values["rank"] - 2)])
    except RuleError as exc:  # TensorMapError: the oracle's rule
        return exc.rule
    return None


def _domains(rank: int | None) -> dict:
    return {"rank": (rank,) if rank else IM2COL_RANKS, **ENUMS}


def _first_accepted(values: dict) -> dict:
    for full in completions(_domains(values.get("rank")), values):
        if not _rules_broken(full):
            return full
    return values


def axis_fields(rank: int) -> dict[str, tuple[str, ...]]:
    """Per-axis class fields: ``n|...``, ``d|...``/``h|...``/``w|...`` and ``c|...`` (NumPy order's names)."""
    out = {"n|element_stride": STEP, "n|stride": ("tight", "padded"), "n|start": SIGNS + ("past",),
           "c|channels": EXTENTS, "c|start": SIGNS + ("past",), "load|walk": walks(rank),
           "load|past_last_image": ("no", "yes")}
    for axis in SPATIAL_NAMES[rank - 2]:
        a = axis.lower()
        out |= {f"{a}|element_stride": STEP, f"{a}|stride": ("tight", "padded"), f"{a}|lower": SIGNS,
                f"{a}|upper": SIGNS, f"{a}|box": EXTENTS, f"{a}|offset": ("zero", "positive"),
                f"{a}|pixels": BOUNDARIES}
    return out


@functools.lru_cache(maxsize=None)
def im2col_universe(loads: bool = True) -> Universe:
    """Every class of an im2col load (`loads`), or of an im2col map the validator judges (`loads=False`: the
    enum classes and pairs the rules accept, no oracle)."""
    classes: list[str] = []
    refused: dict[str, str] = {}
    for rank in IM2COL_RANKS:
        for field, values in ENUMS.items():
            for v in values:
                label = name(rank=rank, **{field: v})
                broken = feasible_by(_rules_broken, _domains(rank), {"rank": rank, field: v})
                why = broken or (_oracle_refuses(_first_accepted({"rank": rank, field: v})) if loads else None)
                (refused.__setitem__(label, why) if why else classes.append(label))
        if loads:
            for field, values in axis_fields(rank).items():
                classes += [f"rank={rank}|{field}={v}" for v in values]
    usable = {k: [v for v in vals if any(name(rank=r, **{k: v}) in classes for r in IM2COL_RANKS)]
              for k, vals in ENUMS.items()}
    classes += pairwise(usable, lambda pair: feasible_by(_rules_broken, _domains(None), pair) is None
                        and (not loads or _oracle_refuses(_first_accepted(pair)) is None))
    return Universe(tuple(classes), refused)


def spec_classes(spec: Im2colSpec) -> list[str]:
    assert spec.element_strides is not None  # __post_init__ fills it
    r = spec.rank
    values = {"dtype": spec.dtype.map_type.name, "swizzle": Swizzle(spec.swizzle).name,
              "l2": L2Promotion(spec.l2_promotion).name, "fill": OobFill(spec.oob_fill).name,
              "interleave": Interleave(spec.interleave).name}
    out = [name(rank=r, **{k: v}) for k, v in values.items()] + case_pairs(values)
    head = f"rank={r}|"
    tight = spec.strides_bytes[-1] * spec.shape[-1]
    out.append(head + f"c|channels={extent_class(spec.channels_per_pixel, spec.shape[-1])}")
    for axis in range(r - 2, -1, -1):  # innermost first: each stride against the one inside it
        label = "n" if axis == 0 else SPATIAL_NAMES[r - 2][axis - 1].lower()
        padded = spec.strides_bytes[axis] > -(-tight // 16) * 16
        out += [head + f"{label}|stride={'padded' if padded else 'tight'}",
                head + f"{label}|element_stride={'1' if spec.element_strides[axis] == 1 else 'many'}"]
        tight = spec.strides_bytes[axis] * spec.shape[axis]
        if axis:
            lo, hi = spec.box_bounds[axis - 1]
            out += [head + f"{label}|lower={SIGNS[int(np.sign(spec.lower_corner[axis - 1])) + 1]}",
                    head + f"{label}|upper={SIGNS[int(np.sign(spec.upper_corner[axis - 1])) + 1]}",
                    head + f"{label}|box={extent_class(hi - lo + 1, spec.shape[axis])}"]
    return out


def load_classes(spec: Im2colSpec, coords, offsets) -> Counter:
    """Per load: where its N and C starts lie, its offsets, how far its walk went and where its pixels meet each
    spatial axis."""
    c, o = oracle.check_im2col_coordinates(spec, coords, offsets)
    pos = oracle.walk(spec, c, o)  # (L, pixels, 1 + ns): n, then D, H, W
    r, head = spec.rank, f"rank={spec.rank}|"
    counts: Counter[str] = Counter()
    for label, start, extent in (("n", c[:, 0], spec.shape[0]), ("c", c[:, -1], spec.shape[-1])):
        codes = np.where(start >= extent, 3, np.sign(start) + 1)
        counts.update(count_names(head + f"{label}|start=", Labels(codes, SIGNS + ("past",))))
    moved = np.stack([(np.diff(pos[:, :, k], axis=1) != 0).any(axis=1) for k in range(r - 1)], axis=1)
    depth = np.where(moved[:, 0], 0, 3)  # the outermost axis that moved: N, else D, else H, else within W
    for k in range(1, r - 2):
        depth = np.where((depth == 3) & moved[:, k], k, depth)
    names = {0: "next_image", 3: "within_w", **{k: f"into_{SPATIAL_NAMES[r - 2][k - 1].lower()}"
                                                for k in range(1, r - 2)}}
    lookup = np.array([walks(r).index(names[d]) if d in names else -1 for d in range(4)])
    codes = lookup[depth]
    counts.update(count_names(head + "load|walk=", Labels(codes, walks(r))))
    past = (pos[:, :, 0] >= spec.shape[0]).any(axis=1)
    counts.update(count_names(head + "load|past_last_image=", Labels(past.astype(int), ("no", "yes"))))
    for k, axis in enumerate(SPATIAL_NAMES[r - 2]):
        p = pos[:, :, 1 + k]
        counts.update(count_names(head + f"{axis.lower()}|pixels=", boundaries(p.min(1), p.max(1), spec.shape[1 + k])))
        counts.update(count_names(head + f"{axis.lower()}|offset=", Labels((o[:, k] > 0).astype(int),
                                                                          ("zero", "positive"))))
    return counts


class Im2colCoverage(CoverageModel):
    """`im2col`: a case has ``spec``, ``coords`` and ``offsets``."""

    def universe(self, options: dict) -> Universe:
        return im2col_universe(True)

    def classes(self, case) -> Counter:
        counts = Counter(spec_classes(case.spec))
        counts.update(load_classes(case.spec, case.coords, case.offsets))
        return counts
