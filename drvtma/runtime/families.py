"""What each kernel family in cu/ needs, and so which target it is built for on a given GPU.

A family that needs nothing arch-specific is built for the portable target: sm_90 SASS on a Hopper, compute_90 PTX
that the driver JIT-compiles anywhere newer (what a fatbin of both would give, chosen here at load time because the
device is known). A family that needs an arch-specific feature (wgmma, setmaxnreg, tensormap.replace) is built for
the device's own arch-specific target and refused, by the capability's named rule, on a GPU without it.
`DRVTMA_ARCH` forces one target for every build (testing the JIT path on a Hopper: `DRVTMA_ARCH=compute_90`).

`sass`: the TMA instruction families (nvdisasm opcodes before the first dot) a default build holds on every
target the family can be built for; tests/test_capabilities_cpu.py compiles each family for sm_90, sm_100a and
sm_120a and checks them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import settings
from ..errors import ArgumentError
from . import capabilities as caps
from . import compiler


@dataclass(frozen=True)
class Family:
    needs: frozenset = frozenset()  # capabilities.FEATURES beyond plain TMA
    sass: tuple = ()

    @property
    def portable(self) -> bool:
        return self.needs <= caps.GENERIC_FEATURES


def _f(needs: str = "", sass: str = "") -> Family:
    return Family(frozenset(needs.split()), tuple(sass.split()))


# path under cu/ -> what it needs (beyond TMA, which every family may use) and the TMA instructions it holds
FAMILIES = {
    "b08/b08_modes.cu": _f("tma", "UTMALDG UBLKCP SYNCS"),
    "b08/pipelines.cu": _f("tma", "UBLKCP SYNCS"),
    "b08/release_repro.cu": _f("tma", "UBLKCP SYNCS"),
    "b08/roof.cu": _f(),
    "cluster/cluster_identity.cu": _f("clusters", "SYNCS"),
    "cluster/multicast_bench.cu": _f("multicast", "UTMALDG SYNCS"),
    "cluster/multicast_probe.cu": _f("multicast", "UTMALDG UBLKCP SYNCS"),
    "runtime/core_roundtrip.cu": _f("tma", "UTMALDG UBLKCP SYNCS"),
    "runtime/launch_cost.cu": _f(),
    "runtime/timing.cu": _f(),
    "tma/load_probe.cu": _f("tma", "UTMALDG SYNCS"),
    "tma/im2col_probe.cu": _f("tma", "UTMALDG SYNCS"),
    "tma/roundtrip_store.cu": _f("tma", "UTMALDG UTMASTG SYNCS"),
    "tma/store_probe.cu": _f("tma", "UTMASTG UTMAREDG UBLKCP"),
    "tma/global_map.cu": _f("tensormap_replace", "UTMALDG UTMACCTL SYNCS"),
    "tma/global_map_bench.cu": _f("tensormap_replace", "UTMALDG UTMACCTL SYNCS"),
    "wgmma/wgmma_probe.cu": _f("wgmma"),
    "gemm/gemm_ws.cu": _f("wgmma setmaxnreg multicast"),
    "show/bank_probe.cu": _f(),
}


def family_of(source) -> Family | None:
    """The family of a kernel under cu/ (a Path, a path under cu/ or a bare name); None for anything else (a user's
    kernel or source text), whose needs drvtma cannot know. A name is found as the compiler finds it, so a user's
    file that shares a name with one of drvtma's (here, or as an absolute path) is the user's."""
    if isinstance(source, str) and "\n" not in source and source.endswith(".cu"):
        try:
            source = compiler.find_source(source)
        except ArgumentError:  # missing or ambiguous: no family (the compile names the problem)
            return None
    if not isinstance(source, Path):
        return None
    try:
        parts = source.resolve().relative_to(compiler.cu_dir().resolve()).parts
    except ValueError:  # a file outside cu/: a user's kernel
        return None
    return FAMILIES.get("/".join(parts))


def build_target(source, row: caps.Arch | None = None) -> str:
    """The target `source` is built for on the GPU `row` (None: a Hopper, what a CPU build assumes), after
    refusing, by the capability's named rule, a GPU or a forced DRVTMA_ARCH target without what it needs.
    A family that needs only TMA gets the portable target (sm_90 SASS on compute capability 9.0, compute_90 PTX
    on anything newer); everything else the GPU's arch-specific target (sm_90a, sm_100a, sm_120a)."""
    row = row or caps.HOPPER
    forced = settings.ARCH.get()
    family = family_of(source)
    rarest_first = sorted(family.needs if family else (),  # the refusal names what is rarest (wgmma, not setmaxnreg)
                          key=lambda f: (sum(f in a.features for a in caps.ARCHS.values()), f))
    for feature in rarest_first:
        caps.require(feature, row, build=forced or "")
    if forced:
        caps.parse_target(forced)  # an ArgumentError for text that is no target
        return forced
    if family is not None and family.portable:
        return "sm_90" if row.cc[0] == 9 else caps.GENERIC_TARGET
    return row.target if row.cc in caps.ARCHS else caps.GENERIC_TARGET
