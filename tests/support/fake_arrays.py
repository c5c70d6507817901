"""Small fake array exporters for CPU tests: a DLPack exporter built with ctypes (any device, address and type
code, so bf16 and fp8 can be named without a GPU) and a CUDA Array Interface exporter."""

from __future__ import annotations

import ctypes

DL_CPU, DL_CUDA = 1, 2
DL_INT, DL_UINT, DL_FLOAT, DL_COMPLEX, DL_BFLOAT, DL_FLOAT8_E4M3FN, DL_FLOAT8_E5M2 = 0, 1, 2, 5, 4, 10, 12


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


@_DELETER
def _keep(_):  # the exporter owns the structs (kept in FakeDLPack._exports)
    pass


class FakeDLPack:
    """An unversioned DLPack exporter of `shape` / `strides` (elements; None: C-contiguous) at `address`."""

    def __init__(self, address, shape, strides, code, bits, device=(DL_CUDA, 0)):
        self.address, self.shape, self.strides = address, tuple(shape), strides
        self.code, self.bits, self.device = code, bits, device
        self._exports = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        n = len(self.shape)
        shape = (ctypes.c_int64 * n)(*self.shape)
        strides = (ctypes.c_int64 * n)(*self.strides) if self.strides is not None else None
        m = _Managed()
        m.dl_tensor = _Tensor(self.address, _Device(*self.device), n, _DataType(self.code, self.bits, 1), shape,
                              strides, 0)
        m.deleter = _keep
        self._exports.append((m, shape, strides))
        return _capsule_new(ctypes.addressof(m), b"dltensor", None)


class FakeCAI:
    """A CUDA Array Interface (v3) exporter; strides in bytes (None: C-contiguous)."""

    def __init__(self, address, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (address, False),
                                         "version": 3, "strides": strides, "stream": None}
