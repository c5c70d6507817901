"""The rules of TMA tensor stores and reductions, each a TensorMapError with a fix: which operation takes which
element type (the PTX ISA's table of cp.reduce.async.bulk.tensor, `REDUCE_DTYPES`), which maps a store takes, which
coordinates fault, and the 1-D bulk store's alignment. What a store writes is `oracle`; random cases are `cases`."""

from __future__ import annotations

import math
import warnings

from ...errors import StoreStraddleWarning, TensorMapError, as_int
from ..dtypes import (
    BFLOAT16,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    INT32,
    INT64,
    UINT8,
    UINT16,
    UINT32,
    UINT64,
    TmaDtype,
    tma_dtype,
)
from ..tiled.oracle import check_load_coordinates
from ..tiled.rules import round_up
from ..tiled.spec import Interleave, TensorMapSpec

STORE = "store"
REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")  # index = op number in copy.cuh
OP_CODES = {STORE: -1, **{name: i for i, name in enumerate(REDUCE_OPS)}}

# PTX ISA, cp.reduce.async.bulk.tensor, "valid combinations of .redOp and element type" [doc]:
#   .add u32 s32 u64 f32 f16 bf16 | .min .max u32 s32 u64 s64 f16 bf16 | .inc .dec u32 | .and .or .xor b32 b64.
# b32/b64 are taken to mean the 32/64-bit integer map types. Not listed, so refused: add on s64 (use a UINT64 map:
# two's complement makes it the same bits), f64 (only the non-tensor cp.reduce.async.bulk has it), tf32, fp32_ftz,
# 8/16-bit integers.
# b64 means a UINT64 map (the same bits): .and/.or/.xor through an INT64 map fault on the GPU, so INT64 is refused
# there (docs/results/store-roundtrip.md).
_B32, _B64 = (UINT32, INT32), (UINT64,)
REDUCE_DTYPES: dict[str, tuple[TmaDtype, ...]] = {
    "add": (UINT32, INT32, UINT64, FLOAT32, FLOAT16, BFLOAT16),
    "min": (UINT32, INT32, UINT64, INT64, FLOAT16, BFLOAT16),
    "max": (UINT32, INT32, UINT64, INT64, FLOAT16, BFLOAT16),
    "inc": (UINT32,), "dec": (UINT32,),
    "and": _B32 + _B64, "or": _B32 + _B64, "xor": _B32 + _B64,
}
# Types whose store is a plain byte copy (the oracle and the fuzz cover these). tf32 and fp32_ftz maps may convert
# on the way out; that is not modelled.
STORE_DTYPES = (UINT8, UINT16, UINT32, INT32, UINT64, INT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16)

CHUNK_BYTES = 16  # a store writes, and a bulk copy moves, whole 16-byte chunks
SWIZZLE_PERIOD = 1024  # bytes after which every swizzle pattern repeats (128B swizzle)


def check_reduction(op: str, dtype) -> None:
    """Refuse an operation/dtype pair the PTX ISA does not list for cp.reduce.async.bulk.tensor."""
    dt = tma_dtype(dtype)
    if op == STORE:
        return
    if not isinstance(op, str) or op not in REDUCE_DTYPES:
        raise TensorMapError("reduce_op", "op", op, f"use 'store' or one of {', '.join(REDUCE_OPS)}",
                             "not a cp.reduce.async.bulk.tensor operation")
    allowed = REDUCE_DTYPES[op]
    if dt not in allowed:
        hint = ""
        if (op, dt) == ("add", INT64):
            hint = " (an INT64 add is the same bits as a UINT64 add: use a uint64 map)"
        elif op in ("and", "or", "xor") and dt == INT64:
            hint = " (bitwise ops are the same bits on a uint64 map; an INT64 map faults on the H200)"
        raise TensorMapError("reduce_dtype", "dtype", dt.name,
                             f"use .{op} with {', '.join(d.name for d in allowed)}{hint}",
                             f"cp.reduce.async.bulk.tensor .{op} does not take {dt.name}")


def check_store_spec(spec: TensorMapSpec, op: str = STORE) -> TensorMapSpec:
    """Validate a map used for stores or reductions; warn (StoreStraddleWarning) when its inner edge straddles."""
    if not isinstance(spec, TensorMapSpec):
        raise TensorMapError("type", "spec", type(spec).__name__, "give a TensorMapSpec")
    spec.validate()
    if spec.dtype.bits and (op != STORE or spec.dtype.name == "16u4_align16b"):
        what = "reductions take no packed type" if op != STORE else "b4x16_p64 (16U4_ALIGN16B) cannot be stored"
        raise TensorMapError("packed_store", "dtype", spec.dtype.name, "store 16u4_align8b or 16u6_align16b maps, "
                             "and reduce unpacked types", f"{what} (PTX ISA, restrictions on tensor copies; "
                             "unconfirmed on a GPU)")
    check_reduction(op, spec.dtype)
    if op == STORE and not spec.dtype.bits and spec.dtype not in STORE_DTYPES:
        raise TensorMapError("store_dtype", "dtype", spec.dtype.name, "store through a float32 (or uint32) map of "
                             "the same bytes", "the store oracle models byte-copy types only: a tf32 or fp32_ftz "
                             "map may convert on the way out, and no GPU run has shown what it writes")
    if spec.interleave != Interleave.NONE:
        raise TensorMapError("store_interleave", "interleave", getattr(spec.interleave, "name", spec.interleave),
                             "use INTERLEAVE_NONE for stores", "drvtma models stores of non-interleaved maps only")
    inner_bytes = spec.shape[-1] * spec.itemsize
    if inner_bytes % CHUNK_BYTES:
        warnings.warn(
            f"store map inner extent is {spec.shape[-1]} {spec.dtype.name} = {inner_bytes} B, not a multiple of "
            f"{CHUNK_BYTES} B: a store or reduction reaching the inner edge also writes the "
            f"{round_up(inner_bytes, CHUNK_BYTES) - inner_bytes} B after it (rest of the 16-byte chunk)",
            StoreStraddleWarning, stacklevel=2)
    return spec


def _plain_coordinates(spec: TensorMapSpec, coords) -> tuple[int, ...] | None:
    """`coords` as ints when check_load_coordinates would take them unchanged (rank integers, s32, the innermost
    aligned), without NumPy: a fuzz batch checks each case's one box twice. None: let it judge, and name the rule."""
    try:
        plain = tuple(c.__index__() for c in coords if type(c) is not bool)
    except (AttributeError, TypeError):
        return None
    unit = 16 // math.gcd(16, spec.itemsize) if spec.interleave == Interleave.NONE else 1
    if len(plain) != spec.rank or len(plain) != len(coords) or plain[-1] % unit:
        return None
    return plain if all(-(1 << 31) <= c < (1 << 31) for c in plain) else None


def check_store_coordinates(spec: TensorMapSpec, coords) -> tuple[int, ...]:
    """Refuse coordinates (NumPy order) that fault a store: what faults a load (oracle.check_load_coordinates:
    count, s32 range, an innermost one off a 16-byte boundary), and any negative one."""
    coords = _plain_coordinates(spec, coords) or tuple(int(c) for c in check_load_coordinates(spec, [tuple(coords)])[0])
    for axis, c in enumerate(coords):
        if c < 0:
            raise TensorMapError("store_negative_coordinate", f"coords[{axis}]", c,
                                 "start the box at 0 or later; clip the box on the host instead",
                                 "a negative store or reduction coordinate faults the context "
                                 "(CUDA_ERROR_ILLEGAL_INSTRUCTION, sticky) [doc, seen]")
    return coords


def check_bulk_store(dst_offset: int, nbytes: int) -> None:
    """1D bulk store rules: 16-byte aligned destination, a positive size that is a multiple of 16 [doc]."""
    dst_offset = as_int(dst_offset, "dst", error=TensorMapError, rule="bulk_alignment")
    nbytes = as_int(nbytes, "bytes", error=TensorMapError, rule="bulk_size")
    if dst_offset % CHUNK_BYTES:
        raise TensorMapError("bulk_alignment", "dst", dst_offset, "use a 16-byte aligned destination",
                             f"the destination is {dst_offset % 16} B past a 16-byte boundary")
    if nbytes <= 0 or nbytes % CHUNK_BYTES:
        raise TensorMapError("bulk_size", "bytes", nbytes, f"use a positive multiple of 16, e.g. "
                             f"{max(16, round_up(nbytes, 16))}", "bulk copies move whole 16-byte chunks")
