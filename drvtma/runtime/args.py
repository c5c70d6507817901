"""A kernel's arguments as its parameter space: one 128-byte-aligned image and the kernelParams array that points
into it (cuda.core's `_kernel_arg_handler` seam). Needs no GPU: every check here is tested on the CPU."""

from __future__ import annotations

import struct
from operator import is_

import numpy as np

from ..errors import LaunchError
from .driver import DeviceBuffer

_INT_FORMATS = {1: ("<b", "<B"), 2: ("<h", "<H"), 4: ("<i", "<I"), 8: ("<q", "<Q")}
_FLOAT_FORMATS = {4: "<f", 8: "<d"}


class ArgPacker:
    """Packs launch arguments into one 128-byte-aligned image laid out as a kernel's parameter space.

    `params` is [(offset, size)] (cuKernelGetParamInfo's, or the cubin's). Needs no GPU, so its checks are tested on
    the CPU. kernelParams[i] points into the image, except for by-value objects (``__drvtma_param__``, e.g. a
    TensorMap): there it points at the object's own bytes, which the driver copies at each launch, so a map passed
    again (even after `replace_address`) costs no copy here. `refresh(i, arg)` rewrites one argument alone (a
    prepared launch's changed value), with the same checks of its type and size as a full pack.
    """

    def __init__(self, kernel_name: str, params: list[tuple[int, int]]):
        self.kernel_name, self.params = kernel_name, list(params)
        size = max((o + s for o, s in self.params), default=0)
        self._raw = np.zeros(size + 128, dtype=np.uint8)
        base = (-self._raw.ctypes.data) % 128
        self.image = self._raw[base:base + size]
        self._image_addr = self.image.ctypes.data
        self._view = self.image.data.cast("B")  # .data: numpy's stubs make ndarray a Buffer only on Python 3.12+
        self._in_image = [self._image_addr + o for o, _ in self.params]
        self._entries = list(self._in_image)  # what kernelParams holds now
        self._pointers = np.array(self._entries, dtype=np.uint64)
        self.pointers_address = self._pointers.ctypes.data if self.params else 0
        # Never the caller's objects: "same arguments as last time" cannot hold before a first pack; it has the
        # kernel's length, so an empty call of a kernel with parameters is counted.
        self._no_last = tuple(object() for _ in self.params)
        self._last: tuple = self._no_last
        self._buffers: list = []  # (index, the buffer's finalizer): a closed buffer is refused on every launch
        self._arrays: list = []  # (index, offset, array, reader): an array's address is read at every launch
        self._readers: dict[int, tuple] = {}  # index -> (type, reader): an array type's checks, once per position

    def pack(self, args) -> int:
        """Write args into the image; return the address of the argument-pointer array (kernelParams).

        The very same objects as last time need only what can change under the same object: a buffer closed since,
        an array's address (a tensor can be resized in place). Ints, floats and numpy scalars are immutable, so the
        image still holds them; by-value objects are read by the driver where they live."""
        last = self._last
        if len(args) != len(last) or not all(map(is_, args, last)):
            return self._pack_new(args)
        for i, alive in self._buffers:
            if not alive.alive:
                raise LaunchError(f"{self.kernel_name}: argument {i} is a closed DeviceBuffer")
        for i, offset, arr, reader in self._arrays:
            struct.pack_into("<Q", self._view, offset, reader(self.kernel_name, i, arr))
        return self.pointers_address

    def _pack_new(self, args) -> int:
        if len(args) != len(self.params):
            raise LaunchError(f"{self.kernel_name} takes {len(self.params)} argument(s) "
                              f"(sizes {[s for _, s in self.params]}), got {len(args)}")
        self._last = self._no_last  # none while half packed: an argument may be refused
        buffers: list = []
        arrays: list = []
        put = self._put
        for i, arg in enumerate(args):
            put(i, arg, buffers, arrays)
        # _last keeps the arguments alive too: by-value objects' bytes are what kernelParams points at
        self._last, self._buffers, self._arrays = tuple(args), buffers, arrays
        return self.pointers_address

    def refresh(self, i: int, arg) -> None:
        """Write argument i alone, checked for its type and size as in a full pack; the other arguments' bytes stay.
        The next `pack` packs everything again (its "same objects as last time" no longer holds). The caller keeps
        `arg` alive while launches read it (a by-value object's bytes are what kernelParams[i] points at)."""
        if not 0 <= i < len(self.params):
            raise LaunchError(f"{self.kernel_name} has {len(self.params)} parameter(s); there is no argument {i}")
        self._last = self._no_last
        self._put(i, arg, [], [])

    def _put(self, i: int, arg, buffers: list, arrays: list) -> None:
        """Argument i into the image (or kernelParams[i] at a by-value object's bytes); a buffer's finalizer goes
        to `buffers`, an array's reader to `arrays` (what pack's fast path looks at again)."""
        offset, size = self.params[i]
        view = self._view
        where = self._in_image[i]
        if isinstance(arg, DeviceBuffer):
            if size != 8:
                raise self._mismatch(i, size, "a device pointer (8 bytes)")
            if arg.closed:
                raise LaunchError(f"{self.kernel_name}: argument {i} is a closed DeviceBuffer")
            struct.pack_into("<Q", view, offset, arg.ptr)
            buffers.append((i, arg._finalizer))
        elif isinstance(arg, int):  # bool too; numpy scalars take the exact-size path below
            fmt = _INT_FORMATS.get(size)
            if fmt is None:
                raise self._mismatch(i, size, "an int")
            if not -(1 << (8 * size - 1)) <= arg < (1 << (8 * size)):
                raise LaunchError(f"{self.kernel_name}: argument {i} = {arg} does not fit its {size}-byte "
                                  "parameter")
            struct.pack_into(fmt[0] if arg < 0 else fmt[1], view, offset, arg)
        elif isinstance(arg, float):
            float_fmt = _FLOAT_FORMATS.get(size)
            if float_fmt is None:
                raise self._mismatch(i, size, "a float")
            struct.pack_into(float_fmt, view, offset, arg)
        elif isinstance(arg, np.generic):
            if arg.dtype.itemsize != size:
                raise self._mismatch(i, size, f"numpy {arg.dtype} ({arg.dtype.itemsize} bytes)")
            view[offset:offset + size] = arg.tobytes()
        elif hasattr(arg, "__dlpack__") or hasattr(arg, "__cuda_array_interface__"):
            if size != 8:  # torch, CuPy, JAX, cuda.core: the array's device address, as a DeviceBuffer gives
                raise self._mismatch(i, size, f"a device array ({type(arg).__name__}, passed as its pointer)")
            reader = self._reader(i, arg)
            struct.pack_into("<Q", view, offset, reader(self.kernel_name, i, arg))
            arrays.append((i, offset, arg, reader))
        elif hasattr(arg, "__drvtma_param__"):
            where, nbytes = arg.__drvtma_param__()  # the object's bytes stay where they are while it lives
            if nbytes != size:
                raise self._mismatch(i, size, f"{type(arg).__name__} ({nbytes} bytes)")
        else:
            raise LaunchError(f"{self.kernel_name}: argument {i} has unsupported type {type(arg).__name__}; "
                              "pass an int, float, numpy scalar, DeviceBuffer, device array or TensorMap")
        if self._entries[i] != where:
            self._entries[i] = where
            self._pointers[i] = where

    def _reader(self, i: int, arr):
        """The address reader of argument i's array type: on its first sight here every check through a
        StridedMemoryView, after that only the reader (a new array of the same type builds no view)."""
        known = self._readers.get(i)
        if known is not None and known[0] is type(arr):
            return known[1]
        _array_address(self.kernel_name, i, arr)
        reader = _pointer_reader(arr)
        self._readers[i] = (type(arr), reader)
        return reader

    def _mismatch(self, i: int, size: int, got: str) -> LaunchError:
        return LaunchError(f"{self.kernel_name}: argument {i} is a {size}-byte parameter in the kernel, got {got}")


def _array_address(kernel_name: str, i: int, arr) -> int:
    """The device address of an array from DLPack or the CUDA Array Interface (runtime.arrays; no stream ordering:
    the launch goes on the stream it is given)."""
    from .arrays import strided_view

    if isinstance(arr, np.ndarray):
        raise LaunchError(f"{kernel_name}: argument {i} is a NumPy array in host memory; upload it "
                          "(DeviceBuffer.from_array) and pass the buffer")
    view = strided_view(arr)
    if view is None or not view.is_device_accessible:
        raise LaunchError(f"{kernel_name}: argument {i} ({type(arr).__name__}) is in host memory")
    return int(view.ptr)


def _tensor_address(kernel_name: str, i: int, t) -> int:
    """A torch tensor's address; its device is asked every time (`t.data = ...` can move the same tensor)."""
    if not t.is_cuda:
        raise LaunchError(f"{kernel_name}: argument {i} ({type(t).__name__}) is in host memory")
    return int(t.data_ptr())


def _interface_address(kernel_name: str, i: int, arr) -> int:
    """A CUDA Array Interface exporter's address (device memory by the interface's contract)."""
    return int(arr.__cuda_array_interface__["data"][0])


def _pointer_reader(arr):
    """How an array type's address is read at each launch, from what the type offers: torch's data_ptr(), the
    CUDA Array Interface's data (CuPy, Numba), else a new StridedMemoryView (a bare DLPack exporter has no cheaper
    route). Each gives the first element's address, as the view's ptr does."""
    if callable(getattr(arr, "data_ptr", None)) and hasattr(arr, "is_cuda"):
        return _tensor_address
    if hasattr(arr, "__cuda_array_interface__"):
        return _interface_address
    return _array_address
