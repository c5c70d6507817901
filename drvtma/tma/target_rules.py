"""The map rules a spec's target GPU decides, the part of Blackwell's rules that `tiled.rules.RULES` and
`im2col.rules.IM2COL_RULES` take as entries: what the target must offer (`needs_subbyte_maps`,
`needs_swizzle_atoms`), the packed types' own rules, the 1024-B shared alignment of 128-B swizzles. Below both;
`tiled.blackwell_rules` re-exports every name and adds gather4 / scatter4 maps (sources and status: its docstring)."""

from __future__ import annotations

from ..errors import Rule, TensorMapError
from ..runtime.capabilities import targets_with
from .geometry import Swizzle
from .targets import spec_features, spec_target

PACKED_DIM_MULTIPLE = 128  # globalDim[0] of a packed type, in values
PACKED_BOX = 128  # boxDim[0] of a packed type, in values
PACKED_SWIZZLES = (Swizzle.NONE, Swizzle.B128)
# swizzle -> the name the driver's enum gives it; they need the `swizzle_atoms` capability.
ATOM_SWIZZLES = {Swizzle.B128_ATOM_32B: "128B_ATOM_32B", Swizzle.B128_ATOM_32B_FLIP_8B: "128B_ATOM_32B_FLIP_8B",
                 Swizzle.B128_ATOM_64B: "128B_ATOM_64B"}
NEEDS_RULES = frozenset({"needs_subbyte_maps", "needs_swizzle_atoms"})
SWIZZLE_128B_SMEM_ALIGNMENT = 1024  # Blackwell: 128-B-span swizzles want a 1024-B aligned shared image


def needed_features(spec) -> list[tuple[str, str, str]]:
    """(feature, what, its fix) for each map feature `spec` uses beyond sm_90's."""
    out = []
    if spec.dtype.bits:
        out.append(("subbyte_maps", spec.dtype.name.upper(), "unpack the values to uint8 for a sm_90 target"))
    if spec.swizzle in ATOM_SWIZZLES:
        out.append(("swizzle_atoms", f"SWIZZLE_{ATOM_SWIZZLES[spec.swizzle]}",
                    "use SWIZZLE_128B (16-B units) for a sm_90 target"))
    return out


def _needs(feature: str) -> str:
    """"sm_100a, sm_103a or sm_120a": the targets whose GPUs offer `feature`."""
    where = targets_with(feature)
    return ", ".join(where[:-1]) + f" or {where[-1]}" if len(where) > 1 else where[0]


def _target_holds(spec, _limit=None) -> bool:
    if spec.dtype.enum < 13 and spec.swizzle < 4:  # every sm_90 map: no target looked up
        return True
    features = spec_features(spec)
    return all(f in features for f, _, _ in needed_features(spec))


def _check_target(spec, _limit=None):
    """The GPU of the spec's target lacks a map feature: "16U4_ALIGN8B needs sm_100a, sm_103a or sm_120a; the
    target is sm_90a". A Hopper driver refuses both."""
    features, target = spec_features(spec), spec_target(spec)
    for feature, what, fix in needed_features(spec):
        if feature not in features:
            param = "dtype" if feature == "subbyte_maps" else "swizzle"
            yield TensorMapError(f"needs_{feature}", param, what,
                                 f"give target='{targets_with(feature)[0]}' (or --target) for a Blackwell GPU, or "
                                 f"{fix}", f"{what} needs {_needs(feature)}; the target is {target}")


def _packed_layout_holds(spec, _limit=None) -> bool:
    return not spec.dtype.bits or spec.shape[-1] % PACKED_DIM_MULTIPLE == 0


def _check_packed_layout(spec, _limit=None):
    """globalDim[0] of a packed type is a multiple of 128 values (driver docs; unconfirmed on a GPU)."""
    if spec.dtype.bits and spec.shape[-1] % PACKED_DIM_MULTIPLE:
        n = spec.shape[-1]
        yield TensorMapError("packed_dim", f"shape[{spec.rank - 1}]", n,
                             f"pad the innermost axis to {-(-n // PACKED_DIM_MULTIPLE) * PACKED_DIM_MULTIPLE} values",
                             f"{spec.dtype.name} counts values; the innermost axis must hold a multiple of "
                             f"{PACKED_DIM_MULTIPLE}")


def _packed_box_holds(spec, _limit=None) -> bool:
    return not spec.dtype.bits or (spec.box[-1] == PACKED_BOX and spec.swizzle in PACKED_SWIZZLES)


def _check_packed_box(spec, _limit=None):
    """boxDim[0] of a packed type is 128 values; its swizzle is NONE or 128B (PTX ISA's restriction on tensor
    copies, CuTe DSL; unconfirmed on a GPU). Its NaN fill is refused by `nan_fill_type` (no floating type)."""
    if not spec.dtype.bits:
        return
    if spec.box[-1] != PACKED_BOX:
        yield TensorMapError("packed_box", f"box[{spec.rank - 1}]", spec.box[-1], f"use box[{spec.rank - 1}] = "
                             f"{PACKED_BOX}", f"a {spec.dtype.name} box row is exactly {PACKED_BOX} values")
    if spec.swizzle not in PACKED_SWIZZLES:
        yield TensorMapError("packed_swizzle", "swizzle", getattr(spec.swizzle, "name", spec.swizzle),
                             "use swizzle NONE or 128B", f"{spec.dtype.name} maps take no other swizzle")


# The entries rules.RULES holds, in its order: the target's features first (a form rule: nothing else of a packed
# type is checked for a GPU without it), the packed type's layout and box after the sm_90 rules of each scope.
TARGET_RULE = Rule(tuple(sorted(NEEDS_RULES)), _target_holds, _check_target, "form")
PACKED_LAYOUT_RULE = Rule(("packed_dim",), _packed_layout_holds, _check_packed_layout, "layout", after=NEEDS_RULES)
PACKED_BOX_RULE = Rule(("packed_box", "packed_swizzle"), _packed_box_holds, _check_packed_box, "box",
                       after=NEEDS_RULES)


# ---------------------------------------------------------------------------------------------- shared memory

def smem_alignment(spec) -> int:
    """The alignment a load's shared destination needs: 128 B, and 1024 B for a 128-B-span swizzle on a Blackwell
    target (tilelang's reports on sm_100 / sm_120; unconfirmed on a GPU here). On sm_90 the swizzle pattern is
    taken from the address's bits 4-9, so drvtma's kernels align images to 1024 B there too."""
    if spec.swizzle_span_bytes == 128 and not spec_target(spec).startswith("sm_90"):
        return SWIZZLE_128B_SMEM_ALIGNMENT
    return 128


def check_smem_destination(spec, smem_address: int) -> None:
    """Refuse a shared destination `spec`'s loads cannot take (rule `smem_swizzle_alignment`)."""
    align = smem_alignment(spec)
    if smem_address % align:
        raise TensorMapError("smem_swizzle_alignment", "smem_address", smem_address,
                             f"align the shared image to {align} B, e.g. {-(-smem_address // align) * align}",
                             f"a {getattr(spec.swizzle, 'name', spec.swizzle)} load on {spec_target(spec)} wants "
                             f"a {align}-B aligned destination")


# ---------------------------------------------------------------------------------------------- gather4, scatter4
