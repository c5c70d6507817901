"""Which GPU a tensor map is for: a spec's `target` (sm_90a, sm_100a, sm_103a, sm_120a), checked, and the target a
spec without one is checked for (the open context's device, else sm_90a). The map rules of each target are in
`target_rules` (and gather4's in `tiled.blackwell_rules`); what each GPU offers is `runtime.capabilities`."""

from __future__ import annotations

from ..errors import ArgumentError, TensorMapError
from ..runtime import driver
from ..runtime.capabilities import HOPPER, map_features, parse_target

DEFAULT_TARGET = HOPPER.target  # a spec's target without one of its own and without an open context


def map_target(value) -> str | None:
    """A spec's target as text (sm_100a), checked: a TensorMapError naming `target` for text that is no target or
    a GPU without TMA."""
    if value is None:
        return None
    text = value.strip().lower() if isinstance(value, str) else value
    try:
        cc, _ = parse_target(text)
    except ArgumentError:
        raise TensorMapError("target", "target", value, "give a target such as sm_90a, sm_100a, sm_103a or sm_120a",
                             "not a compute target") from None
    if cc < (9, 0):
        raise TensorMapError("target", "target", value, "give sm_90a or newer",
                             "tensor maps need compute capability 9.0 or newer")
    return text


def spec_target(spec) -> str:
    """The target `spec` is checked for: its own, else the open context's device's, else sm_90a (never opens a
    context: a CPU check answers for sm_90a)."""
    return getattr(spec, "target", None) or driver.current_target() or DEFAULT_TARGET


def spec_features(spec) -> frozenset:
    """What the GPU of `spec`'s target offers a map (remembered per target)."""
    return map_features(spec_target(spec))
