"""A tensor map from anywhere (Triton, CUTLASS, cuda.core, a dump), explained: the rules its spec breaks, each with
its fix, and *findings*: what the bytes show that is not an error of the spec (a known driver defect patched by
hand, words edited on the device). Tiled and im2col maps alike (the mode bit says which decoder reads them). No GPU.

`plausibility(obj)` says whether 128 bytes could be a map at all before anything reports them as one (a scan of a
kernel's parameters finds many 128-byte windows): a non-null address, fields that decode, no rule the driver
enforces broken, and every bit but the derived words (which device edits leave stale) exactly where the host
encoder, checked byte for byte against the driver's corpora, puts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ...errors import TensorMapError
from ..im2col.decode import decode_im2col, encode_im2col_bytes, im2col_derived_words
from ..im2col.rules import IM2COL_DRIVER_RULES, validate_im2col
from ..im2col.spec import Im2colSpec
from ..tiled.decode import (
    ADDRESS,
    DERIVED_BOX_BYTES,
    DERIVED_SWIZZLE,
    SMALL_TENSOR_BIT,
    SWIZZLE_ATOMICITY_BIT,
    UNKNOWN_LAYOUT,
    decode,
    derived_words,
    encode_bytes,
    fields,
    map_bytes,
    mask,
)
from ..tiled.rules import validate_all
from ..tiled.spec import DRIVER_RULES, MapGeometry, TensorMapSpec, contiguous_strides_bytes

SMALL_TENSOR_BYTES = 128 * 1024  # the defect hit maps of non-dense tensors under 128 KiB


@dataclass(frozen=True)
class Finding:
    """Something the bytes show that breaks no rule: `name` (stable, for scripts), what it means, what to do."""

    name: str
    summary: str
    advice: str

    def __str__(self) -> str:
        return f"{self.name}: {self.summary}; {self.advice}"


@dataclass(frozen=True)
class MapReport:
    spec: TensorMapSpec | Im2colSpec
    address: int
    broken: list[TensorMapError]
    findings: list[Finding]

    @property
    def mode(self) -> str:
        return "im2col" if isinstance(self.spec, Im2colSpec) else "tiled"

    def lines(self) -> list[str]:
        out = [f"tensor map at global 0x{self.address:x}, {self.mode} mode", self.spec.describe(),
               "rules broken: " + ("none" if not self.broken else "")]
        out += [f"  {e}" for e in self.broken]
        out.append("findings: " + ("none" if not self.findings else ""))
        out += [f"  {f}" for f in self.findings]
        return out


def explain(obj) -> MapReport:
    """decode + every rule + the findings, for bytes, hex, a NumPy / torch / CuPy buffer of 128 bytes, a drvtma
    TensorMap or a cuda.core TensorMapDescriptor (decode.map_bytes reads them all)."""
    raw = map_bytes(obj)  # once: a torch / CuPy buffer is copied to the host here
    f = fields(raw)
    spec: TensorMapSpec | Im2colSpec
    if f.im2col:
        spec, address = decode_im2col(raw)
        return MapReport(spec, address, validate_im2col(spec), map_findings(f, spec))
    spec, address = decode(raw)
    return MapReport(spec, address, validate_all(spec), map_findings(f, spec))


def _dense(spec: MapGeometry) -> bool:
    return tuple(spec.strides_bytes) == contiguous_strides_bytes(spec.shape, spec.itemsize)


def map_findings(f, spec: TensorMapSpec | Im2colSpec) -> list[Finding]:
    """The findings of a decoded map (`f`: decode.fields of the same bytes)."""
    out = []
    if f.small_tensor_bit:
        pattern = not _dense(spec) and spec.extent_bytes < SMALL_TENSOR_BYTES
        out.append(Finding(
            "oob_address_generation_bit85",
            "bit 85 (qword 1 bit 21, byte 10 bit 5) is set: the out-of-bounds address-generation mode a Blackwell "
            "driver wrongly chose for maps of non-dense tensors under 128 KiB (driver 595.71.05's release notes; "
            "CUTLASS 4.3.4 and Triton clear the bit by hand on affected drivers). "
            + ("This map is such a tensor" if pattern else "This map is not such a tensor (dense, or 128 KiB "
               "or more)") + "; no sm_90 driver map seen sets it, and on the H200 (driver 580) setting it changed "
            "no loads",
            "on Blackwell with an affected driver clear it (raw[10] &= ~0x20), as those toolchains do; on Hopper it is "
            "harmless, but a map built by the sm_90 driver should not have it: check what wrote the bytes"))
    if f.swizzle_atomicity_bit:
        out.append(Finding("bit86_set", "bit 86 is set: no sm_90 driver map seen has it (tensormap.replace."
                           "swizzle_mode clears it); on Blackwell it may belong to a swizzle atom: "
                           + UNKNOWN_LAYOUT["swizzle atoms"], "check what wrote the bytes; re-encode the map to be "
                           "sure"))
    # f and spec are of one map: f.im2col says which spec decode made
    box_bytes, marker = (im2col_derived_words(cast(Im2colSpec, spec)) if f.im2col
                         else derived_words(cast(TensorMapSpec, spec)))
    if (f.derived_box_bytes, f.derived_swizzle) != (box_bytes, marker):
        out.append(Finding(
            "derived_words_differ",
            f"the derived words differ from the driver's (box bytes {f.derived_box_bytes} vs {box_bytes}, swizzle "
            f"marker 0x{f.derived_swizzle:x} vs 0x{marker:x}): edited on the device or built from zeros",
            "loads do not read them; nothing to fix for TMA on sm_90"))
    return out


# Bits a real map may hold other than the host encoding: the derived words (stale after tensormap.replace) and the
# two Blackwell bits (findings above)
_LOOSE_BITS = mask(DERIVED_BOX_BYTES) | mask(DERIVED_SWIZZLE) | mask(SMALL_TENSOR_BIT) | mask(SWIZZLE_ATOMICITY_BIT)


@dataclass(frozen=True)
class Plausibility:
    """`plausible`: the bytes can be a map (a driver's, or one edited since); `driver_written`: they are exactly
    what the driver writes for their own decoded spec; `reasons`: why not, one line each."""

    plausible: bool
    driver_written: bool
    reasons: tuple[str, ...] = ()


def _examine(obj) -> tuple:
    """(raw, spec, address, reasons the driver would refuse it, stray bits: where the host encoding of its own
    decoded spec differs outside the loose bits); spec None with the decode's reason when the bytes do not decode."""
    try:
        raw = map_bytes(obj)
        f = fields(raw)
        spec, address = decode_im2col(raw) if f.im2col else decode(raw)
    except TensorMapError as exc:
        return None, None, 0, [str(exc)], 0
    driver_rules = IM2COL_DRIVER_RULES if f.im2col else DRIVER_RULES
    refused = [f"the driver refuses such a map: {e}" for e in _validate(spec) if e.rule in driver_rules]
    # (the address compared apart: a null one is encoded at a stand-in to compare the rest)
    stray = 0 if refused else (int.from_bytes(_host_bytes(spec, address or 1 << 20), "little")
                               ^ int.from_bytes(raw, "little")) & ~_LOOSE_BITS & ~mask(ADDRESS)
    return raw, spec, address, refused, stray


def _plausibility(raw, spec, address, refused, stray) -> Plausibility:
    if spec is None:
        return Plausibility(False, False, tuple(refused))
    reasons = ([] if address else ["null_address: a map's global address is never 0"]) + refused
    if stray and not reasons:
        reasons.append(f"stray_bits: {bin(stray).count('1')} bit(s) where the driver writes none for this spec "
                       f"(first at bit {(stray & -stray).bit_length() - 1})")
    exact = not reasons and raw == _host_bytes(spec, address)
    return Plausibility(not reasons, exact, tuple(reasons))


def plausibility(obj) -> Plausibility:
    """Whether `obj` (anything `decode.map_bytes` reads) could be a tensor map (see the module's docstring)."""
    return _plausibility(*_examine(obj))


NEAR_MISS_BITS = 4  # random words set dozens of the bits a driver leaves clear; a map edited by hand, a few


def _near(raw, spec, address, refused, stray) -> str | None:
    if spec is None or refused or not any(raw):
        return None
    bits = bin(stray).count("1")
    if not address and not bits:
        return "a map the driver would write but for its null address"
    if address and 0 < bits <= NEAR_MISS_BITS:
        return f"a map the driver would write but for {bits} bit(s) it leaves clear (first at bit " \
               f"{(stray & -stray).bit_length() - 1})"
    return None


def near_miss(obj) -> str | None:
    """Why 128 bytes that are no plausible map still look like one, or None: every field a map the driver would
    take, and only a null address (filled in later, on the device or by a copy?) or at most NEAR_MISS_BITS bits
    where the driver writes none. What the audit lists for a kernel that issues TMA with no map in its arguments."""
    return _near(*_examine(obj))


def map_or_lead(obj) -> tuple[bool, str | None]:
    """(whether `obj` is a plausible map, else why it looks like one (`near_miss`) or None), from one look at the
    bytes: a scan of parameters or device memory meets many windows, each costing a decode and the rules."""
    examined = _examine(obj)
    return (True, None) if _plausibility(*examined).plausible else (False, _near(*examined))


# A decoded spec's mode is its type (decode_im2col makes Im2colSpecs): isinstance says what f.im2col says, typed.
def _validate(spec: TensorMapSpec | Im2colSpec) -> list[TensorMapError]:
    return validate_im2col(spec) if isinstance(spec, Im2colSpec) else validate_all(spec)


def _host_bytes(spec: TensorMapSpec | Im2colSpec, address: int) -> bytes:
    return encode_im2col_bytes(spec, address) if isinstance(spec, Im2colSpec) else encode_bytes(spec, address)
