"""Judge what a capture saw: every distinct map (by its 128 bytes), from an encode call or found in a launch's
arguments, decoded, checked against every drvtma rule, with the hazards and hints its spec shows, the calls that
encoded it and the kernels that launched it. Only windows `tma.maps.findings.plausibility` accepts count as maps: a
packed argument buffer holds many 128-byte windows, and an all-zero or random one decodes to something.
No GPU: the CPU tests judge recorded streams."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DrvtmaError
from ..tma.dtypes import tma_dtype
from ..tma.im2col.spec import Im2colSpec
from ..tma.maps.findings import explain, map_or_lead, plausibility
from ..tma.tiled.decode import same_map
from ..tma.tiled.spec import L2Promotion, Swizzle, TensorMapSpec
from .events import Encode, Launch, Replace
from .structs import MAP_BYTES

# A CUtensorMap parameter is 64-byte aligned in the GPU's parameter bank, not in the argument buffer: sm_90's bank
# starts at 0x210, so a map that is the first parameter sits at offset 112 (the cubin's KPARAM_INFO records say
# so). Windows are tried at every 16-byte offset.
WINDOW_ALIGN = 16


@dataclass
class LaunchUse:
    """A map found in a launch's arguments: the launch, the byte offset, the parameter index (None: packed). Found
    behind a pointer (--follow-pointers): `offset` and `parameter` are the pointer's, `delta` the map's distance
    past the address it holds."""

    launch: Launch
    offset: int
    parameter: int | None
    via: str = "value"  # or "pointer"
    pointer: int = 0
    delta: int = 0


@dataclass
class MapVerdict:
    raw: bytes
    spec: TensorMapSpec | Im2colSpec | None = None
    address: int = 0
    error: str = ""  # why the bytes do not decode (an encode the decoder cannot read)
    broken: list = field(default_factory=list)  # RuleError
    findings: list = field(default_factory=list)
    hazards: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    driver_written: bool = False
    encodes: list[Encode] = field(default_factory=list)
    replaces: list[Replace] = field(default_factory=list)
    launches: list[LaunchUse] = field(default_factory=list)
    agrees: bool | None = None  # the decoded spec is the encode call's arguments (None: not encoded, or unreadable)

    @property
    def libraries(self) -> list[str]:
        seen = [e.library for e in self.encodes] + [u.launch.library for u in self.launches]
        return sorted(set(seen))

    @property
    def launch_count(self) -> int:
        return sum(u.launch.count for u in self.launches)

    @property
    def rules(self) -> list[str]:
        return [e.rule for e in self.broken]


@dataclass
class Judgement:
    maps: dict[bytes, MapVerdict]
    launches: list[Launch]
    encodes: list[Encode]
    replaces: list[Replace]
    # launch index -> [(offset, why)]: the windows of a launch with no map in its arguments that look like one
    # (findings.near_miss: a null address, a few stray bits), the leads to where its maps are
    near_maps: dict[int, list[tuple[int, str]]] = field(default_factory=dict)

    def never_launched(self) -> list[MapVerdict]:
        return [m for m in self.maps.values() if (m.encodes or m.replaces) and not m.launches]

    def not_encoded(self) -> list[MapVerdict]:
        """Maps launched whose bytes no encode or replace seen wrote: edited on the host or by tensormap.replace,
        or built by an encoder the audit cannot see."""
        return [m for m in self.maps.values() if m.launches and not m.encodes and not m.replaces]

    def broken(self, rules=None) -> list[MapVerdict]:
        """Maps that break a rule (any, or one of `rules`)."""
        return [m for m in self.maps.values() if m.broken and (not rules or set(m.rules) & set(rules))]


def spec_from_encode(api: str, args: dict):
    """The spec an encode call's arguments describe (NumPy order), or None for a call drvtma cannot model
    (Blackwell's im2col-wide)."""
    if api.startswith("cuTensorMapEncodeIm2colWide"):
        return None
    dt = tma_dtype(args["tensorDataType"])
    strides = (dt.itemsize, *args["globalStrides"])
    common = dict(element_strides=tuple(reversed(args["elementStrides"])), interleave=args["interleave"],
                  swizzle=args["swizzle"], l2_promotion=args["l2Promotion"], oob_fill=args["oobFill"],
                  base_address=args["globalAddress"])
    shape, strides_bytes = tuple(reversed(args["globalDim"])), tuple(reversed(strides))
    if api.startswith("cuTensorMapEncodeIm2col"):
        return Im2colSpec(dt, shape, strides_bytes, tuple(reversed(args["pixelBoxLowerCorner"])),
                          tuple(reversed(args["pixelBoxUpperCorner"])), args["channelsPerPixel"],
                          args["pixelsPerColumn"], **common)
    return TensorMapSpec(dt, shape, strides_bytes, tuple(reversed(args["boxDim"])), **common)


def _agrees(a, b) -> bool:
    if isinstance(a, TensorMapSpec) and isinstance(b, TensorMapSpec):
        return same_map(a, b)
    return a is not None and type(a) is type(b) and a.tma_params() == b.tma_params() and \
        a.base_address == b.base_address


def hazards(spec) -> list[str]:
    """What a load through this map does at its edges that a kernel author may not expect (no rule is broken)."""
    if not isinstance(spec, TensorMapSpec):
        return []
    out = []
    for i, (n, b) in enumerate(zip(spec.shape, spec.box)):
        if n % b:
            out.append(f"ragged_edge: axis {i} has {n} elements, box {b}: the last box holds {n % b} and the "
                       f"rest is out-of-bounds fill ({'NaN' if spec.oob_fill else 'zeros'}); a store there clips")
    dense = spec.itemsize
    for i in range(spec.rank - 1, 0, -1):
        dense *= spec.shape[i]
        if spec.strides_bytes[i - 1] > dense:
            out.append(f"padded_rows: axis {i - 1} strides {spec.strides_bytes[i - 1]} B over {dense} B of data: "
                       "the map's dims end before the padding, so a box that crosses the edge is fill, not padding")
        dense = spec.strides_bytes[i - 1]
    inner = spec.box[-1] * spec.itemsize
    if inner < 16:
        out.append(f"narrow_inner_box: the innermost box row is {inner} B, under one 16-B transfer")
    for i, s in enumerate(spec.element_strides or ()):
        if s > 1:
            out.append(f"element_stride: axis {i} reads every {s}th element; the others are skipped")
    return out


def hints(spec) -> list[str]:
    """Where a consumer of this map is likely to pay."""
    if not isinstance(spec, (TensorMapSpec, Im2colSpec)):
        return []
    out = []
    inner = spec.box[-1] * spec.itemsize if isinstance(spec, TensorMapSpec) else spec.channels_per_pixel * \
        spec.itemsize
    if spec.swizzle == Swizzle.NONE and inner >= 128:
        out.append(f"no_swizzle: a {inner}-B inner box row without swizzle puts a column's elements in one bank: "
                   "wgmma and ldmatrix reads conflict; SWIZZLE_128B avoids it")
    if spec.l2_promotion == L2Promotion.NONE:
        out.append("no_l2_promotion: L2 promotion is off; L2_256B usually helps a streaming load")
    return out


def _verdict(raw: bytes) -> MapVerdict:
    v = MapVerdict(raw)
    try:
        report = explain(raw)
    except DrvtmaError as exc:
        v.error = str(exc)
        return v
    v.spec, v.address, v.broken, v.findings = report.spec, report.address, report.broken, report.findings
    v.hazards, v.hints = hazards(v.spec), hints(v.spec)
    v.driver_written = plausibility(raw).driver_written
    return v


def parameter_at(layout, offset: int) -> int | None:
    for i, (o, s) in enumerate(layout or ()):
        if o <= offset < o + s:
            return i
    return None


def _windows(arguments: bytes):
    """(offset, 128 bytes) of the 16-aligned windows of an argument buffer that are not all zero."""
    for o in range(0, len(arguments) - MAP_BYTES + 1, WINDOW_ALIGN):
        window = arguments[o:o + MAP_BYTES]
        if any(window):
            yield o, window


def map_windows(arguments: bytes, plausible=None) -> list[int]:
    """Offsets of the 16-aligned 128-byte windows of an argument buffer that plausibly hold a map."""
    check = plausible or (lambda w: plausibility(w).plausible)
    return [o for o, window in _windows(arguments) if check(window)]


def judge(events) -> Judgement:
    encodes = [e for e in events if isinstance(e, Encode)]
    replaces = [e for e in events if isinstance(e, Replace)]
    launches = [e for e in events if isinstance(e, Launch)]
    maps: dict[bytes, MapVerdict] = {}
    memo: dict[bytes, tuple[bool, str | None]] = {}

    def look(window: bytes) -> tuple[bool, str | None]:  # (a plausible map, else why it looks like one or None)
        if window not in memo:
            memo[window] = map_or_lead(window)
        return memo[window]

    def verdict(raw: bytes) -> MapVerdict:
        if raw not in maps:
            maps[raw] = _verdict(raw)
        return maps[raw]

    for e in encodes:
        if e.map_bytes is not None:
            v = verdict(e.map_bytes)
            v.encodes.append(e)
            try:
                ok = _agrees(v.spec, spec_from_encode(e.api, e.args))
            except DrvtmaError:
                ok = False
            v.agrees = ok if v.agrees is None else (v.agrees and ok)
    for r in replaces:
        if r.map_bytes is not None:
            verdict(r.map_bytes).replaces.append(r)
    near: dict[int, list[tuple[int, str]]] = {}
    for i, launch in enumerate(launches):
        if launch.arguments:
            looked = [(o, window, look(window)) for o, window in _windows(launch.arguments)]
            for o, window, (is_map, _) in looked:
                if is_map:
                    verdict(window).launches.append(LaunchUse(launch, o, parameter_at(launch.layout, o)))
            near[i] = [(o, why) for o, _, (_, why) in looked if why]
        for b in launch.behind or ():
            raw = bytes.fromhex(b["map"])
            if b.get("near"):  # a map-like window behind a pointer with no map: a lead, not a map
                near.setdefault(i, []).append((b["offset"], f"{b['delta']} B past the pointer there: {b['near']}"))
            elif look(raw)[0]:  # the reader kept plausible windows only; a replayed stream is checked again
                verdict(raw).launches.append(LaunchUse(launch, b["offset"], parameter_at(launch.layout, b["offset"]),
                                                       "pointer", b["pointer"], b["delta"]))
    found = {id(u.launch) for v in maps.values() for u in v.launches}  # leads only where no map was found
    return Judgement(maps, launches, encodes, replaces,
                     {i: w for i, w in near.items() if w and id(launches[i]) not in found})
