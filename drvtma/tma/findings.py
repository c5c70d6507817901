"""A tensor map from anywhere (Triton, CUTLASS, cuda.core, a dump), explained: the rules its spec breaks, each with
its fix, and *findings*: what the bytes show that is not an error of the spec (a known driver defect patched by
hand, words edited on the device). Tiled and im2col maps alike (the mode bit says which decoder reads them). No GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RuleError
from .decode import UNKNOWN_LAYOUT, decode, derived_words, fields, map_bytes
from .im2col_decode import decode_im2col, im2col_derived_words
from .im2col_rules import validate_im2col
from .im2col_spec import Im2colSpec
from .rules import validate_all
from .spec import TensorMapSpec, contiguous_strides_bytes

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
    broken: list[RuleError]
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
    if f.im2col:
        spec, address = decode_im2col(raw)
        return MapReport(spec, address, validate_im2col(spec), map_findings(f, spec))
    spec, address = decode(raw)
    return MapReport(spec, address, validate_all(spec), map_findings(f, spec))


def _dense(spec: TensorMapSpec) -> bool:
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
    box_bytes, marker = im2col_derived_words(spec) if f.im2col else derived_words(spec)
    if (f.derived_box_bytes, f.derived_swizzle) != (box_bytes, marker):
        out.append(Finding(
            "derived_words_differ",
            f"the derived words differ from the driver's (box bytes {f.derived_box_bytes} vs {box_bytes}, swizzle "
            f"marker 0x{f.derived_swizzle:x} vs 0x{marker:x}): edited on the device or built from zeros",
            "loads do not read them; nothing to fix for TMA on sm_90"))
    return out
