"""Device arrays from the ecosystem (torch, CuPy, JAX, cuda.core) as cuda.core `StridedMemoryView`s: one reader of
``__dlpack__`` and ``__cuda_array_interface__`` for launch arguments (`kernel`) and tensor-map layouts
(`tma.arrays`). No stream ordering is set up (stream_ptr=-1): a view reads no data."""

from __future__ import annotations

import ctypes

from ..compat import strided_view_maker
from . import driver


def strided_view(obj):
    """A StridedMemoryView of `obj` (DLPack first: the CUDA Array Interface cannot name bf16 or fp8), or None for
    a CUDA Array Interface exporter when there is no driver for cuda.core to ask about its pointer."""
    from cuda.core.utils import StridedMemoryView

    if isinstance(obj, StridedMemoryView):
        return obj
    if hasattr(obj, "__dlpack__"):
        make = strided_view_maker("dlpack")
        try:
            return make(obj, -1)  # -1: no stream ordering (DLPack's "no synchronization")
        except TypeError:
            if isinstance(obj, DLPackOnly):
                raise
            # cuda.core reads torch tensors through a fast path that knows no fp8 ("Unsupported AOTI dtype code:
            # 24" from cuda.core 1.2.0) although the tensor's own DLPack capsule carries it
            return make(DLPackOnly(obj), -1)
    if hasattr(obj, "__cuda_array_interface__"):
        try:
            return strided_view_maker("cuda_array_interface")(obj, -1)
        except Exception as exc:  # noqa: BLE001 - cuda.core asks the driver which device holds the pointer
            if no_driver(exc):
                return None
            raise
    raise TypeError(f"{type(obj).__name__} is not an array: it has neither __dlpack__ nor "
                    "__cuda_array_interface__ (NumPy arrays, torch, CuPy, JAX and cuda.core views have one)")


class DLPackOnly:
    """An exporter seen only through its DLPack methods (no type-specific fast path in cuda.core)."""

    def __init__(self, obj):
        self.obj = obj
        self.dtype = getattr(obj, "dtype", None)  # for tma.arrays' fallback type name

    def __dlpack__(self, *args, **kwargs):
        return self.obj.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.obj.__dlpack_device__()


def no_driver(exc: Exception) -> bool:
    """True when `exc` came from having no usable driver (then a CAI layout is read from the interface itself)."""
    try:
        driver.context()
    except Exception:  # noqa: BLE001 - NoGpuError, or a driver library that cannot be loaded
        return True
    return False


# dlpack.h: DLTensor is {void* data; DLDevice device (2 x int32); int32 ndim; DLDataType dtype; ...}, at the start of
# a "dltensor" capsule's DLManagedTensor and after {version (2 x uint32), manager_ctx, deleter, uint64 flags} in a
# "dltensor_versioned" one's DLManagedTensorVersioned.
_DTYPE_OFFSET = {b"dltensor": 20, b"dltensor_versioned": 32 + 20}
_DL_CUDA_DEVICES = (2, 13)  # kDLCUDA, kDLCUDAManaged: exporters that take a stream (-1: no synchronization)


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


# prototypes of our own (setting ctypes.pythonapi's argtypes would change them for every other user)
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def dlpack_dtype(obj) -> tuple[int, int, int] | None:
    """(code, bits, lanes) of the DLDataType in `obj`'s DLPack capsule, None where it gives none. The capsule is
    read, not consumed: its name stays, so when it is dropped its destructor hands the tensor back to the exporter."""
    try:
        device = obj.__dlpack_device__()[0]
        capsule = obj.__dlpack__(stream=-1 if device in _DL_CUDA_DEVICES else None)
    except Exception:  # noqa: BLE001 - any exporter's refusal means the same here: no type code to read
        return None
    name = _capsule_name(capsule)
    if name not in _DTYPE_OFFSET:
        return None
    dtype = _DLDataType.from_address(_capsule_pointer(capsule, name) + _DTYPE_OFFSET[name])
    return int(dtype.code), int(dtype.bits), int(dtype.lanes)
