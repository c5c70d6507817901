"""Releasing driver resources, with a fake driver call (no GPU): an explicit close() checks the driver's status and
raises CudaError naming the call; a finalizer (garbage collection, interpreter exit) reads it and drops it; a
second close does nothing; close_all closes everything before it raises. Every class on the one lifecycle
(runtime.driver.Resource) is covered: the handle owners and the owners of other resources."""

from __future__ import annotations

import gc

import pytest

from drvtma.b08.modes import B08Runner
from drvtma.cluster.probe import MulticastProbe
from drvtma.errors import CudaError
from drvtma.fuzz.targets import Session
from drvtma.gemm.claims import _Operands
from drvtma.gemm.cublas import LtGemm, TorchGemm
from drvtma.gemm.launch import BoundGemm
from drvtma.runtime.driver import (
    DeviceBuffer,
    Event,
    LibraryHandle,
    Resource,
    ScratchBuffers,
    Stream,
    close_all,
    released_quietly,
)
from drvtma.runtime.kernel import Module
from drvtma.runtime.status import StatusBuffer
from drvtma.tma.maps.global_maps import GlobalMapRunner, MapSlots
from drvtma.tma.tiled.probe import LoadProbe
from drvtma.wgmma.probe import WgmmaProbe

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


def _owner(cls, fake: FakeCall, handle: int = 1234):
    """An instance of `cls` that owns `handle` through `fake`, made without the driver."""
    obj = cls.__new__(cls)
    obj.ptr = obj.handle = handle
    obj.nbytes = 16
    obj._kernels = {}
    obj._own(fake, handle)
    return obj


OWNERS = [(DeviceBuffer, "cuMemFree"), (StatusBuffer, "cuMemFree"), (Stream, "cuStreamDestroy"),
          (Event, "cuEventDestroy"), (Module, "cuLibraryUnload")]


@pytest.mark.parametrize("cls, name", OWNERS, ids=[o[0].__name__ for o in OWNERS])
def test_an_explicit_close_raises_the_drivers_error_once(cls, name):
    fake = FakeCall(name)
    obj = _owner(cls, fake)
    with pytest.raises(CudaError) as info:
        obj.close()
    assert info.value.call == name and "CUDA_ERROR_INVALID_VALUE" in str(info.value)
    assert obj.closed
    obj.close()  # released (or given up) already: nothing more to do, nothing raised
    del obj
    gc.collect()
    assert fake.calls == [1234]  # the finalizer did not run the call a second time


@pytest.mark.parametrize("cls, name", OWNERS, ids=[o[0].__name__ for o in OWNERS])
def test_a_finalizer_drops_the_drivers_error(cls, name):
    fake = FakeCall(name)
    obj = _owner(cls, fake, handle=99)
    del obj
    gc.collect()  # the finalizer runs here: an exception would be printed, not raised; none is
    assert fake.calls == [99]


@pytest.mark.parametrize("cls, name", OWNERS, ids=[o[0].__name__ for o in OWNERS])
def test_a_with_block_closes(cls, name):
    fake = FakeCall(name, cu.CUresult.CUDA_SUCCESS)
    with _owner(cls, fake) as obj:
        assert not obj.closed
    assert obj.closed and fake.calls == [1234]


def test_a_successful_close_is_quiet():
    fake = FakeCall("cuMemFree", cu.CUresult.CUDA_SUCCESS)
    buf = _owner(DeviceBuffer, fake)
    buf.close()
    assert buf.closed and fake.calls == [1234]


def _scratch(*parts):
    s = ScratchBuffers(minimum=1)
    s._buffers = {f"part{i}": p for i, p in enumerate(parts)}
    return s


# Owners of other resources: what each holds, built from fake-owned buffers (None: a part not made yet).
COMPOSITES = {
    "ScratchBuffers": (ScratchBuffers, lambda a, b: {"_buffers": {"coords": a, "images": b}, "minimum": 1}),
    "BoundGemm": (BoundGemm, lambda a, b: {"status": a, "workspace": b, "flags": None}),
    "MapSlots": (MapSlots, lambda a: {"buffer": a}),
    "GlobalMapRunner": (GlobalMapRunner, lambda a, b: {"scratch": _scratch(a), "status": b}),
    "WgmmaProbe": (WgmmaProbe, lambda a, b: {"scratch": _scratch(a, b), "status": None}),
    "LoadProbe": (LoadProbe, lambda a, b: {"scratch": _scratch(a), "status": b}),
    "MulticastProbe": (MulticastProbe, lambda a, b: {"scratch": _scratch(a), "status": b}),
    "B08Runner": (B08Runner, lambda a, b: {"_sums": a, "_flush": None, "status": b}),
    "LtGemm": (LtGemm, lambda a, b: {"_plans": [a], "workspace": b}),
    "_Operands": (_Operands, lambda a, b, c, d: {"a": a, "b": b, "ref": c, "c": d}),
    "Session": (Session, lambda a, b: {"_handles": [a, b]}),
}


def _composite(name: str, code=None):
    """An owner of other resources holding fake-owned buffers (handles 1, 2, ...), and their fake calls."""
    cls, attrs = COMPOSITES[name]
    fakes = [FakeCall("cuMemFree", code) for _ in range(attrs.__code__.co_argcount)]
    obj = cls.__new__(cls)
    obj.__dict__.update(attrs(*(_owner(DeviceBuffer, f, i + 1) for i, f in enumerate(fakes))))
    return obj, fakes


def test_every_owner_of_driver_handles_is_on_the_one_lifecycle():
    for cls, _ in OWNERS:
        assert issubclass(cls, Resource) and "__exit__" not in vars(cls) and "__enter__" not in vars(cls)
    for cls, _ in COMPOSITES.values():
        assert issubclass(cls, Resource) and not {"close", "__enter__", "__exit__"} & set(vars(cls))
    assert issubclass(TorchGemm, Resource) and "close" not in vars(TorchGemm)  # owns nothing; closes like the rest


@pytest.mark.parametrize("name", COMPOSITES)
def test_an_owner_closes_every_part_then_raises_the_first_error(name):
    obj, fakes = _composite(name)
    with pytest.raises(CudaError) as info:
        obj.close()
    assert info.value.call == "cuMemFree"
    obj.close()  # its parts are released already: nothing more to do, nothing raised
    del obj
    gc.collect()
    assert [f.calls for f in fakes] == [[i + 1] for i in range(len(fakes))]  # each released once


@pytest.mark.parametrize("name", COMPOSITES)
def test_an_owner_in_a_with_block_releases_its_parts(name):
    obj, fakes = _composite(name, cu.CUresult.CUDA_SUCCESS)
    with obj as same:
        assert same is obj
    assert [f.calls for f in fakes] == [[i + 1] for i in range(len(fakes))]


@pytest.mark.parametrize("name", COMPOSITES)
def test_an_owner_never_closed_leaves_its_parts_to_their_finalizers(name):
    obj, fakes = _composite(name)
    del obj
    gc.collect()  # the parts' finalizers run, quietly
    assert [f.calls for f in fakes] == [[i + 1] for i in range(len(fakes))]


def test_an_owner_releases_its_parts_before_its_own_handle():
    order = []

    class Owner(Resource):
        def _parts(self):
            return self.part, None

    part = _owner(DeviceBuffer, FakeCall("cuMemFree"), 7)
    part._own(lambda h: order.append(("part", h)) or (cu.CUresult.CUDA_ERROR_INVALID_VALUE,), 7)
    owner = Owner()
    owner.part = part
    owner._own(lambda h: order.append(("own", h)) or (cu.CUresult.CUDA_SUCCESS,), 8)
    with pytest.raises(CudaError):
        owner.close()  # the part's error, raised after the owner's own handle was released too
    assert order == [("part", 7), ("own", 8)] and owner.closed and part.closed


def test_close_all_closes_everything_then_raises_the_first_error():
    fakes = [FakeCall("cuMemFree"), FakeCall("cuMemFree", cu.CUresult.CUDA_SUCCESS), FakeCall("cuEventDestroy")]
    owners = [_owner(DeviceBuffer, fakes[0], 1), _owner(DeviceBuffer, fakes[1], 2),
              _owner(Event, fakes[2], 3)]
    with pytest.raises(CudaError) as info:
        close_all([owners[0], None, owners[1], owners[2]])
    assert info.value.call == "cuMemFree"
    assert [f.calls for f in fakes] == [[1], [2], [3]]


def test_released_quietly_survives_a_driver_that_is_gone():
    def gone(handle):
        raise RuntimeError("CUDA driver deinitialized")

    released_quietly(gone, 1)  # interpreter exit: nothing to raise to


class Part(Resource):
    """A part whose close() succeeds or raises `error`, counting its calls."""

    def __init__(self, error: Exception | None = None):
        self.error, self.calls = error, 0

    def close(self) -> None:
        self.calls += 1
        if self.error is not None and self.calls == 1:
            raise self.error


def test_a_session_closes_every_handle_even_if_one_fails_then_once_only():
    session = Session({})
    parts = [session.own(Part()), session.own(Part(RuntimeError("second refused"))), session.own(Part())]
    with pytest.raises(RuntimeError, match="second refused"):
        with session:
            pass
    assert [p.calls for p in parts] == [1, 1, 1]
    session.close()  # nothing left: nothing closed again, nothing raised
    assert [p.calls for p in parts] == [1, 1, 1]


def test_a_session_closes_the_last_opened_first():
    order = []
    session = Session({})
    for name in ("buffer", "probe"):
        part = session.own(Part())
        part.close = lambda name=name: order.append(name)
    session.close()
    assert order == ["probe", "buffer"]


def test_claims_operands_close_every_buffer_even_if_cublas_plan_release_fails():
    ops, fakes = _composite("_Operands", cu.CUresult.CUDA_SUCCESS)
    released = []

    def plan_close():
        released.append("plan")
        raise RuntimeError("cuBLASLt refused")

    ops.launch = type("Plan", (), {"close": staticmethod(plan_close)})()
    with pytest.raises(RuntimeError, match="cuBLASLt refused"):
        ops.close()
    assert released == ["plan"] and [f.calls for f in fakes] == [[1], [2], [3], [4]]
    ops.launch = None  # as after a plan's release: the buffers are closed already
    ops.close()
    assert [f.calls for f in fakes] == [[1], [2], [3], [4]]


def test_claims_operands_made_halfway_release_what_was_made(monkeypatch):
    """A failure while the operands are made (the cuBLAS plan refused) releases the buffers made so far."""
    import numpy as np

    from drvtma.runtime import driver

    made = []

    def buffer(nbytes):
        buf = _owner(DeviceBuffer, FakeCall("cuMemFree", cu.CUresult.CUDA_SUCCESS), len(made) + 1)
        made.append(buf)
        return buf

    buffer.from_array = lambda arr: buffer(arr.nbytes)
    monkeypatch.setattr(driver, "DeviceBuffer", buffer)

    class Refusing:
        def plan(self, *args):
            raise RuntimeError("no plan")

    with pytest.raises(RuntimeError, match="no plan"):
        _Operands(Refusing(), "bfloat16", "bfloat16", 8, 8, 8, np.random.default_rng(0), None, 1, 0)
    assert len(made) == 4 and all(b.closed for b in made)


def test_a_library_handle_raises_its_librarys_error_once_and_its_finalizer_drops_it():
    calls = []

    def destroy(handle):
        calls.append(handle)
        raise ValueError(f"cannot destroy {handle}")

    h = LibraryHandle(destroy, 5)
    with pytest.raises(ValueError, match="cannot destroy 5"):
        h.close()
    assert h.closed
    h.close()
    del h
    gc.collect()
    assert calls == [5]
    g = LibraryHandle(destroy, 6)
    del g
    gc.collect()  # the finalizer: its error dropped, not raised
    assert calls == [5, 6]
