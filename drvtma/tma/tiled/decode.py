"""Read the 128 bytes of a tiled sm_90 CUtensorMap back into a TensorMapSpec and its global address.

The layout (docs/tensormap.md, "The 128 bytes": how it was found) is checked against a corpus of driver-encoded maps
(tests/data/tensormap_corpus.json.gz); it agrees with the bit operations ptxas emits for `tensormap.replace`.
Bits are numbered across the map as a little-endian 1024-bit integer. Dims, boxes and element strides hold
value - 1; strides hold bytes >> 4 in a 32-bit low part plus a 4-bit high part; the element type is PTX's own code
(not CUtensorMapDataType) with a separate tf32 flag. Two words the driver derives (the box's bytes and a swizzle
marker) are not needed to decode and are not rewritten by `tensormap.replace`; `fields()` reports them.

Blackwell's new fields: bits 85 and 86 (`SMALL_TENSOR_BIT`, `SWIZZLE_ATOMICITY_BIT`) are read from every map; where a
map stores the packed types 13-15 and the swizzle atoms is not known (`UNKNOWN_LAYOUT`, the one place that says so):
decode refuses such maps and `encode_bytes` such specs, naming what is unknown.

Bit 64 marks an im2col map: `decode` refuses it, naming `im2col.decode.decode_im2col`, which reads its own fields.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from ...compat import tensor_map_descriptor_bytes
from ...errors import TensorMapError
from ...errors import address as as_address
from ..dtypes import DTYPE_OF_PTX_ELEMTYPE, F32_OF, PTX_ELEMTYPE, TF32_DTYPES, TF32_OF
from .rules import address_error, validate_all
from .spec import (
    DRIVER_RULES,
    MAX_RANK,
    TENSOR_MAP_BYTES,
    Interleave,
    L2Promotion,
    MapGeometry,
    OobFill,
    Swizzle,
    TensorMapSpec,
)

# (bit offset, width) of each field; per-dimension fields list one entry per TMA dimension (fastest first).
ADDRESS = (0, 64)
RANK = (68, 3)  # rank - 1
ELEMTYPE = (71, 4)  # PTX code 0..10 (tf32 types: f32 / f32.ftz plus TF32_FLAG)
INTERLEAVE = (75, 2)
SWIZZLE = (77, 2)
OOB_FILL = (79, 1)
TF32_FLAG = (80, 1)  # loads round to tf32
L2_PROMOTION = (81, 2)
SMALL_TENSOR_BIT = (85, 1)  # Blackwell's small-tensor bit (CUTLASS and Triton clear it); 0 in every sm_90 map seen
SWIZZLE_ATOMICITY_BIT = (86, 1)  # cleared by tensormap.replace.swizzle_mode; 0 in every sm_90 map seen
STRIDE_LOW = tuple((96 + 32 * k, 32) for k in range(4))  # dims 1..4: (bytes >> 4) & 0xFFFFFFFF
STRIDE_HIGH = tuple((224 + 4 * k, 4) for k in range(4))  # dims 1..4: bytes >> 36
GLOBAL_DIM = tuple((256 + 32 * k, 32) for k in range(5))
ELEMENT_STRIDE = tuple((416 + 3 * k, 3) for k in range(5))
BOX_DIM = tuple((440 + 8 * k, 8) for k in range(5))
DERIVED_BOX_BYTES = (512, 32)  # driver: prod(floor(box / element stride)) * element size
DERIVED_SWIZZLE = (576, 64)  # driver: 0x10 without swizzle, 0x100 / 0x200 / 0x400 for 32 / 64 / 128 B
SWIZZLE_MARKER: dict[int, int] = {Swizzle.NONE: 0x10, Swizzle.B32: 0x100, Swizzle.B64: 0x200, Swizzle.B128: 0x400}
IM2COL_MODE = (64, 1)  # 1 in an im2col map, 0 in a tiled one (im2col.decode)

# What of a Blackwell map's bytes drvtma does not know: no Blackwell driver's map was seen (not yet run on a GPU).
UNKNOWN_LAYOUT = {
    "packed element types": "how a map stores CUtensorMapDataType 13-15: codes 11-15 of bits 71-74 hold nothing in "
                            "sm_90 maps (tf32 is f32 plus bit 80), and PTX's tensormap.replace codes for them "
                            "(.b4x16 13, .b4x16_p64 14, .b6x16_p32 15) need not be the stored ones",
    "swizzle atoms": "where CUtensorMapSwizzle 4-6 go: bits 77-78 hold 0-3 only; bit 86 (0 in every sm_90 map, "
                     "cleared by tensormap.replace.swizzle_mode) is the candidate, unconfirmed",
    "96B swizzle": "sm_103a's 96B swizzle: cuda-bindings 13.4's CUtensorMapSwizzle has no member for it",
}


_UNKNOWN_FIX = ("describe the map by its spec (TensorMapSpec with target=...): drvtma checks Blackwell's rules, not "
                "its bytes")


def unknown_layout(what: str, parameter: str, value, rule: str = "decode_unknown_layout",
                   detail: str = "") -> TensorMapError:
    """The refusal of a map field whose place in the 128 bytes is unknown (`UNKNOWN_LAYOUT[what]`)."""
    return TensorMapError(rule, parameter, value, _UNKNOWN_FIX, f"{detail}{what}: not known ({UNKNOWN_LAYOUT[what]})")

_ALL_FIELDS = [ADDRESS, RANK, ELEMTYPE, INTERLEAVE, SWIZZLE, OOB_FILL, TF32_FLAG, L2_PROMOTION, SMALL_TENSOR_BIT,
               SWIZZLE_ATOMICITY_BIT, *STRIDE_LOW, *STRIDE_HIGH, *GLOBAL_DIM, *ELEMENT_STRIDE, *BOX_DIM,
               DERIVED_BOX_BYTES, DERIVED_SWIZZLE]
KNOWN_BITS = 0
for _off, _width in _ALL_FIELDS:
    KNOWN_BITS |= ((1 << _width) - 1) << _off


def mask(where: tuple[int, int]) -> int:
    return ((1 << where[1]) - 1) << where[0]


def unknown_bits_error(unknown: int, mode: str, why: str = "") -> TensorMapError:
    """The refusal of bytes with bits set outside every field the sm_90 driver writes in a `mode` map."""
    bits = [i for i in range(1024) if (unknown >> i) & 1]
    return TensorMapError("decode_unknown_bits", "bits", bits[:16], f"decode {mode} sm_90 maps only",
                          f"bits outside every field the sm_90 driver writes in {'an' if mode[0] == 'i' else 'a'} "
                          f"{mode} map are set{why}")


def get(value: int, where: tuple[int, int]) -> int:
    off, width = where
    return (value >> off) & ((1 << width) - 1)


def put(value: int, where: tuple[int, int], x: int) -> int:
    """`value` with the field at `where` set to the low bits of x (as the hardware's bitfield insert does)."""
    m = mask(where)
    return (value & ~m) | ((int(x) << where[0]) & m)


def map_bytes(obj) -> bytes:
    """The 128 bytes of a TensorMap, a cuda.core TensorMapDescriptor, a cuda-python CUtensorMap, or bytes/hex."""
    if isinstance(obj, str):
        text = obj.strip().removeprefix("0x").replace(" ", "").replace("_", "")
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise TensorMapError("decode_hex", "bytes", obj[:40] + ("..." if len(obj) > 40 else ""),
                                 f"give {2 * TENSOR_MAP_BYTES} hex digits (one 0x prefix at most)",
                                 "not hex text: a digit that is not 0-9a-f, an odd count, or a second 0x") from None
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        raw = bytes(obj)
    elif hasattr(obj, "to_bytes") and callable(obj.to_bytes) and not isinstance(obj, (int, np.integer)):
        raw = obj.to_bytes()  # drvtma TensorMap
    elif type(obj).__name__ == "TensorMapDescriptor":
        raw = tensor_map_descriptor_bytes(obj, TENSOR_MAP_BYTES)
    elif hasattr(obj, "getPtr"):  # cuda.bindings CUtensorMap
        raw = ctypes.string_at(int(obj.getPtr()), TENSOR_MAP_BYTES)
    else:
        raw = _array_bytes(obj)
    if len(raw) != TENSOR_MAP_BYTES:
        raise TensorMapError("decode_size", "bytes", len(raw), f"give exactly {TENSOR_MAP_BYTES} bytes "
                             f"({2 * TENSOR_MAP_BYTES} hex digits)")
    return raw


def _array_bytes(obj) -> bytes:
    """Bytes from a sequence or array of values 0..255 (never truncated: 1.5 or 300 are refused)."""
    how = "give bytes, hex text, a drvtma TensorMap, a cuda.core TensorMapDescriptor or 128 values 0..255"
    if obj is None or isinstance(obj, (int, float, np.integer, np.floating)):
        raise TensorMapError("decode_type", "bytes", type(obj).__name__, how, "not the bytes of a map")
    try:
        arr = np.asarray(_on_host(obj))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TensorMapError("decode_type", "bytes", type(obj).__name__, how, str(exc)) from None
    if arr.dtype == np.uint8:
        return arr.tobytes()
    if arr.nbytes == TENSOR_MAP_BYTES and arr.size != TENSOR_MAP_BYTES and arr.dtype.kind in "iuV":
        return arr.tobytes()  # the map's memory held as wider words (16 uint64, 32 int32): its bytes as they lie
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < 0 or arr.max() > 255)):
        raise TensorMapError("decode_type", "bytes", f"{arr.dtype} array", how, "bytes are integers 0..255")
    return arr.astype(np.uint8).tobytes()


def _on_host(obj):
    """A device buffer's copy on the host, through its library's public API (CuPy's get(), torch's cpu())."""
    if hasattr(obj, "__cuda_array_interface__") and callable(getattr(obj, "get", None)):
        return obj.get()
    if callable(getattr(obj, "cpu", None)) and callable(getattr(obj, "detach", None)):
        return obj.detach().cpu().numpy()
    return obj


@dataclass(frozen=True)
class MapFields:
    """Every field of a tiled map as stored (TMA order, fastest first), before any interpretation."""

    address: int
    rank_code: int
    elemtype_code: int
    tf32: bool
    interleave: int
    swizzle: int
    oob_fill: int
    l2_promotion: int
    small_tensor_bit: int
    swizzle_atomicity_bit: int
    global_dim: tuple[int, ...]  # all 5 slots, actual values
    global_strides: tuple[int, ...]  # dims 1..4, bytes
    element_strides: tuple[int, ...]
    box_dim: tuple[int, ...]
    derived_box_bytes: int
    derived_swizzle: int
    unknown_bits: int  # bits outside every known tiled field (nonzero: not a map this decoder understands)
    im2col: bool = False  # the mode bit: an im2col map (im2col.decode reads its own fields)

    @property
    def rank(self) -> int:
        return self.rank_code + 1


def fields(obj) -> MapFields:
    """All stored fields of a map (see `MapFields`); `decode` turns them into a spec."""
    v = int.from_bytes(map_bytes(obj), "little")
    strides = tuple(((get(v, STRIDE_HIGH[k]) << 32) | get(v, STRIDE_LOW[k])) << 4 for k in range(4))
    return MapFields(
        address=get(v, ADDRESS), rank_code=get(v, RANK), elemtype_code=get(v, ELEMTYPE), tf32=bool(get(v, TF32_FLAG)),
        interleave=get(v, INTERLEAVE), swizzle=get(v, SWIZZLE), oob_fill=get(v, OOB_FILL),
        l2_promotion=get(v, L2_PROMOTION), small_tensor_bit=get(v, SMALL_TENSOR_BIT),
        swizzle_atomicity_bit=get(v, SWIZZLE_ATOMICITY_BIT),
        global_dim=tuple(get(v, f) + 1 for f in GLOBAL_DIM), global_strides=strides,
        element_strides=tuple(get(v, f) + 1 for f in ELEMENT_STRIDE), box_dim=tuple(get(v, f) + 1 for f in BOX_DIM),
        derived_box_bytes=get(v, DERIVED_BOX_BYTES), derived_swizzle=get(v, DERIVED_SWIZZLE),
        unknown_bits=v & ~KNOWN_BITS & ~mask(IM2COL_MODE), im2col=bool(get(v, IM2COL_MODE)))


def _dtype(f: MapFields):
    base = DTYPE_OF_PTX_ELEMTYPE.get(f.elemtype_code)
    if f.elemtype_code > 10:
        raise unknown_layout("packed element types", "element type", f.elemtype_code, "decode_elemtype",
                             "no sm_90 element type has this code; ")
    if base is None:
        raise TensorMapError("decode_elemtype", "element type", f.elemtype_code,
                             "a map stores PTX codes 0..10 (tf32 types as f32 / f32.ftz plus the tf32 flag)",
                             "no sm_90 element type has this code")
    if not f.tf32:
        return base
    tf32 = TF32_OF.get(base)
    if tf32 is None:
        raise TensorMapError("decode_elemtype", "tf32 flag", f"{base.name} + tf32",
                             "set the element type to f32 or f32.ftz, or clear the tf32 flag",
                             "the tf32 rounding flag is set on a type the driver never pairs it with "
                             "(tensormap.replace.elemtype 0..10 leaves the flag as it was)")
    return tf32


def _enum(value: int, enum):
    try:
        return enum(value)
    except ValueError:
        return value


def decode(obj) -> tuple[TensorMapSpec, int]:
    """(spec, address) of a tiled sm_90 map: bytes (or hex), a drvtma TensorMap, a cuda.core TensorMapDescriptor.

    The spec is in NumPy order with ``base_address`` set; it is not validated (`rules.validate_all` says what it
    breaks). Raises TensorMapError (rule ``decode_*``) for bytes no tiled sm_90 map holds.
    """
    f = fields(obj)
    if f.im2col:
        raise TensorMapError("decode_im2col_map", "mode", "im2col", "read it with drvtma.tma.im2col.decode."
                             "decode_im2col (or explain / `drvtma decode`, which read both modes)",
                             "bit 64 is set: an im2col map, whose box fields hold corners and counts")
    if f.unknown_bits:
        raise unknown_bits_error(f.unknown_bits, "tiled", " (an sm_100 map, or not a tensor map)")
    g = geometry(f)
    spec = TensorMapSpec(g["dtype"], g["shape"], g["strides_bytes"], tuple(reversed(f.box_dim[:f.rank])),
                         **{k: g[k] for k in _OPTIONS})
    return spec, f.address


_OPTIONS = ("element_strides", "interleave", "swizzle", "l2_promotion", "oob_fill", "base_address")


def geometry(f: MapFields) -> dict:
    """What a tiled and an im2col map store alike, as spec fields in NumPy order (the two decoders share it)."""
    r = f.rank
    if r > MAX_RANK:
        raise TensorMapError("decode_rank", "rank", r, "a map has rank 1..5", f"the rank field holds {f.rank_code}")
    dt = _dtype(f)
    strides = (dt.itemsize,) + f.global_strides[:r - 1]  # TMA order, dim 0 is the element itself
    return dict(dtype=dt, shape=tuple(reversed(f.global_dim[:r])), strides_bytes=tuple(reversed(strides)),
                element_strides=tuple(reversed(f.element_strides[:r])), interleave=_enum(f.interleave, Interleave),
                swizzle=_enum(f.swizzle, Swizzle), l2_promotion=_enum(f.l2_promotion, L2Promotion),
                oob_fill=_enum(f.oob_fill, OobFill), base_address=f.address)


def derived_words(spec: TensorMapSpec) -> tuple[int, int]:
    """What the driver writes in the two derived words for this spec (box bytes, swizzle marker)."""
    p = spec.tma_params()
    box_bytes = math.prod(b // e for b, e in zip(p.box_dim, p.element_strides)) * spec.itemsize
    return box_bytes, SWIZZLE_MARKER.get(spec.swizzle, 0)


def driver_checked_address(spec, kind: type[MapGeometry], validate, driver_rules, address: int | None) -> int:
    """The address a host-side encode writes `spec` at, once `spec` is a `kind` the driver would take (its rules
    among `validate(spec)`'s, the address rule): a spec the driver would refuse is refused here too."""
    if not isinstance(spec, kind):
        raise TensorMapError("type", "spec", type(spec).__name__, f"give a {kind.__name__}")
    address = spec.base_address if address is None else as_address(address, "address", error=TensorMapError)
    if address is None:
        raise TensorMapError("address_missing", "address", None, "give an address, or set the spec's base_address")
    broken = [e for e in validate(spec.replace(base_address=None)) if e.rule in driver_rules]
    broken += [e for e in [address_error(address, spec.interleave)] if e is not None]
    if broken:
        raise broken[0]
    return address


def encode_bytes(spec: TensorMapSpec, address: int | None = None) -> bytes:
    """The bytes the driver writes for a valid spec, computed on the host (the decoder's inverse; no driver call).

    Rank 1 stores no stride (the dummy stride drvtma passes the driver is dropped). A spec the driver would refuse
    (its rules: `rules.DRIVER_RULES`) is refused here too: its fields would not fit the bytes."""
    address = driver_checked_address(spec, TensorMapSpec, validate_all, DRIVER_RULES, address)
    p = spec.tma_params()
    v = shared_words(spec, p, address)
    for k in range(p.rank):
        v = put(v, BOX_DIM[k], p.box_dim[k] - 1)
    box_bytes, marker = derived_words(spec)
    v = put(v, DERIVED_BOX_BYTES, box_bytes)
    v = put(v, DERIVED_SWIZZLE, marker)
    return v.to_bytes(TENSOR_MAP_BYTES, "little")


def shared_words(spec, p, address: int) -> int:
    """The fields a tiled and an im2col map store alike (same bits in both modes), as the driver writes them."""
    if spec.dtype.bits:
        raise unknown_layout("packed element types", "dtype", spec.dtype.name)
    if spec.swizzle_span_bytes == 128 and spec.swizzle != Swizzle.B128:
        raise unknown_layout("swizzle atoms", "swizzle", spec.swizzle.name)
    dt = spec.dtype
    v = put(0, ADDRESS, address)
    v = put(v, RANK, p.rank - 1)
    v = put(v, ELEMTYPE, PTX_ELEMTYPE[F32_OF.get(dt, dt)])
    v = put(v, TF32_FLAG, int(dt in TF32_DTYPES))
    v = put(v, INTERLEAVE, p.interleave)
    v = put(v, SWIZZLE, p.swizzle)
    v = put(v, OOB_FILL, p.oob_fill)
    v = put(v, L2_PROMOTION, p.l2_promotion)
    for k, s in enumerate(p.global_strides[:p.rank - 1]):
        v = put(v, STRIDE_LOW[k], (s >> 4) & 0xFFFFFFFF)
        v = put(v, STRIDE_HIGH[k], s >> 36)
    for k in range(p.rank):
        v = put(v, GLOBAL_DIM[k], p.global_dim[k] - 1)
        v = put(v, ELEMENT_STRIDE[k], p.element_strides[k] - 1)
    return v


def same_map(a: TensorMapSpec, b: TensorMapSpec) -> bool:
    """Whether two specs make the same map: what the driver receives, and the address (drvtma's allow_* flags and
    the innermost stride, which the driver never sees, do not count)."""
    return a.dtype == b.dtype and a.tma_params() == b.tma_params() and a.base_address == b.base_address
