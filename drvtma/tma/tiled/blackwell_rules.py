"""Blackwell's tiled-map rules: gather4 / scatter4 maps (`GATHER_RULES`, `validate_gather4`) and the NumPy oracle of
gather4's rows, each rule named with a fix. The rules a target decides, which `rules.RULES` takes as entries (what
the target's GPU must offer, the packed types' own rules, the 1024-B shared alignment of 128-B swizzles), are
`tma.target_rules`, re-exported here.

Sources: the driver API docs (cuTensorMapEncodeTiled, CUtensorMapDataType, CUtensorMapSwizzle), the PTX ISA
("Restriction on Tensor Copy instructions", cp.async.bulk.tensor .tile::gather4 / .tile::scatter4), CuTe DSL's
checks (cutlass/experimental/cuda/tensor_map.py). Only the `needs_*` rules have met a driver (a Hopper one refuses
types 13-15 and swizzles 4-6); the rest are documented, not yet run on a GPU, and say "unconfirmed" where that is so.
"""
from __future__ import annotations

from typing import cast

import numpy as np

from ...errors import Rule, TensorMapError, as_ints, broken_rules
from ..geometry import Interleave

# The rules `rules.RULES` takes sit below it in `target_rules`; every name stays importable from here.
from ..target_rules import (  # noqa: F401
    ATOM_SWIZZLES,
    NEEDS_RULES,
    PACKED_BOX,
    PACKED_BOX_RULE,
    PACKED_DIM_MULTIPLE,
    PACKED_LAYOUT_RULE,
    PACKED_SWIZZLES,
    SWIZZLE_128B_SMEM_ALIGNMENT,
    TARGET_RULE,
    _needs,
    check_smem_destination,
    needed_features,
    smem_alignment,
    spec_features,
    spec_target,
    targets_with,
)
from .oracle import box_values
from .rules import validate_all


def _gather_holds(spec, scatter: bool = False) -> bool:
    return (spec.rank == 2 and spec.box[0] == 1 and spec.interleave == Interleave.NONE
            and ("scatter4" if scatter else "gather4") in spec_features(spec))


def _check_gather(spec, scatter: bool = False):
    """A map for .tile::gather4 / .tile::scatter4 (PTX ISA): 2-D, one row per box (the instruction names four
    rows), no interleave; gather4 on sm_100a / sm_103a / sm_120a, scatter4 on sm_100a / sm_103a (unconfirmed on a
    GPU)."""
    op = "scatter4" if scatter else "gather4"
    if op not in spec_features(spec):
        yield TensorMapError(f"needs_{op}", "target", spec_target(spec), f"give target='{targets_with(op)[0]}'",
                             f"{op} needs {_needs(op)}; the target is {spec_target(spec)}")
    if spec.rank != 2:
        yield TensorMapError(f"{op}_rank", "shape", spec.shape, "describe the tensor as 2-D (rows, columns)",
                             f"{op} maps are 2-D; this one has rank {spec.rank}")
    elif spec.box[0] != 1:
        yield TensorMapError(f"{op}_box", "box[0]", spec.box[0], "use box[0] = 1 (each of the four rows is named "
                             "by its coordinate)", f"a {op} box is one row of box[1] columns")
    if spec.interleave != Interleave.NONE:
        yield TensorMapError(f"{op}_interleave", "interleave", spec.interleave.name, "use INTERLEAVE_NONE",
                             f"{op} maps take no interleave")


GATHER_RULES = (Rule(("needs_gather4", "needs_scatter4", "gather4_rank", "gather4_box", "gather4_interleave",
                      "scatter4_rank", "scatter4_box", "scatter4_interleave"), _gather_holds, _check_gather, "box"),)


def validate_gather4(spec, *, scatter: bool = False) -> list[TensorMapError]:
    """Every rule a gather4 (or, with scatter=True, scatter4) map breaks: the map's own (rules.validate_all) and
    GATHER_RULES."""
    return validate_all(spec) + cast(list[TensorMapError], broken_rules(GATHER_RULES, spec, scatter))


def gather4_values(spec, global_bytes, col: int, rows) -> np.ndarray:
    """The four rows one .tile::gather4 load moves, as raw bits: (4, box[1]), row i holding tensor row rows[i] from
    column `col` on, the fill outside the tensor (the tiled oracle's `box_values`, one 1-row box per row; the rows
    land in shared memory in this order as one 4 x box[1] box; not yet run on a GPU)."""
    errors = validate_gather4(spec)
    if errors:
        raise errors[0]
    rows = as_ints(rows, "rows", error=TensorMapError, rule="gather4_rows")
    if len(rows) != 4:
        raise TensorMapError("gather4_rows", "rows", rows, "give four row coordinates (repeat one to load it twice)",
                             f"gather4 names four rows, not {len(rows)}")
    return box_values(spec, global_bytes, [(r, int(col)) for r in rows]).reshape(4, -1)
