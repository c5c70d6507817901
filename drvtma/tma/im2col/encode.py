"""Encoding im2col maps: `encode_im2col` (every IM2COL_RULES rule first) and `encode_im2col_unchecked` (the driver
alone, for the validator-vs-driver fuzz), both to the 128-byte `TensorMap` kernels take by value."""

from __future__ import annotations

from ...errors import CudaError, TensorMapError
from ...runtime import driver
from ..tiled.encode import TensorMap, _resolve_target, open_for_default_target
from ..tiled.rules import address_error, bounds_error
from .rules import validate_im2col
from .spec import Im2colParams, Im2colSpec

_CALL = "cuTensorMapEncodeIm2col"


def _driver_args(p: Im2colParams) -> tuple:
    from cuda.bindings import driver as cu

    u32, u64 = cu.cuuint32_t, cu.cuuint64_t
    return (cu.CUtensorMapDataType(p.dtype_enum), u32(p.rank), [u64(v) for v in p.global_dim],
            [u64(v) for v in p.global_strides], list(p.lower_corner), list(p.upper_corner),
            u32(p.channels_per_pixel), u32(p.pixels_per_column), [u32(v) for v in p.element_strides],
            cu.CUtensorMapInterleave(p.interleave), cu.CUtensorMapSwizzle(p.swizzle),
            cu.CUtensorMapL2promotion(p.l2_promotion), cu.CUtensorMapFloatOOBfill(p.oob_fill))


def _every_argument(p: Im2colParams, address: int, spec: Im2colSpec | None) -> str:
    where = f"arguments: {p.describe()}, globalAddress=0x{address:x}"
    return where + (f"\nspec (NumPy order): {spec.to_dict()}" if spec is not None else "")


def encode_im2col_unchecked(params: Im2colParams, address: int, *, spec: Im2colSpec | None = None,
                            keepalive=None) -> TensorMap:
    """Encode exactly these driver arguments, none of drvtma's checks. A refusal raises CudaError listing every
    argument (code -1 when cuda-python cannot even represent a value)."""
    from cuda.bindings import driver as cu

    driver.context()
    a = params
    try:
        args = _driver_args(params)
        code, encoded = cu.cuTensorMapEncodeIm2col(args[0], args[1], int(address), *args[2:])
    except (ValueError, TypeError, OverflowError) as exc:
        raise CudaError(_CALL, -1, "REFUSED_BY_CUDA_PYTHON", str(exc), _every_argument(a, address, spec)) from None
    if code != 0:
        e = driver.cuda_error(_CALL, code)
        raise CudaError(e.call, e.code, e.name, e.description, _every_argument(a, address, spec))
    return TensorMap(encoded, params, int(address), spec=spec, keepalive=keepalive)


def encode_im2col(spec: Im2colSpec, target=None, *, validate: bool = True) -> TensorMap:
    """Check `spec` against every im2col rule, then encode it with cuTensorMapEncodeIm2col.

    Parameters
    ----------
    spec : Im2colSpec
        The im2col map, channels last (N, [D, H,] W, C).
    target : DeviceBuffer, device array, int or None
        What the map points at; None: the spec's base_address.
    validate : bool
        Check every im2col rule first.

    Returns
    -------
    TensorMap
        The 128 encoded bytes.

    Raises
    ------
    TensorMapError
        A broken rule, named, with the argument, its value and the fix (before the driver).
    NoGpuError
        No driver or no GPU with TMA.
    CudaError
        The driver refused what the rules let through."""
    if not isinstance(spec, Im2colSpec):
        raise TensorMapError("type", "spec", type(spec).__name__, "give an Im2colSpec (Im2colSpec.create, "
                             "from_array, from_dict)", "encode_im2col encodes im2col specs")
    address, keepalive, available = _resolve_target(spec.base_address, target)
    if validate:
        open_for_default_target(spec)  # a swizzle atom is checked for the device's target, as encode_tiled does
        errors = validate_im2col(spec)
        if errors:
            raise errors[0]
        error = address_error(address, spec.interleave) or bounds_error(spec, available)
        if error:
            raise error
    return encode_im2col_unchecked(spec.tma_params(), address, spec=spec, keepalive=keepalive)
