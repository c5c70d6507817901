"""Random store and reduction cases for the fuzz and the GPU runner: `StoreCase`, the rules a case must hold before
it reaches the GPU (`check_case`), values whose results stay ordinary (`random_values`), and `random_store_case`."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ...errors import StoreStraddleWarning, TensorMapError
from ..dtypes import FLOAT16, FLOAT32, TmaDtype, tma_dtype
from ..tiled.oracle import SMEM_DST_ALIGNMENT
from ..tiled.rules import round_up
from ..tiled.spec import L2Promotion, Swizzle, TensorMapSpec
from .rules import (
    CHUNK_BYTES,
    REDUCE_DTYPES,
    REDUCE_OPS,
    STORE,
    STORE_DTYPES,
    SWIZZLE_PERIOD,
    check_store_coordinates,
    check_store_spec,
)


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
