"""Arrays from the ecosystem as tensor-map layouts: any object with ``__dlpack__`` or ``__cuda_array_interface__``
(torch, CuPy, JAX, cuda.core buffers and views), read through runtime.arrays.strided_view (cuda.core); NumPy
arrays give a host layout (no address).

DLPack names bf16 and fp8; the CUDA Array Interface cannot (a torch bf16 tensor says ``<V2`` there), so DLPack is
tried first, as StridedMemoryView does. No stream ordering is set up (stream_ptr=-1): a layout reads no data.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import TensorMapError, is_int
from ..runtime.arrays import dlpack_dtype, strided_view
from .geometry import contiguous_strides_bytes

# DLPack codes of the fp8 types (dlpack.h, DLDataTypeCode), for cuda.core versions whose views cannot name them
# (cuda.core 1.2 refuses them).
_DLPACK_FP8 = {7: "float8_e3m4", 8: "float8_e4m3", 9: "float8_e4m3b11fnuz", 10: "float8_e4m3fn",
               11: "float8_e4m3fnuz", 12: "float8_e5m2", 13: "float8_e5m2fnuz", 14: "float8_e8m0fnu"}


@dataclass(frozen=True)
class ArrayLayout:
    """What a tensor map needs from an array: its element type (as NumPy / ml_dtypes names it), shape and byte
    strides in NumPy order, and the device address of element (0, .., 0) (None for host memory)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    address: int | None
    owner: object  # the exporting object, kept alive by whoever keeps the layout

    @property
    def extent_bytes(self) -> int:
        """Bytes from the address to one past the last element (0 for an empty array)."""
        if any(n == 0 for n in self.shape):
            return 0
        return sum((n - 1) * abs(s) for n, s in zip(self.shape, self.strides_bytes)) + self.dtype.itemsize


def is_array(obj) -> bool:
    """True for objects this module can read: DLPack or CUDA Array Interface exporters, NumPy arrays."""
    return isinstance(obj, np.ndarray) or hasattr(obj, "__dlpack__") or hasattr(obj, "__cuda_array_interface__")


def array_layout(obj) -> ArrayLayout:
    """The layout of a NumPy array, a DLPack / CUDA Array Interface exporter, or a cuda.core StridedMemoryView."""
    if isinstance(obj, np.ndarray):
        return ArrayLayout(obj.dtype, obj.shape, obj.strides, None, obj)
    if not is_array(obj):
        raise TensorMapError("array", "arr", type(obj).__name__, "give a NumPy array or a device array (torch, "
                             "CuPy, JAX, cuda.core)", "it has neither __dlpack__ nor __cuda_array_interface__")
    if not hasattr(obj, "__dlpack__"):
        _check_cai(obj.__cuda_array_interface__)
    view = strided_view(obj)
    if view is None:  # a CUDA Array Interface exporter, and no driver for cuda.core to ask about its pointer
        return _cai_layout(obj)
    dtype = _view_dtype(view, obj)
    strides = view.strides
    shape = tuple(int(n) for n in view.shape)
    if strides is None:  # C-contiguous
        strides_bytes = contiguous_strides_bytes(shape, dtype.itemsize)
    else:
        strides_bytes = tuple(int(s) * dtype.itemsize for s in strides)
    address = int(view.ptr) if view.is_device_accessible else None
    return ArrayLayout(dtype, shape, strides_bytes, address, obj)


def _view_dtype(view, obj) -> np.dtype:
    """The view's element type; where this cuda.core cannot name it (it knows no fp8), the fp8 type of the DLPack
    code in the exporter's capsule, else of the exporter's own type name (torch.float8_e4m3fn)."""
    try:
        return np.dtype(view.dtype)
    except (TypeError, ValueError) as exc:
        code = dlpack_dtype(obj)
        name = _DLPACK_FP8.get(code[0]) if code is not None and code[1:] == (8, 1) else None
        own = str(getattr(obj, "dtype", "")).rsplit(".", 1)[-1]
        if name is None and own in _DLPACK_FP8.values():
            name = own
        if name is not None and hasattr(ml_dtypes, name):
            return np.dtype(getattr(ml_dtypes, name))
        raise TypeError(f"{type(obj).__name__}: cuda.core cannot name its element type ({exc})") from None


def _check_cai(cai) -> None:
    """The CUDA Array Interface's required keys, read here before cuda.core (or the driver) sees them."""
    def bad(key, value, fix):
        return TensorMapError("array", f"__cuda_array_interface__[{key!r}]", value, fix,
                              "not a CUDA Array Interface (version 3) dict")

    if not isinstance(cai, dict):
        raise bad("", type(cai).__name__, "give a dict with shape, typestr, data and version")
    shape = cai.get("shape")
    if not isinstance(shape, (tuple, list)) or not all(is_int(n) and n >= 0 for n in shape):
        raise bad("shape", shape, "give a tuple of non-negative ints")
    try:
        if not isinstance(cai.get("typestr"), str):
            raise TypeError  # np.dtype(None) would be float64
        np.dtype(cai["typestr"])
    except (TypeError, ValueError):
        raise bad("typestr", cai.get("typestr"), "give a NumPy type string such as '<f4'") from None
    data = cai.get("data")
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and is_int(data[0]) and data[0] >= 0):
        raise bad("data", data, "give (pointer, read_only) with a non-negative int pointer")
    strides = cai.get("strides")
    if strides is not None and (not isinstance(strides, (tuple, list)) or len(strides) != len(shape)
                                or not all(is_int(v) for v in strides)):
        raise bad("strides", strides, "give None (C order) or one int per axis")


def _cai_layout(obj) -> ArrayLayout:
    cai = obj.__cuda_array_interface__
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    strides_bytes = tuple(int(s) for s in strides) if strides else contiguous_strides_bytes(shape, dtype.itemsize)
    return ArrayLayout(dtype, shape, strides_bytes, int(cai["data"][0]), obj)

