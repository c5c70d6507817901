"""The prepared launch (`Kernel.prepare(config, *args)`, runtime.launch.PreparedLaunch) on a fake driver: a Kernel
made without a GPU, and a cuLaunchKernelEx that reads each parameter as the driver does (kernelParams[i] -> its
bytes). A refresh leaves the argument buffer byte for byte as a fresh pack of the same arguments; only the changed
positions are written and checked; the launch configuration is built once; the ordinary launch keeps its checks."""

from __future__ import annotations

import ctypes
import random

import numpy as np
import pytest

from drvtma.errors import CudaError, LaunchError
from drvtma.runtime import args as args_mod
from drvtma.runtime import launch as launch_mod
from drvtma.runtime.args import ArgPacker
from drvtma.runtime.launch import LaunchConfig, PreparedLaunch
from drvtma.runtime.module import Kernel

cu = pytest.importorskip("cuda.bindings.driver")

# echo_args's layout: a 128-byte map, int, double, int8, u64, float, short, pointer
PARAMS = [(0, 128), (128, 4), (136, 8), (144, 1), (152, 8), (160, 4), (164, 2), (168, 8)]


class FakeMap:
    def __init__(self, data: bytes):
        self.buf = np.frombuffer(data, dtype=np.uint8).copy()

    def __drvtma_param__(self):
        return self.buf.ctypes.data, self.buf.nbytes


class FakeCAI:
    def __init__(self, address: int):
        self.__cuda_array_interface__ = {"shape": (16,), "typestr": "<f4", "data": (address, False), "version": 3,
                                         "strides": None, "stream": None}


def _buffer(ptr: int):
    """A DeviceBuffer stand-in (no GPU): its pointer and a live finalizer."""
    from drvtma.runtime.driver import DeviceBuffer

    buf = DeviceBuffer.__new__(DeviceBuffer)
    buf.ptr, buf.nbytes = ptr, 16
    buf._finalizer = type("Alive", (), {"alive": True})()
    return buf


def read_params(address: int, params) -> list[bytes]:
    """What the driver reads for each parameter: kernelParams[i] -> size bytes."""
    pointers = (ctypes.c_uint64 * len(params)).from_address(address)
    return [ctypes.string_at(int(pointers[i]), size) for i, (_, size) in enumerate(params)]


@pytest.fixture()
def driver(monkeypatch):
    """cuLaunchKernelEx stand-in: records (config, function, the parameters' bytes) per launch."""
    state = {"launches": [], "code": 0}

    def launch_kernel_ex(config, function, params, extra):
        state["launches"].append((config, function, read_params(params, state["params"])))
        return (state["code"],)

    monkeypatch.setattr(launch_mod, "_launch_kernel_ex", launch_kernel_ex)
    monkeypatch.setattr(args_mod, "_array_address", lambda name, i, arr: 0)  # no StridedMemoryView on the CPU
    state["params"] = PARAMS
    return state


def fake_kernel(params=PARAMS, name="echo_args") -> Kernel:
    k = Kernel.__new__(Kernel)
    k.module, k.name, k.handle, k.params = None, name, "kernel-handle", list(params)
    k.packer = ArgPacker(name, k.params)
    k._function = "function"
    k._smem_optin = 0
    k._required_cluster, k._cluster_non_portable = None, False  # no __cluster_dims__: no driver query
    k.forget_configs()
    return k


def some_args(seed: int = 0) -> list:
    r = random.Random(seed)
    return [FakeMap(bytes(r.randrange(256) for _ in range(128))), r.randrange(-2**31, 2**31), r.random(),
            np.int8(r.randrange(-128, 128)), r.randrange(2**64), np.float32(r.random()), r.randrange(-2**15, 2**15),
            _buffer(0x7F0000000000 + 256 * r.randrange(1 << 20))]


def fresh(args) -> tuple[bytes, list[bytes]]:
    """The image and the bytes each parameter reads, from a new packer given `args` at once."""
    p = ArgPacker("echo_args", PARAMS)
    address = p.pack(tuple(args))
    return p.image.tobytes(), read_params(address, PARAMS)


CONFIG = LaunchConfig.make(4, 128)


def test_a_prepared_launch_reads_what_an_ordinary_launch_of_the_same_arguments_reads(driver):
    k = fake_kernel()
    args = some_args()
    k.launch(*args, grid=4, block=128)
    prepared = k.prepare(CONFIG, *args)
    prepared()
    prepared()
    ordinary, first, second = driver["launches"]
    assert first[2] == second[2] == ordinary[2] == fresh(args)[1]
    assert first[1] == "function" and first[0] is second[0]  # one CUlaunchConfig, built at prepare
    assert (first[0].gridDimX, first[0].blockDimX, first[0].sharedMemBytes, int(first[0].hStream)) == (4, 128, 0, 0)


def test_a_refresh_leaves_the_buffer_byte_for_byte_as_a_fresh_pack(driver):
    """Random changes, positional and named, of every kind: after each, the prepared image and what the driver
    reads equal a fresh pack of the arguments now held."""
    k = fake_kernel()
    args = some_args(0)
    names = ("tmap", "n", "scale", "tiny", "big", "alpha", "short", "out")
    prepared = k.prepare(CONFIG, *args, names=names)
    r = random.Random(1)
    for step in range(60):
        other = some_args(step + 1)
        changed = r.sample(range(len(PARAMS)), r.randrange(1, len(PARAMS) + 1))
        if step % 2:
            for i in changed:
                args[i] = other[i]
            prepared(*args)
        else:
            update = {names[i]: other[i] for i in changed}
            for i in changed:
                args[i] = other[i]
            prepared(**update)
        image, reads = fresh(args)
        assert prepared.image.tobytes()[128:] == image[128:]  # the map is read where it lives, not from the image
        assert driver["launches"][-1][2] == reads
        assert prepared.arguments == tuple(args)


def test_only_the_changed_positions_are_written_and_nothing_else_is_rebuilt(driver, monkeypatch):
    k = fake_kernel()
    args = some_args()
    prepared = k.prepare(CONFIG, *args)
    refreshed, configs, packs = [], [], []
    monkeypatch.setattr(ArgPacker, "refresh", lambda self, i, arg, real=ArgPacker.refresh: refreshed.append(i)
                        or real(self, i, arg))
    monkeypatch.setattr(Kernel, "_launch_config", lambda self, *a: configs.append(a))
    monkeypatch.setattr(k.packer, "pack", lambda a: packs.append(a))
    prepared()
    prepared(*args)  # the very same objects: nothing to write
    assert refreshed == []
    args[1] = int("77")
    args[7] = _buffer(0x7F00DEAD0000)
    prepared(*args)
    assert refreshed == [1, 7] and configs == [] and packs == []  # no shape check, no ordinary pack per call
    assert int.from_bytes(driver["launches"][-1][2][1], "little") == 77
    assert int.from_bytes(driver["launches"][-1][2][7], "little") == 0x7F00DEAD0000


def test_a_changed_value_is_checked_for_its_type_and_size(driver):
    k = fake_kernel()
    args = some_args()
    prepared = k.prepare(CONFIG, *args, names=("m", "n", "x", "t", "b", "a", "s", "out"))
    before = prepared.image.tobytes()
    for change, match in [({"n": 2**32}, "argument 1 = 4294967296 does not fit"),
                          ({"x": np.float32(1)}, "argument 2 is a 8-byte.*float32"),
                          ({"s": 1.5}, "argument 6 is a 2-byte parameter.*a float"),
                          ({"out": "x"}, "argument 7 has unsupported type str"),
                          ({"m": FakeMap(bytes(64))}, "argument 0 is a 128-byte parameter.*64 bytes"),
                          ({"nope": 1}, "no parameter named 'nope'")]:
        with pytest.raises(LaunchError, match=match):
            prepared(**change)
    assert prepared.image.tobytes() == before and not driver["launches"]  # refused: nothing written or launched
    closed = _buffer(0x1000)
    closed._finalizer.alive = False  # a buffer closed before it is given: refused like any changed value
    with pytest.raises(LaunchError, match="argument 7 is a closed DeviceBuffer"):
        prepared(out=closed)
    with pytest.raises(LaunchError, match="takes all 8 argument"):
        prepared(1, 2)
    with pytest.raises(LaunchError, match="no parameter named 'n'.*names="):
        k.prepare(CONFIG, *args)(n=1)


def test_a_prepared_launch_holds_a_device_arrays_address_from_when_it_was_given(driver):
    k = fake_kernel([(0, 8)], "one_pointer")
    driver["params"] = [(0, 8)]
    prepared = k.prepare(CONFIG, FakeCAI(0x7F0000100000))
    prepared()
    assert int.from_bytes(driver["launches"][-1][2][0], "little") == 0x7F0000100000
    prepared(FakeCAI(0x7F0000200000))
    assert int.from_bytes(driver["launches"][-1][2][0], "little") == 0x7F0000200000


def test_prepare_checks_everything_an_ordinary_launch_checks(driver):
    k = fake_kernel()
    args = some_args()
    with pytest.raises(LaunchError, match="takes 8 argument"):
        k.prepare(CONFIG, *args[:3])
    with pytest.raises(LaunchError, match="argument 1 = 4294967296 does not fit"):
        k.prepare(CONFIG, args[0], 2**32, *args[2:])
    with pytest.raises(LaunchError, match="takes a LaunchConfig"):
        k.prepare({"grid": 1, "block": 32}, *args)
    with pytest.raises(LaunchError, match="8 distinct names"):
        k.prepare(CONFIG, *args, names=("a", "a", "b", "c", "d", "e", "f", "g"))
    with pytest.raises(LaunchError, match="1056 threads"):
        k.prepare(LaunchConfig(grid=(1, 1, 1), block=(32, 33, 1)), *args)
    assert not driver["launches"]


def test_the_ordinary_launch_is_untouched_by_a_prepared_one(driver):
    """Their buffers are separate: refreshing a prepared launch does not change what kernel.launch packs, and the
    ordinary launch still refuses a closed buffer on its fast path."""
    k = fake_kernel()
    args = some_args()
    k.launch(*args, grid=4, block=128)
    prepared = k.prepare(CONFIG, *args)
    prepared(*some_args(5))
    k.launch(*args, grid=4, block=128)
    assert driver["launches"][-1][2] == fresh(args)[1] == driver["launches"][0][2]
    args[7]._finalizer.alive = False
    with pytest.raises(LaunchError, match="argument 7 is a closed DeviceBuffer"):
        k.launch(*args, grid=4, block=128)


def test_a_driver_refusal_names_cuLaunchKernelEx(driver):
    k = fake_kernel()
    prepared = k.prepare(CONFIG, *some_args())
    driver["code"] = cu.CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(CudaError) as info:
        prepared()
    assert info.value.call == "cuLaunchKernelEx"


def test_a_stream_is_held_and_set_once():
    k = fake_kernel()
    stream = type("FakeStream", (), {"handle": cu.CUstream(0x1234)})()
    prepared = k.prepare(CONFIG, *some_args(), stream=stream)
    assert isinstance(prepared, PreparedLaunch) and prepared.stream is stream
    assert int(prepared._lc.hStream) == 0x1234


def test_packer_refresh_refuses_a_position_the_kernel_lacks():
    p = ArgPacker("k", [(0, 8)])
    p.pack((1,))
    with pytest.raises(LaunchError, match="no argument 1"):
        p.refresh(1, 2)
    p.refresh(0, 3)
    assert p.image.tobytes() == (3).to_bytes(8, "little")
    assert p.pack((4,)) and p.image.tobytes() == (4).to_bytes(8, "little")  # a full pack after a refresh
