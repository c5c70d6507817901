"""Releasing driver resources, with a fake driver call (no GPU): an explicit close() checks the driver's status and
raises CudaError naming the call; a finalizer (garbage collection, interpreter exit) reads it and drops it; a
second close does nothing; close_all closes everything before it raises."""

from __future__ import annotations

import gc
import weakref

import pytest

from drvtma.errors import CudaError
from drvtma.runtime.driver import DeviceBuffer, Event, Stream, close_all, released_quietly
from drvtma.runtime.kernel import Module

cu = pytest.importorskip("cuda.bindings.driver")


class FakeCall:
    """Stands in for a cuda-python driver function: records each handle, answers with `code`."""

    def __init__(self, name: str, code=None):
        self.__name__ = name
        self.code = code if code is not None else cu.CUresult.CUDA_ERROR_INVALID_VALUE
        self.calls: list = []

    def __call__(self, handle):
        self.calls.append(handle)
        return (self.code,)


def _owner(cls, attr: str, fake: FakeCall, handle: int = 1234):
    """An instance of `cls` that owns `handle` through `fake`, made without the driver."""
    obj = cls.__new__(cls)
    obj.ptr = obj.handle = handle
    obj.nbytes = 16
    obj._kernels = {}
    setattr(obj, attr, weakref.finalize(obj, released_quietly, fake, handle))
    return obj


OWNERS = [(DeviceBuffer, "_free", "cuMemFree"), (Stream, "_destroy", "cuStreamDestroy"),
          (Event, "_destroy", "cuEventDestroy"), (Module, "_unload", "cuLibraryUnload")]


@pytest.mark.parametrize("cls, attr, name", OWNERS, ids=[o[0].__name__ for o in OWNERS])
def test_an_explicit_close_raises_the_drivers_error_once(cls, attr, name):
    fake = FakeCall(name)
    obj = _owner(cls, attr, fake)
    with pytest.raises(CudaError) as info:
        obj.close()
    assert info.value.call == name and "CUDA_ERROR_INVALID_VALUE" in str(info.value)
    obj.close()  # released (or given up) already: nothing more to do, nothing raised
    del obj
    gc.collect()
    assert fake.calls == [1234]  # the finalizer did not run the call a second time


@pytest.mark.parametrize("cls, attr, name", OWNERS, ids=[o[0].__name__ for o in OWNERS])
def test_a_finalizer_drops_the_drivers_error(cls, attr, name):
    fake = FakeCall(name)
    obj = _owner(cls, attr, fake, handle=99)
    del obj
    gc.collect()  # the finalizer runs here: an exception would be printed, not raised; none is
    assert fake.calls == [99]


def test_a_successful_close_is_quiet():
    fake = FakeCall("cuMemFree", cu.CUresult.CUDA_SUCCESS)
    buf = _owner(DeviceBuffer, "_free", fake)
    buf.close()
    assert buf.closed and fake.calls == [1234]


def test_close_all_closes_everything_then_raises_the_first_error():
    fakes = [FakeCall("cuMemFree"), FakeCall("cuMemFree", cu.CUresult.CUDA_SUCCESS), FakeCall("cuEventDestroy")]
    owners = [_owner(DeviceBuffer, "_free", fakes[0], 1), _owner(DeviceBuffer, "_free", fakes[1], 2),
              _owner(Event, "_destroy", fakes[2], 3)]
    with pytest.raises(CudaError) as info:
        close_all([owners[0], None, owners[1], owners[2]])
    assert info.value.call == "cuMemFree"
    assert [f.calls for f in fakes] == [[1], [2], [3]]


def test_released_quietly_survives_a_driver_that_is_gone():
    def gone(handle):
        raise RuntimeError("CUDA driver deinitialized")

    released_quietly(gone, 1)  # interpreter exit: nothing to raise to
