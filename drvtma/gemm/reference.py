"""The NumPy (ml_dtypes) result of the GEMM, and operands whose products the kernel must reproduce bit for bit.

With integer operands and |A . B^T| < 2^24 every partial sum is exact in fp32, so the order in which wgmma adds is
irrelevant: the fp32 accumulator equals the float64 sum, alpha (a power of two) scales it exactly, and the one
rounding left (to the output type, round to nearest even, as cvt.rn does) is the same in NumPy.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .config import dtype_name

EXACT_BOUND = 3  # |values| <= 3: integers every input type holds (e5m2: 3 = 1.1b x 2)


def value_dtype(name) -> np.dtype:
    """The NumPy / ml_dtypes type of a GEMM dtype name."""
    name = dtype_name(name)
    if name == "float32":
        return np.dtype(np.float32)
    if name == "float16":
        return np.dtype(np.float16)
    return np.dtype(getattr(ml_dtypes, name))


def exact_operands(rng: np.random.Generator, dtype, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A [m, k] and B [n, k] of integers in -3..3 (never all zero), in the GEMM's input type."""
    if k * EXACT_BOUND**2 >= 2**24:
        raise ValueError(f"k = {k} is too large for exact fp32 sums of products of values up to {EXACT_BOUND}")
    vt = value_dtype(dtype)
    a = rng.integers(-EXACT_BOUND, EXACT_BOUND + 1, (m, k)).astype(np.float32).astype(vt)
    b = rng.integers(-EXACT_BOUND, EXACT_BOUND + 1, (n, k)).astype(np.float32).astype(vt)
    return a, b


def random_operands(rng: np.random.Generator, dtype, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal A and B rounded to the input type (fp8: scaled into its range first is not needed)."""
    vt = value_dtype(dtype)
    return (rng.standard_normal((m, k), dtype=np.float32).astype(vt),
            rng.standard_normal((n, k), dtype=np.float32).astype(vt))


def reference_gemm(a: np.ndarray, b: np.ndarray, *, alpha: float = 1.0, out_dtype="bfloat16") -> np.ndarray:
    """alpha * A . B^T: the products summed in float64, rounded to fp32 (the accumulator), scaled by alpha in fp32,
    rounded to the output type."""
    acc = (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.float32)
    return (acc * np.float32(alpha)).astype(value_dtype(out_dtype))
