"""The operand types of wgmma.mma_async on sm_90a: K per instruction, allowed N, accumulator, NumPy carriers.

PTX ISA §9.7.15.2-.3: K is always 32 bytes of the operand type; f16/bf16 may be transposed
(MN-major); integer types allow N = 8, 16, 24, then steps of 16 from 32 [doc].
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import WgmmaError

M = 64  # every wgmma shape is m64
K_BYTES = 32  # one instruction's K extent, in bytes of the operand type
FLOAT_NS = tuple(range(8, 257, 8))
INT_NS = (8, 16, 24) + tuple(range(32, 257, 16))


@dataclass(frozen=True)
class WgmmaType:
    """One wgmma operand type: `carrier` holds its bits, `values` converts numbers to it (ml_dtypes)."""

    name: str
    itemsize: int
    tma_dtype: str  # the tensor-map type that loads it unchanged
    values: np.dtype  # NumPy/ml_dtypes type of the numbers (float32 for tf32: its low 13 bits are ignored)
    carrier: np.dtype  # unsigned int of itemsize
    accumulator: str  # "f32" or "s32"
    transposable: bool  # MN-major (imm-trans) allowed
    ns: tuple[int, ...]

    @property
    def k(self) -> int:
        return K_BYTES // self.itemsize

    @property
    def per_chunk(self) -> int:
        """Elements in one 16-byte chunk (the PTX ISA's T)."""
        return 16 // self.itemsize

    @property
    def is_int(self) -> bool:
        return self.accumulator == "s32"

    def to_bits(self, numbers) -> np.ndarray:
        """Numbers to raw bits (the carrier); tf32 keeps float32 bits (exact data has zero low bits)."""
        return np.asarray(numbers).astype(self.values).view(self.carrier)

    def from_bits(self, bits) -> np.ndarray:
        """Raw bits to float64 (or int64) numbers, as wgmma reads them (tf32: the low 13 bits dropped)."""
        b = np.asarray(bits).astype(self.carrier)
        if self.name == "tf32":
            b = b & np.uint32(0xFFFFE000)
        v = b.view(self.values)
        return v.astype(np.int64) if self.is_int else v.astype(np.float64)


def _t(name, itemsize, tma, values, acc, trans, ns) -> WgmmaType:
    carrier = {1: np.uint8, 2: np.uint16, 4: np.uint32}[itemsize]
    return WgmmaType(name, itemsize, tma, np.dtype(values), np.dtype(carrier), acc, trans, ns)


F16 = _t("f16", 2, "float16", np.float16, "f32", True, FLOAT_NS)
BF16 = _t("bf16", 2, "bfloat16", ml_dtypes.bfloat16, "f32", True, FLOAT_NS)
TF32 = _t("tf32", 4, "float32", np.float32, "f32", False, FLOAT_NS)
E4M3 = _t("e4m3", 1, "uint8", ml_dtypes.float8_e4m3fn, "f32", False, FLOAT_NS)
E5M2 = _t("e5m2", 1, "uint8", ml_dtypes.float8_e5m2, "f32", False, FLOAT_NS)
S8 = _t("s8", 1, "uint8", np.int8, "s32", False, INT_NS)
U8 = _t("u8", 1, "uint8", np.uint8, "s32", False, INT_NS)
ALL_TYPES = (F16, BF16, TF32, E4M3, E5M2, S8, U8)
_BY_NAME = {t.name: t for t in ALL_TYPES}
_ALIASES = {"float16": F16, "fp16": F16, "half": F16, "bfloat16": BF16, "tfloat32": TF32, "float8_e4m3": E4M3,
            "float8_e4m3fn": E4M3, "fp8": E4M3, "float8_e5m2": E5M2, "int8": S8, "uint8": U8}


def wgmma_type(value) -> WgmmaType:
    """A WgmmaType from a WgmmaType or a name ("bf16", "e4m3", "s8", ...)."""
    if isinstance(value, WgmmaType):
        return value
    key = str(value).lower()
    if key in _BY_NAME:
        return _BY_NAME[key]
    if key in _ALIASES:
        return _ALIASES[key]
    raise WgmmaError("dtype", "dtype", value, "use one of " + ", ".join(_BY_NAME),
                     "wgmma.mma_async on sm_90a takes these operand types (b1 is not modelled)")
