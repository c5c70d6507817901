"""The 13 element types a Hopper (sm_90) tensor map takes, and Blackwell's 3 packed ones, with their NumPy carriers.

Every type has a carrier (`numpy`: the raw bits, e.g. uint16 for bfloat16) that the oracles compute on, and a value
type (`values`: what users see, ml_dtypes.bfloat16 for bfloat16, float32 for tf32). The packed types 13-15
(`PACKED_DTYPES`, sm_100a / sm_120a: rule `needs_subbyte_maps`) count 4- or 6-bit values: `bits` per value in global
memory, `smem_bits` per value in shared memory (the 16U4_ALIGN16B / 16U6_ALIGN16B gaps); their `itemsize` is 1, the
innermost stride a spec writes for them (the driver never sees it). fp8 (e4m3, e5m2) has no map
type of its own on sm_90: it travels in uint8 maps, its values as ml_dtypes' float8 types. A tiled load copies bytes
for every type but the two tf32 ones, which it rounds (`drvtma.tma.tiled.oracle.tma_load_convert`).

int8 and int16 have no map type either (the driver has UINT8 and UINT16 only). They are accepted as `INT8` / `INT16`,
signed views of those map types: the map is UINT8 / UINT16 (`map_type`; CUTLASS loads int8 the same way), loads and
stores copy the bytes unchanged (TMA never interprets the sign), and the view keeps the name and the int8 / int16
values, so `describe()` says what the map is and the oracles' elements read as the signed values.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import TensorMapError, is_int

# Fill written for out-of-bounds elements under OOB_FILL_NAN_REQUEST_ZERO_FMA, as a repeating 16-bit pattern: the
# same for every float type, unrounded for tf32 though it is a NaN (docs/tensormap.md, "Seen on the H200"; pinned
# by test_probe_gpu.py).
NAN_FILL_HALFWORD = 0x7FF7


@dataclass(frozen=True, eq=False)
class TmaDtype:
    """One CUtensorMapDataType: its enum value, size, NumPy carrier and whether NaN fill is allowed.

    Two TmaDtypes are equal when the driver sees one type (the same enum): a signed view (INT8 on a UINT8 map) finds
    every table keyed by its map type, and its specs equal the ones decoded from their own encoded bytes."""

    name: str
    enum: int
    itemsize: int
    numpy: np.dtype  # the carrier: bf16 and tf32 travel as raw bits in an unsigned type
    is_float: bool
    values: np.dtype  # what the bits mean: ml_dtypes.bfloat16 for bf16, float32 for tf32, else the carrier
    bits: int = 0  # packed types only: bits per value in global memory (0: itemsize * 8)
    smem_bits: int = 0  # packed types only: bits per value in shared memory, gaps included

    @property
    def packed(self) -> bool:
        """One of Blackwell's packed sub-byte map types (13-15)."""
        return self.bits != 0

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other) -> bool:
        if not isinstance(other, TmaDtype):
            return NotImplemented
        return self.enum == other.enum

    def __hash__(self) -> int:
        return hash(self.enum)

    @property
    def map_type(self) -> TmaDtype:
        """The type the driver is given: UINT8 for the int8 view, UINT16 for int16, else this type itself."""
        return _BY_ENUM[self.enum]

    @property
    def is_view(self) -> bool:
        """A name with no map type of its own (int8, int16), carried unchanged in `map_type`'s map."""
        return self.name != self.map_type.name

    def nan_fill_bytes(self) -> bytes:
        """The bytes one NaN-filled element holds (little-endian); only floating types have one."""
        if not self.is_float:
            raise ValueError(f"{self.name} is not a floating type: it has no NaN fill")
        return NAN_FILL_HALFWORD.to_bytes(2, "little") * (self.itemsize // 2)

    def as_values(self, carrier) -> np.ndarray:
        """The carrier's bits seen as values (a view, no copy): bf16 bits as ml_dtypes.bfloat16, and so on."""
        return np.asarray(carrier).view(self.values)


def _d(name, enum, itemsize, numpy, is_float, values=None) -> TmaDtype:
    return TmaDtype(name, enum, itemsize, np.dtype(numpy), is_float, np.dtype(numpy if values is None else values))


UINT8 = _d("uint8", 0, 1, np.uint8, False)
UINT16 = _d("uint16", 1, 2, np.uint16, False)
UINT32 = _d("uint32", 2, 4, np.uint32, False)
INT32 = _d("int32", 3, 4, np.int32, False)
UINT64 = _d("uint64", 4, 8, np.uint64, False)
INT64 = _d("int64", 5, 8, np.int64, False)
FLOAT16 = _d("float16", 6, 2, np.float16, True)
FLOAT32 = _d("float32", 7, 4, np.float32, True)
FLOAT64 = _d("float64", 8, 8, np.float64, True)
BFLOAT16 = _d("bfloat16", 9, 2, np.uint16, True, ml_dtypes.bfloat16)
FLOAT32_FTZ = _d("float32_ftz", 10, 4, np.float32, True)  # loads keep denormals
TFLOAT32 = _d("tfloat32", 11, 4, np.uint32, True, np.float32)
TFLOAT32_FTZ = _d("tfloat32_ftz", 12, 4, np.uint32, True, np.float32)

ALL_DTYPES: tuple[TmaDtype, ...] = (UINT8, UINT16, UINT32, INT32, UINT64, INT64, FLOAT16, FLOAT32, FLOAT64,
                                    BFLOAT16, FLOAT32_FTZ, TFLOAT32, TFLOAT32_FTZ)
FLOAT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_float)
TF32_DTYPES = (TFLOAT32, TFLOAT32_FTZ)  # loads round these to tf32 (and flush nothing, FTZ or not)
TF32_OF = {FLOAT32: TFLOAT32, FLOAT32_FTZ: TFLOAT32_FTZ}  # a float32 type and its tf32 twin (same element bytes)
F32_OF = {tf32: f32 for f32, tf32 in TF32_OF.items()}

# Element type -> its PTX code, in tensormap.replace (`maps.replace`) and in the map's bytes (`tiled.decode`): PTX
# ISA, Table "Tensormap new_val validity" (sm_90 part).
PTX_ELEMTYPE = {UINT8: 0, UINT16: 1, UINT32: 2, INT32: 3, UINT64: 4, INT64: 5, FLOAT16: 6, FLOAT32: 7,
                FLOAT32_FTZ: 8, FLOAT64: 9, BFLOAT16: 10, TFLOAT32: 11, TFLOAT32_FTZ: 12}
DTYPE_OF_PTX_ELEMTYPE = {code: dt for dt, code in PTX_ELEMTYPE.items()}

# Blackwell's packed types (CUtensorMapDataType 13-15): 16 values of 4 or 6 bits, packed in global memory; in
# shared memory 16U4_ALIGN8B stays packed, 16U4_ALIGN16B leaves 8 B gaps after every 8 B and 16U6_ALIGN16B 4 B
# after every 12 B (driver API docs, CUtensorMapDataType). A Hopper driver refuses them.
U4_ALIGN8B = TmaDtype("16u4_align8b", 13, 1, np.dtype(np.uint8), False, np.dtype(np.uint8), 4, 4)
U4_ALIGN16B = TmaDtype("16u4_align16b", 14, 1, np.dtype(np.uint8), False, np.dtype(np.uint8), 4, 8)
U6_ALIGN16B = TmaDtype("16u6_align16b", 15, 1, np.dtype(np.uint8), False, np.dtype(np.uint8), 6, 8)
PACKED_DTYPES = (U4_ALIGN8B, U4_ALIGN16B, U6_ALIGN16B)

# Signed views (no map type of their own): a UINT8 / UINT16 map, int8 / int16 values. Not in ALL_DTYPES, which lists
# the driver's types once each.
INT8 = _d("int8", UINT8.enum, 1, np.int8, False)
INT16 = _d("int16", UINT16.enum, 2, np.int16, False)
SIGNED_VIEWS = (INT8, INT16)

_BY_NAME = {d.name: d for d in ALL_DTYPES + PACKED_DTYPES + SIGNED_VIEWS}
# Other names users reach for that have no tensor-map type of their own: the bits travel unchanged.
_ALIASES = {
    "i8": INT8, "i16": INT16, "bool": UINT8, "float8_e4m3": UINT8, "float8_e5m2": UINT8, "fp8": UINT8, "e4m3": UINT8,
    "e5m2": UINT8, "bf16": BFLOAT16, "fp16": FLOAT16, "half": FLOAT16, "f16": FLOAT16,
    "fp32": FLOAT32, "f32": FLOAT32, "fp64": FLOAT64, "f64": FLOAT64, "double": FLOAT64,
    "tf32": TFLOAT32, "u8": UINT8, "u16": UINT16, "u32": UINT32, "u64": UINT64, "i32": INT32, "i64": INT64,
}
_BY_ENUM = {d.enum: d for d in ALL_DTYPES + PACKED_DTYPES}
_BY_NUMPY = {np.dtype(np.uint8): UINT8, np.dtype(np.int8): INT8, np.dtype(np.bool_): UINT8,
             np.dtype(np.uint16): UINT16, np.dtype(np.int16): INT16, np.dtype(np.uint32): UINT32,
             np.dtype(np.int32): INT32, np.dtype(np.uint64): UINT64, np.dtype(np.int64): INT64,
             np.dtype(np.float16): FLOAT16, np.dtype(np.float32): FLOAT32, np.dtype(np.float64): FLOAT64,
             np.dtype(ml_dtypes.bfloat16): BFLOAT16}
# fp8 (every 1-byte float ml_dtypes knows) travels in uint8 maps; its values are these ml_dtypes types.
FP8_VALUES = frozenset(np.dtype(getattr(ml_dtypes, n)) for n in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e3m4", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e4m3b11fnuz", "float8_e8m0fnu") if hasattr(ml_dtypes, n))
# Sub-byte types: Blackwell's packed map types (16U4, 16U6) carry them; a Hopper map has none.
SUB_BYTE_NAMES = ("int4", "uint4", "int2", "uint2", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn")


def tma_dtype(value) -> TmaDtype:
    """A TmaDtype from a TmaDtype, a name ("bf16", "float32", "16u4_align8b"), a NumPy dtype/type, or an enum value
    0..15 (13-15: Blackwell's packed types; the validator refuses them for an sm_90 target)."""
    if isinstance(value, TmaDtype):
        return value
    if value is None or isinstance(value, (bool, np.bool_, float)):  # np.dtype(None) would be float64
        names = ", ".join(d.name for d in ALL_DTYPES)
        raise TensorMapError("enum", "dtype", value, f"name the element type: one of {names}",
                             f"{type(value).__name__} is not a dtype")
    if is_int(value):
        if int(value) in _BY_ENUM:
            return _BY_ENUM[int(value)]
        raise TensorMapError("enum", "dtype", int(value), "use a tensor-map data type 0..15",
                             f"{int(value)} is not a tensor-map data type")
    if isinstance(value, str):
        key = value.lower().removeprefix("cu_tensor_map_data_type_")
        if key in _BY_NAME:
            return _BY_NAME[key]
        if key in _ALIASES:
            return _ALIASES[key]
    try:
        np_dtype = np.dtype(value)
    except (TypeError, ValueError):
        np_dtype = None
    if np_dtype is not None and np_dtype.newbyteorder("=") in _BY_NUMPY and np_dtype.isnative:
        return _BY_NUMPY[np_dtype.newbyteorder("=")]
    if np_dtype in FP8_VALUES:
        return UINT8
    if np_dtype is not None and np_dtype.name in SUB_BYTE_NAMES:
        raise TensorMapError("enum", "dtype", np_dtype.name, "unpack it to 8-bit elements (or load it as bytes "
                             "with dtype='uint8'); on Blackwell name a packed type: dtype='16u4_align8b'",
                             "sub-byte types travel in Blackwell's packed map types, which name the packing")
    if np_dtype is not None and np_dtype.kind == "V" and np_dtype.names is None:
        raise TensorMapError("enum", "dtype", str(np_dtype), "name the type: dtype='bfloat16' (or 'uint8' for fp8)",
                             f"{np_dtype.itemsize} raw bytes: the CUDA Array Interface cannot say bf16 or fp8; "
                             "DLPack can, so hand the array over by __dlpack__ if it has one")
    names = ", ".join(d.name for d in ALL_DTYPES)
    raise TensorMapError("enum", "dtype", value, f"use one of {names} (fp8 travels as uint8)",
                         "no tensor-map data type has this name")
