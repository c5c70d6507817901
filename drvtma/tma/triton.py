"""Triton's host `TensorDescriptor` (triton.tools.tensor_descriptor) as a drvtma spec, read by duck typing: Triton
is never imported here. `TensorMapSpec.from_triton(desc)` calls `spec_from_triton`.

What Triton's `TensorDescriptor.__post_init__` checks (Triton 3.x, mirrored as `TRITON_RULES` so strategies can
stay inside them): rank 1..5; base 16-byte aligned; every block dimension a power of two (numel <= 2^20); outer
strides a multiple of 16 bytes; last stride 1 (elements); shapes > 0; padding "zero" or "nan" (nan for floating
types only). The swizzle is not on the descriptor: Triton's compiler picks it from the shared layout.
"""

from __future__ import annotations

from ..errors import TensorMapError
from .dtypes import tma_dtype

# torch / Triton element types -> the map type Triton encodes (8-bit floats travel as bytes)
TRITON_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
                 "int8": "uint8", "uint8": "uint8", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8",
                 "int16": "uint16", "uint16": "uint16", "int32": "int32", "uint32": "uint32", "int64": "int64",
                 "uint64": "uint64"}
MAX_NUMEL = 1 << 20  # triton._utils.TRITON_MAX_TENSOR_NUMEL


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def triton_swizzle(inner_bytes: int) -> str:
    """The swizzle whose span is the block's inner row (32, 64 or 128 bytes), else none: what an NVMMA shared
    layout of that row uses. A desc.load's values do not depend on it."""
    return {32: "32B", 64: "64B", 128: "128B"}.get(inner_bytes, "none")


def spec_from_triton(cls, desc, *, swizzle=None):
    """A TensorMapSpec for `desc` (shape, strides in elements, block_shape, padding, base.dtype / data_ptr)."""
    base = getattr(desc, "base", None)
    name = str(getattr(base, "dtype", "")).split(".")[-1]
    if name not in TRITON_DTYPES:
        raise TensorMapError("triton_descriptor", "desc.base.dtype", name or type(base).__name__,
                             f"use one of {', '.join(TRITON_DTYPES)}", "no TMA type for this element type")
    dt = tma_dtype(TRITON_DTYPES[name])
    if name == "float32" and getattr(desc, "round_f32_to_tf32", False):
        dt = tma_dtype("tfloat32")
    shape, strides, block = (tuple(int(v) for v in getattr(desc, k)) for k in ("shape", "strides", "block_shape"))
    padding = getattr(desc, "padding", "zero")
    if padding not in ("zero", "nan"):
        raise TensorMapError("triton_descriptor", "desc.padding", padding, 'use "zero" or "nan"')
    inner_bytes = block[-1] * dt.itemsize if block else 0
    ptr = base.data_ptr() if hasattr(base, "data_ptr") else None
    return cls.create(dt, shape, block, strides_bytes=tuple(s * dt.itemsize for s in strides),
                      swizzle=triton_swizzle(inner_bytes) if swizzle is None else swizzle,
                      oob_fill="nan" if padding == "nan" else "zero", base_address=ptr or None)


def triton_arguments(spec) -> dict:
    """The TensorDescriptor fields (but base) for `spec`: shape, strides (elements), block_shape, padding."""
    return {"shape": list(spec.shape), "strides": [s // spec.itemsize for s in spec.strides_bytes],
            "block_shape": list(spec.box), "padding": "nan" if int(spec.oob_fill) else "zero"}
