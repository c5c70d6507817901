"""Encoding: `encode_tiled` (checked) and `encode_unchecked` to the 128-byte `TensorMap` a kernel takes by value."""

from __future__ import annotations

import ctypes

import numpy as np

from ..errors import CudaError
from .rules import _address_error, _bounds_error, validate_all
from .spec import SMEM_PER_BLOCK_OPTIN_SM90, TENSOR_MAP_BYTES, TensorMapSpec, TmaParams

def _resolve_target(base_address: int | None, target) -> tuple[int, object, int | None]:
    """(address, object to keep alive, bytes available from the address) for an encode or replace target."""
    if target is None:
        if base_address is None:
            raise ValueError("no address: give a DeviceBuffer or an address, or set the spec's base_address")
        return base_address, None, None
    if isinstance(target, (int, np.integer)):
        return int(target), None, None
    cai = getattr(target, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0]), target, None
    if hasattr(target, "ptr") and hasattr(target, "nbytes"):
        ptr, nbytes = int(target.ptr), int(target.nbytes)
        # A spec made by from_buffer(buf, offset_bytes=...) points inside the buffer: keep that offset.
        if base_address is not None and ptr <= base_address < ptr + nbytes:
            return base_address, target, ptr + nbytes - base_address
        return ptr, target, nbytes
    raise TypeError(f"encode target must be a DeviceBuffer, an int address or None, got {type(target).__name__}")


def encode_tiled(spec: TensorMapSpec, target=None, *, validate: bool = True,
                 smem_limit: int = SMEM_PER_BLOCK_OPTIN_SM90) -> TensorMap:
    """Validate `spec` and encode it with cuTensorMapEncodeTiled for `target` (DeviceBuffer, address or None)."""
    address, keepalive, available = _resolve_target(spec.base_address, target)
    if address != spec.base_address:
        spec = spec.replace(base_address=address)
    if not validate:
        return encode_unchecked(spec.tma_params(), address, spec=spec, keepalive=keepalive)
    error = _address_error(address, spec.interleave)
    if error is not None:
        raise error
    params = _valid_geometry_params(spec, smem_limit)
    error = _bounds_error(spec, available)
    if error is not None:
        raise error
    return encode_unchecked(params, address, spec=spec, keepalive=keepalive)


# Validation costs several times the driver's encode; a map is often re-encoded for new addresses with the same
# geometry, so valid geometries (everything but the address, the only address-dependent rule) are remembered.
_valid_geometries: dict[tuple, TmaParams] = {}


def _valid_geometry_params(spec: TensorMapSpec, smem_limit: int) -> TmaParams:
    memo = spec.__dict__.get("_valid_params")  # the same spec object encoded again
    if memo is not None and memo[0] == smem_limit:
        return memo[1]
    key = (spec.dtype.enum, spec.shape, spec.strides_bytes, spec.box, spec.element_strides, int(spec.interleave),
           int(spec.swizzle), int(spec.l2_promotion), int(spec.oob_fill), spec.allow_overlap,
           spec.allow_undocumented, smem_limit)
    params = _valid_geometries.get(key)
    if params is None:
        errors = validate_all(spec, smem_limit=smem_limit)  # the address was checked by the caller
        if errors:
            raise errors[0]
        if len(_valid_geometries) >= 4096:
            _valid_geometries.clear()
        params = _valid_geometries[key] = spec.tma_params()
    spec.__dict__["_valid_params"] = (smem_limit, params)  # frozen dataclass: a memo, not a field
    return params


def _driver_args(params: TmaParams, address: int) -> tuple:
    from cuda.bindings import driver as cu

    u32, u64 = cu.cuuint32_t, cu.cuuint64_t
    return (cu.CUtensorMapDataType(params.dtype_enum), u32(params.rank), address,
            [u64(v) for v in params.global_dim], [u64(v) for v in params.global_strides],
            [u32(v) for v in params.box_dim], [u32(v) for v in params.element_strides],
            cu.CUtensorMapInterleave(params.interleave), cu.CUtensorMapSwizzle(params.swizzle),
            cu.CUtensorMapL2promotion(params.l2_promotion), cu.CUtensorMapFloatOOBfill(params.oob_fill))


def encode_unchecked(params: TmaParams, address: int, *, spec: TensorMapSpec | None = None,
                     keepalive=None) -> TensorMap:
    """Encode exactly these driver arguments, with none of drvtma's checks (the validator-vs-driver test).

    A refusal raises CudaError listing every argument; values cuda-python cannot even represent (an enum out of
    range, a negative stride, rank > 5) raise CudaError too, with code -1 and the bindings' message.
    """
    from cuda.bindings import driver as cu

    from ..runtime import driver

    driver.context()

    def every_argument() -> str:  # built only for an error: describing costs more than encoding
        where = f"arguments: {params.describe()}, globalAddress=0x{address:x}"
        return where + (f"\nspec (NumPy order): {spec.to_dict()}" if spec is not None else "")

    try:
        args = _driver_args(params, address)
        encoded = driver.call(cu.cuTensorMapEncodeTiled, *args)
    except CudaError as exc:
        raise CudaError(exc.call, exc.code, exc.name, exc.description, every_argument()) from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise CudaError("cuTensorMapEncodeTiled", -1, "REFUSED_BY_CUDA_PYTHON", str(exc), every_argument()) from None
    return TensorMap(encoded, params, address, spec=spec, keepalive=keepalive)


class TensorMap:
    """An encoded tiled tensor map: 128 bytes in a 128-byte-aligned host buffer this object owns.

    Passed to `Kernel.launch` it goes by value (``__drvtma_param__``). Holds the global buffer it was encoded for.
    """

    def __init__(self, encoded, params: TmaParams, address: int, *, spec: TensorMapSpec | None = None,
                 keepalive=None):
        from cuda.bindings import driver as cu

        # Python objects (cuda-python's CUtensorMap included) may sit at 16-byte alignment; TMA maps want 64/128.
        self._storage = np.zeros(TENSOR_MAP_BYTES + 127, dtype=np.uint8)
        start = (-self._storage.ctypes.data) % 128
        self._bytes = self._storage[start:start + TENSOR_MAP_BYTES]
        ctypes.memmove(self._bytes.ctypes.data, encoded.getPtr(), TENSOR_MAP_BYTES)
        self._handle = cu.CUtensorMap(_ptr=self._bytes.ctypes.data)  # a view of our bytes, for ReplaceAddress
        self.params, self.spec, self._address, self._keepalive = params, spec, int(address), keepalive

    @property
    def address(self) -> int:
        return self._address

    @property
    def host_address(self) -> int:
        return self._bytes.ctypes.data

    def to_bytes(self) -> bytes:
        return self._bytes.tobytes()

    def __drvtma_param__(self) -> tuple[int, int]:
        return self._bytes.ctypes.data, TENSOR_MAP_BYTES

    def replace_address(self, target) -> None:
        """Point the map at another global buffer or address (cuTensorMapReplaceAddress), checked first."""
        from cuda.bindings import driver as cu

        from ..runtime import driver

        spec = self.spec
        address, keepalive, available = _resolve_target(None, target)
        error = _address_error(address, self.params.interleave) or (spec and _bounds_error(spec, available))
        if error:
            raise error
        driver.context()
        driver.call(cu.cuTensorMapReplaceAddress, self._handle, address)
        self._address, self._keepalive = address, keepalive
        if spec is not None:
            self.spec = spec.replace(base_address=address)

    def describe(self) -> str:
        head = f"TensorMap at global 0x{self._address:x} (host copy 0x{self.host_address:x}, 128 B)"
        body = self.spec.describe() if self.spec is not None else f"  {self.params.describe()}"
        return f"{head}\n{body}"

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return f"TensorMap(0x{self._address:x}, {self.params.describe()})"
