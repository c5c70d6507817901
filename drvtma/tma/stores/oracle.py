"""TMA tensor stores and reductions: the rules drvtma enforces, what a store changes in global memory (the oracle),
and random cases (the GPU runner is `probe`).

Model (NumPy order, axis r-1 contiguous; ``s`` = element size, ``n_k`` = ceil(box_k / element_stride_k) for the
outer axes, ``n`` = box for the inner axis):

- box element (j_0, .., j_r-1) goes to global index g_k = c_k + j_k * e_k (outer axes), g = c + j (inner axis);
  element strides act as on loads [doc: "traversal stride"; stores assumed symmetric, pinned by the GPU tests];
- an outer axis writes only rows with g_k < shape_k [seen];
- the inner axis writes every element of each 16-byte chunk that holds an in-bounds element: g < round_up(shape*s,
  16) / s, so up to 15 bytes past the inner edge (the straddle) [seen for stores]; reductions are assumed to do
  the same (pinned by tests/test_stores_gpu.py);
- the source is read from shared memory exactly where a load of the same map would have put each element: row
  pitch and swizzle on the absolute shared address (as loads do); pad bytes of a row are not read;
- any negative coordinate faults [doc, seen], and c_inner * s must be a multiple of 16 (as for loads).

Reductions follow the PTX ISA table of cp.reduce.async.bulk.tensor (see REDUCE_DTYPES).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

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
from ..tiled.oracle import SMEM_DST_ALIGNMENT, box_row_addresses, check_load_coordinates
from ..tiled.rules import round_up
from ..tiled.spec import Interleave, L2Promotion, Swizzle, TensorMapSpec

STORE = "store"
REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")  # index = op number in copy.cuh
OP_CODES = {STORE: -1, **{name: i for i, name in enumerate(REDUCE_OPS)}}

# PTX ISA, cp.reduce.async.bulk.tensor, "valid combinations of .redOp and element type" [doc]:
#   .add u32 s32 u64 f32 f16 bf16 | .min .max u32 s32 u64 s64 f16 bf16 | .inc .dec u32 | .and .or .xor b32 b64.
# b32/b64 are taken to mean the 32/64-bit integer map types. Not listed, so refused: add on s64 (use a UINT64 map:
# two's complement makes it the same bits), f64 (only the non-tensor cp.reduce.async.bulk has it), tf32, fp32_ftz,
# 8/16-bit integers.
# On the H200 (driver 580.159.04) .and/.or/.xor through an INT64 map kill the context with
# CUDA_ERROR_ILLEGAL_INSTRUCTION, while UINT64 works [seen]: b64 means a UINT64 map (same bits), so INT64 is refused.
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

# The non-tensor cp.reduce.async.bulk.add.f32 "flushes subnormal inputs and results to sign-preserving zero" [doc];
# the tensor form's f32 add on the H200 keeps them: 0x1 + 0x1 = 0x2, 0x7fffff + 0x1 = 0x800000 [seen].
CHUNK_BYTES = 16
SWIZZLE_PERIOD = 1024  # bytes after which every swizzle pattern repeats (128B swizzle)


# ---------------------------------------------------------------------------------------------- validation

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


def check_store_coordinates(spec: TensorMapSpec, coords) -> tuple[int, ...]:
    """Refuse coordinates (NumPy order) that fault a store: what faults a load (oracle.check_load_coordinates:
    count, s32 range, an innermost one off a 16-byte boundary), and any negative one."""
    coords = tuple(int(c) for c in check_load_coordinates(spec, [tuple(coords)])[0])
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


# ---------------------------------------------------------------------------------------------- oracle

def inner_write_limit(spec: TensorMapSpec) -> int:
    """Elements of a row a store may write: the inner extent rounded up to whole 16-byte chunks [seen]."""
    return round_up(spec.shape[-1] * spec.itemsize, CHUNK_BYTES) // spec.itemsize


@dataclass(frozen=True)
class StoreTargets:
    """The box elements a store writes and where: ``box_index`` indexes the box (np.ix_ form), ``byte_offsets``
    (same shape as the selection) are bytes from the tensor's base address."""

    box_index: tuple
    byte_offsets: np.ndarray

    @property
    def count(self) -> int:
        return int(self.byte_offsets.size)


def store_targets(spec: TensorMapSpec, coords) -> StoreTargets:
    """Which box elements a store or reduction at `coords` (NumPy order) writes, and to which global bytes."""
    coords = check_store_coordinates(spec, coords)
    assert spec.element_strides is not None  # __post_init__ fills it
    counts = spec.loaded_counts
    kept, offsets = [], []
    last = spec.rank - 1
    for axis in range(spec.rank):
        j = np.arange(counts[axis], dtype=np.int64)
        if axis == last:
            g = coords[axis] + j
            keep = g < inner_write_limit(spec)
        else:
            g = coords[axis] + j * spec.element_strides[axis]
            keep = g < spec.shape[axis]
        kept.append(j[keep])
        offsets.append(g[keep] * spec.strides_bytes[axis])
    grids = np.ix_(*offsets)
    total = np.zeros(tuple(len(k) for k in kept), dtype=np.int64)
    for part in grids:
        total = total + part
    return StoreTargets(np.ix_(*kept), total)


def smem_byte_offsets(spec: TensorMapSpec, smem_offset: int = 0) -> np.ndarray:
    """For every byte of every box element (shape loaded_counts + (itemsize,)): its offset in the shared-memory
    image, the image starting at an absolute shared address congruent to `smem_offset` modulo 1024. A store reads
    exactly the layout a load writes, so this is the load oracle's layout."""
    offsets = box_row_addresses(spec, smem_offset) - smem_offset
    return offsets.reshape(spec.loaded_counts + (spec.itemsize,))

def box_from_smem(spec: TensorMapSpec, image: np.ndarray, smem_offset: int = 0) -> np.ndarray:
    """The box (loaded_counts shape, dtype carrier) a store reads from a shared-memory image."""
    raw = np.asarray(image, dtype=np.uint8).reshape(-1)
    picked = raw[smem_byte_offsets(spec, smem_offset)]
    return np.ascontiguousarray(picked).view(spec.dtype.numpy).reshape(spec.loaded_counts)


def smem_from_box(spec: TensorMapSpec, box: np.ndarray, smem_offset: int = 0,
                  pad: np.ndarray | None = None) -> np.ndarray:
    """The shared-memory image (spec.smem_bytes bytes) holding `box` as a load would lay it out; row padding from
    `pad` (bytes, default zeros)."""
    image = np.zeros(spec.smem_bytes, np.uint8) if pad is None else np.array(pad, np.uint8).reshape(-1).copy()
    if image.size != spec.smem_bytes:
        raise ValueError(f"pad has {image.size} bytes, the image needs {spec.smem_bytes}")
    values = np.ascontiguousarray(np.asarray(box, dtype=spec.dtype.numpy).reshape(spec.loaded_counts))
    image[smem_byte_offsets(spec, smem_offset)] = values.view(np.uint8).reshape(spec.loaded_counts + (spec.itemsize,))
    return image


# ---- element-wise reductions, on the dtype's NumPy carrier (bf16 as uint16 bits)

def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round to nearest even; NaN becomes the canonical 0x7FFF."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FFF), rounded)


def _float_view(dt: TmaDtype, v: np.ndarray) -> np.ndarray:
    return _bf16_to_f32(v) if dt == BFLOAT16 else v.astype(np.float32) if dt == FLOAT16 else v


def _min_max(dt: TmaDtype, old: np.ndarray, src: np.ndarray, take_min: bool) -> np.ndarray:
    if not dt.is_float:
        return np.minimum(old, src) if take_min else np.maximum(old, src)
    # IEEE minNum/maxNum as PTX min/max: a NaN operand yields the other one, two NaNs the canonical NaN, and
    # -0 < +0. The chosen operand's bits are returned unchanged.
    a, b = _float_view(dt, old), _float_view(dt, src)
    a_neg0 = (a == 0) & np.signbit(a)
    b_neg0 = (b == 0) & np.signbit(b)
    if take_min:
        pick_b = (b < a) | ((a == b) & b_neg0 & ~a_neg0)
    else:
        pick_b = (b > a) | ((a == b) & a_neg0 & ~b_neg0)
    pick_b |= np.isnan(a) & ~np.isnan(b)
    pick_b &= ~(np.isnan(b) & ~np.isnan(a))
    out = np.where(pick_b, src, old)
    both_nan = np.isnan(a) & np.isnan(b)
    return np.where(both_nan, np.array(0x7FFF, np.uint16).view(out.dtype), out)


def _add(dt: TmaDtype, old: np.ndarray, src: np.ndarray) -> np.ndarray:
    if dt == FLOAT32:
        with np.errstate(over="ignore", invalid="ignore"):
            r = (old + src).astype(np.float32)  # subnormals kept [seen]
        return np.where(np.isnan(r), np.array(0x7FFFFFFF, np.uint32).view(np.float32), r)
    if dt == FLOAT16:
        with np.errstate(over="ignore", invalid="ignore"):
            r = (old.astype(np.float64) + src.astype(np.float64)).astype(np.float16)  # exact sum, one rounding
        return np.where(np.isnan(r), np.array(0x7FFF, np.uint16).view(np.float16), r)
    if dt == BFLOAT16:
        # Exact-to-f32 then f32-to-bf16 is one correct rounding: 24 >= 2*8 + 2 (double rounding is innocuous).
        with np.errstate(over="ignore", invalid="ignore"):
            return _f32_to_bf16(_bf16_to_f32(old) + _bf16_to_f32(src))
    return old + src  # integers wrap modulo 2^bits


def reduce_values(op: str, dtype, old: np.ndarray, src: np.ndarray) -> np.ndarray:
    """What a reduction leaves in global memory, element-wise, on the dtype's NumPy carrier."""
    dt = tma_dtype(dtype)
    old = np.asarray(old, dtype=dt.numpy)
    src = np.asarray(src, dtype=dt.numpy)
    if op == STORE:
        return src.copy()
    check_reduction(op, dt)
    if op == "add":
        return _add(dt, old, src)
    if op in ("min", "max"):
        return _min_max(dt, old, src, op == "min")
    if op == "inc":  # PTX atom.inc: wraps to 0 once old reaches src
        return np.where(old >= src, np.uint32(0), old + np.uint32(1)).astype(np.uint32)
    if op == "dec":  # PTX atom.dec: wraps to src from 0 or from above src
        return np.where((old == 0) | (old > src), src, old - np.uint32(1)).astype(np.uint32)
    bits = np.dtype(f"u{dt.itemsize}")
    a, b = old.view(bits), src.view(bits)
    r = a & b if op == "and" else a | b if op == "or" else a ^ b
    return r.view(dt.numpy)


def apply_store(memory: np.ndarray, base_offset: int, spec: TensorMapSpec, coords, box: np.ndarray,
                op: str = STORE) -> StoreTargets:
    """Apply one store or reduction to `memory` (bytes, modified in place) for a tensor at `base_offset`."""
    targets = store_targets(spec, coords)
    s = spec.itemsize
    base_offset = as_int(base_offset, "base_offset", error=TensorMapError, rule="type", lo=0)
    if base_offset % s:
        raise TensorMapError("base_offset_alignment", "base_offset", base_offset,
                             f"use a multiple of the element size ({s} B)", "elements are read whole")
    elements = memory.view(spec.dtype.numpy)
    index = (base_offset + targets.byte_offsets) // s
    values = np.asarray(box, dtype=spec.dtype.numpy).reshape(spec.loaded_counts)[targets.box_index]
    elements[index] = reduce_values(op, spec.dtype, elements[index], values)
    return targets


# ---------------------------------------------------------------------------------------------- cases

@dataclass(frozen=True)
class StoreCase:
    """One store or reduction: a map spec (its base address is set by the runner), coordinates (NumPy order), the
    operation, and where the shared-memory source sits modulo 1024 (a multiple of 128)."""

    spec: TensorMapSpec
    coords: tuple[int, ...]
    op: str = STORE
    smem_offset: int = 0

    def describe(self) -> str:
        return f"{self.op} at {self.coords}, smem offset {self.smem_offset}\n{self.spec.describe()}"


def check_case(case: StoreCase) -> None:
    """Every rule a store case must satisfy before it reaches the GPU (warnings about straddles are silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreStraddleWarning)
        check_store_spec(case.spec, case.op)
    check_store_coordinates(case.spec, case.coords)
    if case.smem_offset % SMEM_DST_ALIGNMENT or not 0 <= case.smem_offset < SWIZZLE_PERIOD:
        raise TensorMapError("smem_alignment", "smem_offset", case.smem_offset, "use 0, 128, 256, .. 896",
                             "a tensor copy's shared-memory address must be 128-byte aligned [doc]")


def random_values(dtype, op: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Values for fuzzing, on the carrier: any bits for stores and bitwise ops; for arithmetic reductions values
    whose results are ordinary (no NaN, no subnormal results, both branches of inc/dec)."""
    dt = tma_dtype(dtype)
    if op in (STORE, "and", "or", "xor") or (not dt.is_float and op in ("add", "min", "max")):
        return rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt.numpy)
    if op in ("inc", "dec"):
        small = rng.integers(0, 8, n, dtype=np.uint32)
        wide = rng.integers(0, 1 << 32, n, dtype=np.uint32)
        return np.where(rng.random(n) < 0.75, small, wide).astype(np.uint32)
    sign = rng.integers(0, 2, n, dtype=np.uint32)
    if dt == FLOAT32:  # exponents 107..147: sums cannot reach the subnormal range
        return ((sign << 31) | (rng.integers(107, 148, n, dtype=np.uint32) << 23)
                | rng.integers(0, 1 << 23, n, dtype=np.uint32)).view(np.float32)
    if dt == FLOAT16:  # exponent fields 11..28: cancellation stays normal, sums stay below 32768
        return ((sign << 15) | (rng.integers(11, 29, n, dtype=np.uint32) << 10)
                | rng.integers(0, 1 << 10, n, dtype=np.uint32)).astype(np.uint16).view(np.float16)
    # bfloat16: exponent fields 8..200
    return ((sign << 15) | (rng.integers(8, 201, n, dtype=np.uint32) << 7)
            | rng.integers(0, 1 << 7, n, dtype=np.uint32)).astype(np.uint16)


def random_store_case(rng: np.random.Generator, *, ops=None, dtypes=STORE_DTYPES, max_box_bytes: int = 32768,
                      max_extent_bytes: int = 1 << 18, straddle_reductions: bool = False) -> StoreCase:
    """A random valid case: rank 1..5, partial and out-of-bounds boxes, padded strides, element strides (the inner
    one too), swizzles, L2 promotions.

    Reductions get inner extents that are whole 16-byte chunks unless `straddle_reductions` (that edge is pinned by
    its own test). `ops` limits the operations (default: store half the time, else a legal reduction).
    """
    for _ in range(1000):
        if ops is not None and len(ops) > 1:
            # The op first, then a type it takes: .inc and .dec (uint32 only) come as often as .add, and every
            # op/type pair of REDUCE_DTYPES is drawn often enough to be measured (drvtma.fuzz.coverage).
            op = ops[int(rng.integers(len(ops)))]
            takes = [d for d in map(tma_dtype, dtypes) if op == STORE or d in REDUCE_DTYPES.get(op, ())]
            if not takes:
                continue
            dt = takes[int(rng.integers(len(takes)))]
        else:
            dt = tma_dtype(dtypes[int(rng.integers(len(dtypes)))])
            legal = [STORE] + [op for op in REDUCE_OPS if dt in REDUCE_DTYPES[op]]
            if ops is None:  # half stores, half reductions where the dtype has any
                choices = [STORE] if rng.random() < 0.5 or len(legal) == 1 else legal[1:]
            else:
                choices = [op for op in ops if op in legal]
            if not choices:
                continue
            op = choices[int(rng.integers(len(choices)))]
        case = _try_case(rng, dt, op, max_box_bytes, max_extent_bytes, straddle_reductions or op == STORE)
        if case is not None:
            return case
    raise RuntimeError("could not draw a store case within the limits")


def _try_case(rng, dt: TmaDtype, op: str, max_box_bytes: int, max_extent_bytes: int, straddle: bool):
    s = dt.itemsize
    unit = CHUNK_BYTES // s  # elements per 16 bytes
    rank = int(rng.integers(1, 6))
    swizzle = Swizzle(int(rng.choice([0, 0, 1, 2, 3])))
    span = {Swizzle.NONE: 256 * s, Swizzle.B32: 32, Swizzle.B64: 64, Swizzle.B128: 128}[swizzle]
    box_inner = unit * int(rng.integers(1, min(span, 256 * s, max_box_bytes) // CHUNK_BYTES + 1))
    box_inner = min(box_inner, 256 // unit * unit)
    pitch = max(box_inner * s, span if swizzle else 0)
    rows_budget = max(1, max_box_bytes // pitch)
    per_axis = max(1, int(rows_budget ** (1 / max(rank - 1, 1))))
    box_outer = [int(rng.integers(1, min(per_axis, 256) + 1)) for _ in range(rank - 1)]
    estr = [int(rng.integers(1, 9)) if rng.random() < 0.3 else 1 for _ in range(rank - 1)]
    if rank > 1 and math.prod(-(-b // e) for b, e in zip(box_outer, estr)) * pitch > max_box_bytes:
        return None
    d_inner = int(rng.integers(1, 3 * box_inner + 1))
    if not straddle:
        d_inner = round_up(d_inner, unit)
    shape_outer = [int(rng.integers(1, 2 * b * e + 2)) for b, e in zip(box_outer, estr)]
    shape = tuple(shape_outer) + (d_inner,)
    strides = [s]
    step = round_up(d_inner * s, CHUNK_BYTES) + CHUNK_BYTES * int(rng.integers(0, 3))
    for n in reversed(shape[:-1]):
        strides.append(step)
        step = step * n + CHUNK_BYTES * int(rng.integers(0, 3))
    strides_bytes = tuple(reversed(strides))
    # The oracle takes the inner element stride to be ignored without interleave, as on loads [doc, seen for loads;
    # for stores unconfirmed until the stores fuzz runs these draws on a GPU]; the L2 promotion is a hint. Both are
    # drawn so that every value the rules take is stored now and then.
    e_inner = int(rng.integers(2, 9)) if rng.random() < 0.25 else 1
    l2 = L2Promotion(int(rng.choice([0, 0, 0, 1, 2, 3])))
    spec = TensorMapSpec.create(dt, shape, tuple(box_outer) + (box_inner,), strides_bytes=strides_bytes,
                                element_strides=tuple(estr) + (e_inner,), swizzle=swizzle, l2_promotion=l2)
    if spec.extent_bytes > max_extent_bytes or not spec.is_valid():
        return None
    # Mostly boxes that touch the tensor (partly out of bounds often); now and then one entirely past an edge.
    inside = lambda n: int(rng.integers(0, n)) if rng.random() < 0.95 else int(rng.integers(n, n + 3))  # noqa: E731
    coords = tuple(inside(n) for n in shape_outer) + (unit * inside(-(-d_inner // unit)),)
    smem_offset = int(rng.choice([0, 128, 256, 512])) if rng.random() < 0.3 else 0
    return StoreCase(spec, coords, op, smem_offset)
