"""What each compute capability offers a TMA tool, read together with the device's own attributes.

One table (`ARCHS`): per compute capability, the features its arch-specific target (`sm_90a`, `sm_100a`, ...)
compiles, the cluster limits and the documented shared memory per block. The figures that a device reports itself
(SM count, shared memory per block with opt-in, cluster launch) always come from the device (`for_device`); the
table's own figure is only what a CPU run without a device assumes. The portable target (`GENERIC_TARGET`, sm_90 SASS
plus compute_90 PTX) offers only what every TMA GPU has: `target_features`.

Which target compiles which instruction was checked with NVRTC 13.5's ptxas (tests/test_capabilities_cpu.py compiles
one instruction per feature and target, so the table cannot drift from the compiler); what a Blackwell GPU does when
it runs them is not yet run on a GPU here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ..errors import ArgumentError, CapabilityError
from .figures import table_text

GENERIC_TARGET = "compute_90"  # sm_90 SASS, and PTX the driver JIT-compiles on any newer GPU

# feature -> (what it is, what of drvtma needs it)
FEATURES = {
    "tma": ("TMA tiled tensor copies and 1-D bulk copies (cp.async.bulk[.tensor]), mbarrier transactions",
            "every probe, sweep and fuzz target"),
    "clusters": ("thread-block clusters and distributed shared memory", "the cluster probes"),
    "multicast": ("TMA multicast to the CTAs of a cluster (.multicast::cluster)", "the multicast probe and bench"),
    "wgmma": ("wgmma.mma_async (warpgroup MMA)", "the GEMM and the wgmma probe"),
    "setmaxnreg": ("setmaxnreg (warp-specialized register budgets)", "the GEMM"),
    "tensormap_replace": ("tensormap.replace (device-side tensor map edits)", "the global-map probes and "
                          "`drvtma bench descriptors`"),
    "tcgen05": ("tcgen05.mma and tensor memory", "nothing yet"),
    "gather4": ("cp.async.bulk.tensor .tile::gather4 (four rows of a 2-D map)", "nothing yet"),
    "scatter4": ("cp.async.bulk.tensor .tile::scatter4", "nothing yet"),
    "subbyte_maps": ("map types 13-15 (16U4_ALIGN8B, 16U4_ALIGN16B, 16U6_ALIGN16B)", "nothing yet"),
    "swizzle_atoms": ("swizzles 128B_ATOM_32B, 128B_ATOM_32B_FLIP_8B, 128B_ATOM_64B", "nothing yet"),
    "swizzle_96b": ("the 96B swizzle", "nothing yet"),
}
# What the portable build (compute_90 PTX) can use on every TMA GPU.
GENERIC_FEATURES = frozenset({"tma", "clusters", "multicast"})


@dataclass(frozen=True)
class Arch:
    """One compute capability: its name, arch-specific target, features, cluster limits and the documented shared
    memory per block (opt-in); `caveats`: feature -> what is known to go wrong with it there."""

    cc: tuple[int, int]
    family: str
    example: str
    features: frozenset
    cluster_portable: int = 8
    cluster_max: int = 8
    smem_per_block_optin: int = 0
    caveats: tuple = ()
    sm_count: int | None = None  # the device's, once read from it
    device: str = ""

    @property
    def target(self) -> str:
        """The arch-specific target: sm_90a, sm_100a, ..."""
        return f"sm_{self.cc[0]}{self.cc[1]}a"

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    def has(self, feature: str) -> bool:
        return _known(feature) in self.features

    def rows(self) -> list[tuple[str, str]]:
        """(what, value) lines for `drvtma info`."""
        out = [("compute capability", f"{self.sm} ({self.family}, e.g. {self.example})"),
               ("arch-specific target", self.target), ("portable target", f"{GENERIC_TARGET} (sm_90 SASS + PTX)")]
        if self.device:
            out.insert(0, ("device", self.device))
        if self.sm_count is not None:
            out.append(("SMs", str(self.sm_count)))
        out += [("shared memory per block (opt-in)", f"{self.smem_per_block_optin} B"
                 + ("" if self.device else " (documented; a device reports its own)")),
                ("cluster size", f"{self.cluster_portable} portable, {self.cluster_max} at most")]
        caveats = dict(self.caveats)
        for name, (what, _) in FEATURES.items():
            mark = "yes" if name in self.features else "no"
            out.append((name, f"{mark}: {what}" + (f" (caveat: {caveats[name]})" if name in caveats else "")))
        return out


_HOPPER = {"tma", "clusters", "multicast", "wgmma", "setmaxnreg", "tensormap_replace"}
_BLACKWELL = {"tma", "clusters", "multicast", "setmaxnreg", "tensormap_replace", "tcgen05", "gather4", "scatter4",
              "subbyte_maps", "swizzle_atoms"}
ARCHS = {a.cc: a for a in (
    Arch((9, 0), "Hopper", "H100, H200", frozenset(_HOPPER), 8, 16, 232448),
    Arch((10, 0), "Blackwell datacenter", "B200", frozenset(_BLACKWELL), 8, 16, 232448),
    Arch((10, 3), "Blackwell Ultra", "B300", frozenset(_BLACKWELL | {"swizzle_96b"}), 8, 16, 232448),
    # sm_120: no tcgen05, no scatter4 (ptxas refuses both for sm_120a); gather4 compiles for sm_120 too
    Arch((12, 0), "Blackwell consumer", "RTX 5090", frozenset(
        {"tma", "clusters", "multicast", "setmaxnreg", "tensormap_replace", "gather4", "subbyte_maps",
         "swizzle_atoms"}), 8, 8, 101376,
         (("multicast", "legal PTX, but 'may have substantially reduced performance' outside the sm_90a/sm_100a "
                        "families; CUTLASS's sm120 builders assert cluster size 1 (unconfirmed whether it works)"),
          ("clusters", "the largest non-portable size is not documented: 8 assumed (unconfirmed)"))),
)}
HOPPER = ARCHS[(9, 0)]


def _known(feature: str) -> str:
    if feature not in FEATURES:
        raise ArgumentError("capability", "feature", feature, "use one of " + ", ".join(FEATURES))
    return feature


def for_cc(cc: tuple[int, int], *, device: str = "") -> Arch:
    """The row of compute capability `cc`; one the table lacks gets what its generation surely has (TMA from 9.0 on,
    via the portable build), nothing below 9.0."""
    cc = (int(cc[0]), int(cc[1]))
    if cc in ARCHS:
        return replace(ARCHS[cc], device=device)
    features = GENERIC_FEATURES if cc >= (9, 0) else frozenset()
    return Arch(cc, "unknown to drvtma" if cc >= (9, 0) else "before Hopper (no TMA)", device or "-", features,
                8, 8 if features else 1, 0, device=device)


def for_device(props) -> Arch:
    """The row of a device (`driver.DeviceProperties` or anything with the same fields), its own figures in place
    of the table's: SM count, shared memory per block with opt-in, and no clusters if it cannot launch them."""
    row = for_cc(props.compute_capability, device=props.name)
    features = row.features
    if not getattr(props, "cluster_launch", True):
        features = features - {"clusters", "multicast"}
    return replace(row, sm_count=props.sm_count, smem_per_block_optin=props.smem_per_block_optin,
                   features=features)


def parse_target(target: str) -> tuple[tuple[int, int], bool]:
    """("sm_120a") -> ((12, 0), True): the compute capability and whether the target is arch-specific; an
    ArgumentError naming `target` for text that is no target."""
    text = str(target)
    head, _, digits = text.partition("_")
    specific = digits.endswith(("a", "f"))
    digits = digits.rstrip("af")
    if head not in ("sm", "compute") or not digits.isdigit() or len(digits) < 2:
        raise ArgumentError("target", "target", target, "give a target such as sm_90a, sm_100a, sm_120a or "
                            "compute_90")
    return (int(digits[:-1]), int(digits[-1])), specific


def target_features(target: str) -> frozenset:
    """The features code built for `target` may use: an arch-specific target (sm_90a) has its row's, a generic one
    (sm_90, compute_90) only what every GPU from that generation on has."""
    cc, specific = parse_target(target)
    if specific:
        return for_cc(cc).features
    return GENERIC_FEATURES if cc >= (9, 0) else frozenset()


@functools.lru_cache(maxsize=64)
def map_features(target: str) -> frozenset:
    """The features a tensor map for `target` may use: those of the GPU it names (sm_100 and sm_100a alike: a map
    is the driver's, not the compiler's). Remembered per target text, so the map rules stay cheap."""
    return for_cc(parse_target(target)[0]).features


def targets_with(feature: str) -> list[str]:
    """The arch-specific targets whose GPUs offer `feature`, in table order."""
    return [a.target for a in ARCHS.values() if _known(feature) in a.features]


def refusal(feature: str, row: Arch, *, build: str = "") -> CapabilityError:
    """The named refusal: "wgmma needs sm_90a; this is sm_120 (RTX 5090): the GEMM and the wgmma probe are
    unavailable"."""
    _known(feature)
    where = targets_with(feature)
    if feature in GENERIC_FEATURES:
        where = ["sm_90 or newer"]
    what = f"this is {row.sm} ({row.device or row.example})" if not build else f"the build target is {build}"
    users = FEATURES[feature][1]
    verb = "are" if " and " in users else "is"
    needs = " or ".join(where) or "a GPU drvtma does not know"
    return CapabilityError(f"needs_{feature}", feature,
                           f"{feature} needs {needs}; {what}: {users} {verb} unavailable")


def require(feature: str, row: Arch, *, build: str = "") -> None:
    """Raise the named CapabilityError unless `row` (and the build target, when given) offers `feature`."""
    if not row.has(feature):
        raise refusal(feature, row)
    if build and feature not in target_features(build):
        raise refusal(feature, row, build=build)


def markdown() -> str:
    """The table as Markdown, one row per compute capability (README's "Where drvtma runs" table is this)."""
    cols = ("tma", "clusters", "multicast", "wgmma", "setmaxnreg", "tensormap_replace", "tcgen05", "gather4",
            "scatter4", "subbyte_maps", "swizzle_atoms", "swizzle_96b")
    head = ["compute capability", "GPUs", "target", *cols, "shared memory / block", "cluster max"]
    rows = []
    for a in ARCHS.values():
        marks = ["yes*" if dict(a.caveats).get(c) and c in a.features else "yes" if c in a.features else "-"
                 for c in cols]
        rows.append([a.sm, a.example, a.target, *marks, f"{a.smem_per_block_optin} B", str(a.cluster_max)])
    return table_text(head, rows) + "\n"
