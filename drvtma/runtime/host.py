"""Page-locked (pinned) host memory: a download into it is one DMA at the bus's speed, where a download into an
ordinary NumPy array goes through the driver's own staging buffer and pays page faults on fresh memory (a fuzz
campaign's images: a megabyte a case)."""

from __future__ import annotations

import ctypes

import numpy as np
from cuda.bindings import driver as cu

from .driver import Resource, call, context


class PinnedBuffer(Resource):
    """`nbytes` of pinned host memory owned by this object (cuMemHostAlloc), freed by close(), a with-block or the
    garbage collector; `array(dtype, shape)` views its start."""

    def __init__(self, nbytes: int):
        self.nbytes = max(int(nbytes), 1)
        context()
        self.ptr = int(call(cu.cuMemHostAlloc, self.nbytes, 0))
        self._own(cu.cuMemFreeHost, self.ptr)
        self._bytes = np.ctypeslib.as_array((ctypes.c_uint8 * self.nbytes).from_address(self.ptr))

    def array(self, dtype, shape) -> np.ndarray:
        """A view of the first bytes as `shape` of `dtype` (valid while the buffer is open)."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if count * dtype.itemsize > self.nbytes:
            raise ValueError(f"{count * dtype.itemsize} B do not fit the {self.nbytes} B pinned buffer")
        return self._bytes[:count * dtype.itemsize].view(dtype).reshape(shape)


class PinnedScratch(Resource):
    """Pinned host memory that only grows: `array(dtype, shape)` views a buffer of at least that size, reused while
    it is large enough (each view valid until the next call)."""

    def __init__(self, minimum: int = 1 << 20):
        self.minimum = int(minimum)
        self._buffer: PinnedBuffer | None = None

    def array(self, dtype, shape) -> np.ndarray:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if self._buffer is None or self._buffer.nbytes < nbytes:
            if self._buffer is not None:
                self._buffer.close()
            self._buffer = PinnedBuffer(max(nbytes, self.minimum, 2 * (self._buffer.nbytes if self._buffer else 0)))
        return self._buffer.array(dtype, shape)

    def _parts(self) -> tuple:
        buffer, self._buffer = self._buffer, None
        return (buffer,)
