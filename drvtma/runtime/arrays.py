"""Device arrays from the ecosystem (torch, CuPy, JAX, cuda.core) as cuda.core `StridedMemoryView`s: one reader of
``__dlpack__`` and ``__cuda_array_interface__`` for launch arguments (`kernel`) and tensor-map layouts
(`tma.arrays`). No stream ordering is set up (stream_ptr=-1): a view reads no data."""

from __future__ import annotations


def strided_view(obj):
    """A StridedMemoryView of `obj` (DLPack first: the CUDA Array Interface cannot name bf16 or fp8), or None for
    a CUDA Array Interface exporter when there is no driver for cuda.core to ask about its pointer."""
    from cuda.core.utils import StridedMemoryView

    if isinstance(obj, StridedMemoryView):
        return obj
    # cuda.core >= 0.5 names the protocol; older versions have only the constructor (DLPack first, then CAI)
    if hasattr(obj, "__dlpack__"):
        make = getattr(StridedMemoryView, "from_dlpack", StridedMemoryView)
        try:
            return make(obj, -1)  # -1: no stream ordering (DLPack's "no synchronization")
        except TypeError:
            if isinstance(obj, DLPackOnly):
                raise
            # cuda.core reads torch tensors through a fast path that knows no fp8 ("Unsupported AOTI dtype code:
            # 24" on the H200 image, cuda.core 1.2.0) although the tensor's own DLPack capsule carries it
            return make(DLPackOnly(obj), -1)
    if hasattr(obj, "__cuda_array_interface__"):
        try:
            return getattr(StridedMemoryView, "from_cuda_array_interface", StridedMemoryView)(obj, -1)
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
    from . import driver

    try:
        driver.context()
    except Exception:  # noqa: BLE001 - NoGpuError, or a driver library that cannot be loaded
        return True
    return False
