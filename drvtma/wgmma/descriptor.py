"""The 64-bit wgmma shared-memory matrix descriptor: fields, encode / decode, describe, swizzle codes.

Layout (PTX ISA 9.0, "Matrix Descriptor Format"): bits 0-13 start address, 16-29 leading byte
offset (LBO), 32-45 stride byte offset (SBO), each stored as ``(x & 0x3FFFF) >> 4``; bits 49-51 base offset;
bits 62-63 the swizzle ("layout type"). Every other bit is reserved (0 on sm_90).

The wgmma swizzle codes are not `CUtensorMapSwizzle`'s: TMA 0/1/2/3 = none/32B/64B/128B, wgmma 0/3/2/1.
`from_tma_swizzle` / `to_tma_swizzle` are the one place that converts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum

from ..errors import WgmmaError, as_int, is_int
from ..tma.tiled.spec import Swizzle

FIELD_BITS = 14
FIELD_LIMIT = 1 << (FIELD_BITS + 4)  # 256 KiB: the largest byte value a 14-bit field of 16-byte units holds
_RESERVED_MASK = ~((0x3FFF) | (0x3FFF << 16) | (0x3FFF << 32) | (0x7 << 49) | (0x3 << 62)) & ((1 << 64) - 1)


class WgmmaSwizzle(IntEnum):
    """Bits 62-63 of a wgmma descriptor."""

    NONE = 0
    B128 = 1
    B64 = 2
    B32 = 3


SPAN_BYTES = {WgmmaSwizzle.NONE: 16, WgmmaSwizzle.B32: 32, WgmmaSwizzle.B64: 64, WgmmaSwizzle.B128: 128}
_TMA_TO_WGMMA = {Swizzle.NONE: WgmmaSwizzle.NONE, Swizzle.B32: WgmmaSwizzle.B32, Swizzle.B64: WgmmaSwizzle.B64,
                 Swizzle.B128: WgmmaSwizzle.B128}
_WGMMA_TO_TMA = {v: k for k, v in _TMA_TO_WGMMA.items()}


def from_tma_swizzle(tma_swizzle) -> WgmmaSwizzle:
    """The wgmma code for a `CUtensorMapSwizzle` (0/1/2/3 = none/32B/64B/128B -> 0/3/2/1)."""
    try:
        if isinstance(tma_swizzle, str):
            return _TMA_TO_WGMMA[Swizzle.__members__[{"NONE": "NONE", "32B": "B32", "64B": "B64", "128B": "B128"}
                                                     .get(tma_swizzle.strip().upper(), tma_swizzle)]]
        if not is_int(tma_swizzle):
            raise ValueError
        return _TMA_TO_WGMMA[Swizzle(int(tma_swizzle))]
    except (ValueError, KeyError):
        raise WgmmaError("swizzle_code", "tma_swizzle", tma_swizzle, "use a TMA swizzle 0..3 (none, 32B, 64B, 128B)",
                         "wgmma has no layout for this tensor-map swizzle") from None


def to_tma_swizzle(code) -> Swizzle:
    """The `CUtensorMapSwizzle` whose shared-memory image a wgmma swizzle code reads."""
    return _WGMMA_TO_TMA[wgmma_swizzle(code)]


def wgmma_swizzle(value) -> WgmmaSwizzle:
    """A WgmmaSwizzle from a member, a code 0..3 or a name ("128B", "none")."""
    if isinstance(value, WgmmaSwizzle):
        return value
    if isinstance(value, str):
        key = value.strip().upper().replace("SWIZZLE_", "")
        key = {"128B": "B128", "64B": "B64", "32B": "B32", "INTERLEAVE": "NONE", "0": "NONE"}.get(key, key)
        if key in WgmmaSwizzle.__members__:
            return WgmmaSwizzle[key]
    elif is_int(value) and 0 <= value <= 3:
        return WgmmaSwizzle(int(value))
    raise WgmmaError("swizzle_code", "swizzle", value, "use 0 (none), 1 (128B), 2 (64B) or 3 (32B)",
                     "bits 62-63 hold one of four layouts")


def _encode_field(name: str, value: int) -> int:
    if value < 0 or value >= FIELD_LIMIT:
        raise WgmmaError("field_range", name, value, f"use 0 <= {name} < {FIELD_LIMIT} B (14 bits of 16-B units)",
                         "the field holds (x & 0x3FFFF) >> 4")
    if value % 16:
        raise WgmmaError("field_alignment", name, value,
                         f"use a multiple of 16 B ({value // 16 * 16} or {value // 16 * 16 + 16})",
                         "the encoding drops the low 4 bits, so the hardware would read elsewhere")
    return value >> 4


@dataclass(frozen=True)
class SmemDescriptor:
    """A wgmma shared-memory descriptor in bytes: start address (shared window), LBO, SBO, base offset, swizzle."""

    start: int
    lbo: int
    sbo: int
    swizzle: WgmmaSwizzle = WgmmaSwizzle.NONE
    base_offset: int = 0

    def __post_init__(self):
        # NumPy integers are integers; bool, float and text are not (ranges are encode's: describe shows any int)
        for name in ("start", "lbo", "sbo", "base_offset"):
            object.__setattr__(self, name, as_int(getattr(self, name), name, error=WgmmaError, rule="field_type"))
        object.__setattr__(self, "swizzle", wgmma_swizzle(self.swizzle))

    @property
    def span(self) -> int:
        """Bytes of one swizzle row (16 for no swizzle: one core-matrix row)."""
        return SPAN_BYTES[self.swizzle]

    def encode(self) -> int:
        """The 64-bit value; fields that do not fit or are not 16-B multiples are refused by name."""
        if not 0 <= self.base_offset <= 7:
            raise WgmmaError("base_offset_range", "base_offset", self.base_offset, "use 0..7", "a 3-bit field")
        return (_encode_field("start", self.start) | _encode_field("lbo", self.lbo) << 16
                | _encode_field("sbo", self.sbo) << 32 | self.base_offset << 49 | int(self.swizzle) << 62)

    @classmethod
    def decode(cls, value: int) -> SmemDescriptor:
        """Fields of a 64-bit value (an int or hex text); set reserved bits are refused (a tcgen05 descriptor sets
        bit 46)."""
        value = as_int(value, "descriptor", error=WgmmaError, rule="field_range", lo=0, hi=(1 << 64) - 1, text=True,
                       fix="give a 64-bit unsigned value (an int, or hex text such as 0x4000004000010040)")
        if value & _RESERVED_MASK:
            bits = [b for b in range(64) if value >> b & 1 and _RESERVED_MASK >> b & 1]
            raise WgmmaError("reserved_bits", "descriptor", hex(value), "clear bits " + ", ".join(map(str, bits)),
                             "reserved on sm_90 (a Blackwell tcgen05 descriptor sets bit 46)")
        return cls(start=(value & 0x3FFF) << 4, lbo=(value >> 16 & 0x3FFF) << 4, sbo=(value >> 32 & 0x3FFF) << 4,
                   swizzle=WgmmaSwizzle(value >> 62 & 3), base_offset=value >> 49 & 7)

    def replace(self, **changes) -> SmemDescriptor:
        return replace(self, **changes)

    def advanced(self, nbytes: int) -> SmemDescriptor:
        """The same descriptor with the start moved by `nbytes` (a k-step)."""
        return replace(self, start=self.start + as_int(nbytes, "nbytes", error=WgmmaError, rule="field_type"))

    def describe(self) -> str:
        """Fields in bytes and encoded units, and the 64-bit value."""
        try:
            value = f"0x{self.encode():016x}"
        except WgmmaError as exc:
            value = f"not encodable ({exc.rule})"
        name = self.swizzle.name.lower().replace("b", "") + ("B" if self.swizzle else "")
        return (f"descriptor {value}: start 0x{self.start:05x} ({self.start} B, enc {self.start >> 4}), "
                f"LBO {self.lbo} B (enc {self.lbo >> 4}), SBO {self.sbo} B (enc {self.sbo >> 4}), "
                f"base_offset {self.base_offset}, swizzle {int(self.swizzle)} = {name} "
                f"(TMA {to_tma_swizzle(self.swizzle).name})")
