"""Core checks that need no GPU: compile, cache, SASS, argument packing, errors, the command line."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drvtma.b08.modes import describe_wait
from drvtma.errors import ArgumentError, BarrierTimeout, CudaError, LaunchError, NvrtcError, TimedOutWait
from drvtma.runtime import compiler, sass
from drvtma.runtime.kernel import ArgPacker, LaunchConfig
from drvtma.runtime.status import STATUS_DTYPE, STATUS_SLOTS, TIMEOUT_DTYPE, barrier_timeout

from support.struct_layout import compile_layout_check

CU_FILES = sorted(str(p.relative_to(compiler.cu_dir())) for p in compiler.cu_dir().glob("*/*.cu"))


def host_defines(name: str) -> dict | None:
    """Kernels whose tile and descriptors the host computes compile with their room's default configuration."""
    if name == "gemm/gemm_ws.cu":
        from drvtma.gemm.config import GemmConfig

        return GemmConfig().defines()
    return None


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRVTMA_CACHE_DIR", str(tmp_path / "cache"))
    compiler.clear_memory_cache()
    yield tmp_path / "cache"
    compiler.clear_memory_cache()


def test_cu_dir_ships_headers():
    assert (compiler.include_dir() / "drvtma" / "tma.cuh").is_file()
    assert CU_FILES, "no kernels found under cu/"


def test_kernels_live_in_room_folders():
    """cu/ mirrors the Python rooms: no kernel at the top, and every folder is a room of drvtma."""
    root = compiler.cu_dir()
    assert not list(root.glob("*.cu")), "kernels belong in cu/<room>/"
    package = Path(compiler.__file__).resolve().parents[1]
    for folder in {Path(f).parts[0] for f in CU_FILES}:
        assert (package / folder / "__init__.py").is_file(), f"cu/{folder}/ has no drvtma.{folder} room"


def test_bare_kernel_names_resolve_to_their_room(tmp_path, monkeypatch):
    assert compiler.find_source("pipelines.cu") == compiler.cu_dir() / "b08" / "pipelines.cu"
    assert compiler.find_source("b08/pipelines.cu") == compiler.cu_dir() / "b08" / "pipelines.cu"
    cu = tmp_path / "cu"
    for room in ("a", "b"):
        (cu / room).mkdir(parents=True)
        (cu / room / "k.cu").write_text("")
    monkeypatch.setenv("DRVTMA_CU_DIR", str(cu))
    with pytest.raises(ArgumentError, match="names 2 kernels"):
        compiler.find_source("k.cu")
    with pytest.raises(ArgumentError, match="no kernel"):
        compiler.find_source("missing.cu")


@pytest.mark.parametrize("name", CU_FILES)
def test_every_kernel_file_compiles_for_sm90a(name):
    cubin = compiler.compile_cubin(name, defines=host_defines(name))
    assert cubin[:4] == b"\x7fELF"
    assert sass.functions(cubin), f"{name} has no kernels"


def test_core_sass_shows_the_claimed_instructions():
    cubin = compiler.compile_cubin("core_roundtrip.cu")
    tma = sass.instructions(cubin, "tma_box_and_bulk")
    assert "UTMALDG.2D" in tma and "UBLKCP.S.G" in tma
    assert sass.has_opcode(tma, "SYNCS.PHASECHK.TRANS64.TRYWAIT") and "SYNCS.ARRIVE.TRANS64" in tma
    plain = sass.instructions(cubin, "scale_add")
    assert not any(op.startswith(("UTMA", "UBLK", "SYNCS")) for op in plain)


SRC = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = %d; }\n'


def test_load_module_resolves_a_name_once_per_directory_and_settings(monkeypatch, tmp_path):
    """A launch loop calls load_module each time (B08Runner.kernel does): the second call must not look for the file
    and its target again (0.3 ms that timed launches carried); another directory or DRVTMA_ARCH is looked up anew."""
    from drvtma.runtime import module as kernel  # load_module lives in runtime.module (runtime.kernel re-exports it)

    class FakeModule:
        closed = False

    looked_up, loaded = [], []
    monkeypatch.setattr(kernel, "build_target", lambda source: looked_up.append(source) or "sm_90")
    monkeypatch.setattr(kernel.Module, "load", staticmethod(lambda *a, **k: loaded.append(a) or FakeModule()))
    monkeypatch.setattr(kernel, "_modules", {})
    monkeypatch.setattr(kernel, "_resolved", {})
    first = kernel.load_module("b08/pipelines.cu", defines={"A": 1})
    assert kernel.load_module("b08/pipelines.cu", defines={"A": 1}) is first and len(looked_up) == 1
    assert kernel.load_module("b08/pipelines.cu", defines={"A": 2}) is not first and len(looked_up) == 2
    monkeypatch.chdir(tmp_path)
    assert kernel.load_module("b08/pipelines.cu", defines={"A": 1}) is first and len(looked_up) == 3
    monkeypatch.setenv("DRVTMA_ARCH", "sm_90a")
    kernel.load_module("b08/pipelines.cu", defines={"A": 1})
    assert len(looked_up) == 4
    first.closed = True  # a closed module (its context gone) is loaded again
    monkeypatch.delenv("DRVTMA_ARCH")
    assert kernel.load_module("b08/pipelines.cu", defines={"A": 1}) is not first and len(loaded) == 3
    assert kernel.load_module(b"one source") is not kernel.load_module(b"another")  # bytes: by their hash, never by name


def test_cache_miss_then_disk_hit_then_memory_hit(fresh_cache):
    a = compiler.compile_cubin(SRC % 1, name="k.cu")
    entries = list(fresh_cache.glob("*.cubin"))
    assert len(entries) == 1
    compiler.clear_memory_cache()
    entries[0].write_bytes(b"\x7fELF-from-disk")  # prove the second call reads the disk entry
    assert compiler.compile_cubin(SRC % 1, name="k.cu") == b"\x7fELF-from-disk"
    entries[0].unlink()
    assert compiler.compile_cubin(SRC % 1, name="k.cu") == b"\x7fELF-from-disk"  # memory layer in front
    assert a[:4] == b"\x7fELF"


def test_cache_key_covers_source_options_defines_and_arch(fresh_cache):
    base = compiler.compile_cubin(SRC % 1, name="k.cu")
    variants = [compiler.compile_cubin(SRC % 2, name="k.cu"),
                compiler.compile_cubin(SRC % 1, name="k.cu", options=("-lineinfo",)),
                compiler.compile_cubin(SRC % 1, name="k.cu", defines={"X": 3}),
                compiler.compile_cubin(SRC % 1, name="k.cu", arch="sm_90")]
    assert len(list(fresh_cache.glob("*.cubin"))) == 5
    assert all(v[:4] == b"\x7fELF" for v in variants) and base[:4] == b"\x7fELF"


def test_header_change_invalidates_the_cache(fresh_cache, tmp_path, monkeypatch):
    cu = tmp_path / "cu"
    (cu / "include" / "drvtma").mkdir(parents=True)
    header = cu / "include" / "drvtma" / "value.cuh"
    header.write_text("#define VALUE 1\n")
    (cu / "k.cu").write_text('#include <drvtma/value.cuh>\nextern "C" __global__ void k(int* p) { *p = VALUE; }\n')
    monkeypatch.setenv("DRVTMA_CU_DIR", str(cu))
    first = compiler.compile_cubin("k.cu")
    header.write_text("#define VALUE 2\n")
    second = compiler.compile_cubin("k.cu")
    assert first != second
    assert len(list(fresh_cache.glob("*.cubin"))) == 2


def test_no_cache_switch_writes_nothing(fresh_cache, monkeypatch):
    monkeypatch.setenv("DRVTMA_NO_CACHE", "1")
    compiler.compile_cubin(SRC % 7, name="k.cu")
    assert not fresh_cache.exists() or not list(fresh_cache.glob("*.cubin"))


def test_compile_error_carries_log_options_and_source_lines(fresh_cache):
    src = 'extern "C" __global__ void k(int* p) {\n  int x = 1;\n  p[0] = undefined_name;\n}\n'
    with pytest.raises(NvrtcError) as info:
        compiler.compile_cubin(src, name="broken.cu", defines={"FOO": 1})
    err = info.value
    text = str(err)
    assert "undefined_name" in err.log and "-DFOO=1" in err.options and "-arch=sm_90a" in err.options
    assert ">    3 |   p[0] = undefined_name;" in text and "broken.cu:3" in text


def test_sass_reports_missing_kernel():
    cubin = compiler.compile_cubin(SRC % 1, name="k.cu")
    with pytest.raises(KeyError, match="not in cubin"):
        sass.instructions(cubin, "nope")


# ---- argument packing (the parameter layout is what cuKernelGetParamInfo returns for echo_args)
ECHO_PARAMS = [(0, 128), (128, 4), (136, 8), (144, 1), (152, 8), (160, 4), (164, 2), (168, 8)]


class FakeMap:
    def __init__(self, data: bytes):
        self.buf = np.frombuffer(data, dtype=np.uint8).copy()

    def __drvtma_param__(self):
        return self.buf.ctypes.data, self.buf.nbytes


def _param_bytes(address: int, params) -> list[bytes]:
    """What the driver reads for each parameter: kernelParams[i] -> size bytes."""
    import ctypes

    pointers = (ctypes.c_uint64 * len(params)).from_address(address)
    return [ctypes.string_at(int(pointers[i]), size) for i, (_, size) in enumerate(params)]


def test_packer_lays_out_every_argument_at_its_offset():
    p = ArgPacker("echo_args", ECHO_PARAMS)
    blob = bytes(range(128))
    fmap = FakeMap(blob)
    addr = p.pack((fmap, -5, 2.5, np.int8(-3), 2**64 - 1, np.float32(1.5), -7, 0xDEAD00))
    got = _param_bytes(addr, ECHO_PARAMS)
    assert got[0] == blob
    assert int.from_bytes(got[1], "little", signed=True) == -5
    assert np.frombuffer(got[2], np.float64)[0] == 2.5
    assert np.frombuffer(got[3], np.int8)[0] == -3
    assert int.from_bytes(got[4], "little") == 2**64 - 1
    assert np.frombuffer(got[5], np.float32)[0] == 1.5
    assert int.from_bytes(got[6], "little", signed=True) == -7
    assert int.from_bytes(got[7], "little") == 0xDEAD00
    ptrs = list((np.ctypeslib.ctypes.c_uint64 * 8).from_address(addr))
    # scalars sit in the 128-byte-aligned image at their offsets; the map is read where it lives
    assert [int(x) - p.image.ctypes.data for x in ptrs[1:]] == [o for o, _ in ECHO_PARAMS[1:]]
    assert ptrs[0] == fmap.buf.ctypes.data
    assert p.image.ctypes.data % 128 == 0


def test_packer_repacks_what_changed_and_reads_maps_at_every_launch():
    p = ArgPacker("echo_args", ECHO_PARAMS)
    fmap = FakeMap(bytes(128))
    args = [fmap, 5, 2.5, np.int8(1), 7, np.float32(1), 1, 9]
    p.pack(tuple(args))
    fmap.buf[:] = 0xAB  # same object, new content (as TensorMap.replace_address does)
    assert _param_bytes(p.pack(tuple(args)), ECHO_PARAMS)[0] == b"\xab" * 128
    args[1] = int("12345")  # a new object
    assert int.from_bytes(_param_bytes(p.pack(tuple(args)), ECHO_PARAMS)[1], "little") == 12345
    other = FakeMap(bytes(range(128, 256)))
    args[0] = other  # another map: kernelParams[0] follows it
    assert _param_bytes(p.pack(tuple(args)), ECHO_PARAMS)[0] == bytes(range(128, 256))


def test_packer_puts_a_scalar_back_in_the_image_after_a_map():
    p = ArgPacker("k", [(0, 8)])
    p.pack((FakeMap(bytes(range(8))),))
    assert _param_bytes(p.pack((0x1122334455667788,)), [(0, 8)])[0] == (0x1122334455667788).to_bytes(8, "little")


def test_an_empty_call_of_a_kernel_with_parameters_is_counted_first_time_and_after_arrays():
    """The fast path ("the same objects as last time") must not take a first call, nor the call after one with a
    device array: with no arguments both looked like "the same as last time" and reached the driver unchecked."""
    p = ArgPacker("k", [(0, 8), (8, 4)])
    with pytest.raises(LaunchError, match="takes 2 argument"):
        p.pack(())

    from support.fake_arrays import DL_FLOAT, FakeDLPack

    q = ArgPacker("k", [(0, 8)])
    q.pack((FakeDLPack(0x7F0000200000, (16,), None, DL_FLOAT, 32),))  # a device array: no fast path after it
    with pytest.raises(LaunchError, match="takes 1 argument"):
        q.pack(())


def test_forget_configs_drops_the_remembered_shapes():
    from drvtma.runtime.kernel import Kernel

    k = Kernel.__new__(Kernel)
    k._configs, k._last_shape, k._last_config = {("shape",): "lc"}, ("g", "b", 0, None, None), "lc"
    k.forget_configs()
    assert k._configs == {} and k._last_config is None and all(type(x) is object for x in k._last_shape)


def test_packer_refuses_a_closed_buffer_even_on_the_fast_path():
    from drvtma.runtime.driver import DeviceBuffer

    buf = DeviceBuffer.__new__(DeviceBuffer)  # a stand-in: no GPU here, only its pointer and its closed state
    buf.ptr, buf.nbytes = 0x1000, 16
    buf._finalizer = type("Alive", (), {"alive": True})()
    p = ArgPacker("k", [(0, 8)])
    p.pack((buf,))
    buf._finalizer.alive = False
    with pytest.raises(LaunchError, match="argument 0 is a closed DeviceBuffer"):
        p.pack((buf,))


@pytest.mark.parametrize("args, match", [
    ((1, 2), "takes 8 argument"),
    ((FakeMap(bytes(64)), 1, 1.0, 1, 1, 1.0, 1, 1), "argument 0 is a 128-byte parameter.*64 bytes"),
    ((FakeMap(bytes(128)), 2**32, 1.0, 1, 1, 1.0, 1, 1), "argument 1 = 4294967296 does not fit"),
    ((FakeMap(bytes(128)), 1, np.float32(1), 1, 1, 1.0, 1, 1), "argument 2 is a 8-byte.*float32"),
    ((FakeMap(bytes(128)), 1, 1.0, 300, 1, 1.0, 1, 1), "argument 3 = 300 does not fit"),
    ((FakeMap(bytes(128)), 1, 1.0, 1, 1, 1.0, 70000, 1), "argument 6 = 70000 does not fit"),
    ((FakeMap(bytes(128)), 1, 1.0, 1, 1, 1.0, 1, "x"), "argument 7 has unsupported type str"),
    ((FakeMap(bytes(128)), 1, 1.0, 1, 1, 1.0, 1.5, 1), "argument 6 is a 2-byte parameter.*a float"),
])
def test_packer_refuses_wrong_arguments_naming_them(args, match):
    with pytest.raises(LaunchError, match=match):
        ArgPacker("echo_args", ECHO_PARAMS).pack(args)


@pytest.mark.parametrize("grid, block, match", [
    (0, 32, "grid must be"), ((1, 2, 3, 4), 32, "grid must be"), (1, (32, 33), "1056 threads"),
    ((1, 70000), 32, "exceeds"), (1, 2.0, "block must be"),
])
def test_launch_config_refuses_bad_shapes(grid, block, match):
    with pytest.raises(LaunchError, match=match):
        LaunchConfig.make(grid, block)


def test_launch_config_normalises_and_checks_clusters():
    assert LaunchConfig.make(4, (128, 2)).block == (128, 2, 1)
    with pytest.raises(LaunchError, match="not a multiple of cluster"):
        LaunchConfig.make(3, 32, cluster=2)


def test_cuda_error_names_call_error_and_description():
    e = CudaError("cuModuleLoadData", 200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid")
    assert str(e) == "cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)"


def _status_record(waits, timeouts=None):
    rec = np.zeros(1, STATUS_DTYPE)[0]
    rec["timeouts"] = len(waits) if timeouts is None else timeouts
    rec["claimed"] = len(waits)
    for i, w in enumerate(waits[:STATUS_SLOTS]):
        rec["slot"][i] = tuple(w)
    return rec


def test_status_record_mirrors_the_cuda_struct():
    source = '#include <drvtma/status.cuh>\n'
    compile_layout_check(source, {"DrvtmaStatus": STATUS_DTYPE, "DrvtmaTimeout": TIMEOUT_DTYPE}, "status_layout.cu")


def test_barrier_timeout_leads_with_the_earliest_begun_wait():
    late = TimedOutWait(block=3, thread=0, barrier=1, stage=0, parity=0, where=2, since_ns=5_000)
    early = TimedOutWait(block=7, thread=32, barrier=0, stage=1, parity=1, where=1, since_ns=1_000)
    assert barrier_timeout("k", _status_record([])) is None
    e = barrier_timeout("k", _status_record([late, early]))
    assert e.waits == (early, late) and (e.block, e.thread, e.barrier, e.stage, e.parity, e.where) == (7, 32, 0, 1, 1, 1)
    assert str(e).startswith("k: 2 mbarrier wait(s) timed out; the first to begin: block 7 thread 32, barrier 0")
    assert "block 3 barrier 1, stage 0, parity 0 (site 2) +4.0 us" in str(e)
    assert pickle.loads(pickle.dumps(e)).waits == e.waits


def test_barrier_timeout_counts_what_the_slots_could_not_hold():
    waits = [TimedOutWait(b, 0, 0, 0, 0, 1, 100 * b) for b in range(12)]
    e = barrier_timeout("k", _status_record(waits, timeouts=40))
    assert len(e.waits) == STATUS_SLOTS and e.count == 40 and "(32 more not recorded)" in str(e)


def test_ring_waits_are_named_in_words():
    e = BarrierTimeout("ws_ring", [TimedOutWait(0, 256, 1, 2, 0, 2, 0)], 1, describe=describe_wait)
    assert "empty[2] parity 0 (the producer's wait on an empty barrier)" in str(e)


def _run_cli(*args, env=None):
    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "-m", "drvtma", *args], capture_output=True, text=True, cwd=root,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_cli_compile_lists_tma_instructions():
    out = _run_cli("compile", "core_roundtrip.cu")
    assert out.returncode == 0, out.stderr
    assert "tma_box_and_bulk" in out.stdout and "UTMALDG.2D" in out.stdout


def test_cli_unknown_command_is_refused():
    out = _run_cli("frobnicate")
    assert out.returncode == 2 and "unknown command" in out.stderr


def test_cli_without_gpu_fails_with_one_sentence():
    from drvtma import NoGpuError, context

    try:
        context()
    except NoGpuError:
        pass
    else:
        pytest.skip("a GPU is present: the no-GPU path cannot be shown here")
    out = _run_cli("info")
    assert out.returncode == 3
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "needs an NVIDIA GPU with TMA" in out.stderr and "--target" in out.stderr


def test_packer_takes_a_device_array_as_its_pointer_and_refuses_host_arrays():
    from support.fake_arrays import DL_FLOAT, FakeDLPack

    p = ArgPacker("k", [(0, 8), (8, 4)])
    addr = p.pack((FakeDLPack(0x7F0000200000, (16,), None, DL_FLOAT, 32), 3))
    assert int.from_bytes(_param_bytes(addr, [(0, 8), (8, 4)])[0], "little") == 0x7F0000200000
    with pytest.raises(LaunchError, match="NumPy array in host memory"):
        p.pack((np.zeros(4, np.float32), 3))
    with pytest.raises(LaunchError, match="argument 1 is a 4-byte parameter.*device array"):
        p.pack((3, FakeDLPack(0x7F0000200000, (16,), None, DL_FLOAT, 32)))


def _pointer_at(p: ArgPacker, address: int, i: int = 0) -> int:
    return int.from_bytes(_param_bytes(address, p.params)[i], "little")


def test_a_device_array_keeps_the_fast_path_and_its_address_is_read_at_every_launch():
    """The same array again takes the fast path, yet its address is read anew (a tensor resized in place moves)."""
    from support.fake_arrays import DL_FLOAT, FakeDLPack

    p = ArgPacker("k", [(0, 8), (8, 4)])
    arr = FakeDLPack(0x7F0000200000, (16,), None, DL_FLOAT, 32)
    args = (arr, 3)
    p.pack(args)
    assert p._last == args  # the fast path holds: no repacking of the scalar
    arr.address = 0x7F0000300000
    assert _pointer_at(p, p.pack(args)) == 0x7F0000300000


class FakeTensor:
    """A torch-like tensor: data_ptr(), is_cuda and a DLPack export (its view is built on first sight only)."""

    def __init__(self, address: int, is_cuda: bool = True):
        from support.fake_arrays import DL_FLOAT, FakeDLPack

        self.exporter = FakeDLPack(address, (16,), None, DL_FLOAT, 32)
        self.address, self.is_cuda, self.views = address, is_cuda, 0

    def data_ptr(self) -> int:
        return self.address

    def __dlpack__(self, *args, **kwargs):
        self.views += 1
        self.exporter.address = self.address
        return self.exporter.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.exporter.__dlpack_device__()


def test_an_array_type_is_checked_through_a_view_once_per_position():
    p = ArgPacker("k", [(0, 8), (8, 8)])
    a, b = FakeTensor(0x7F0000200000), FakeTensor(0x7F0000400000)
    p.pack((a, b))
    assert (a.views, b.views) == (1, 1)
    a.address = 0x7F0000500000  # resized in place: the same object, a new address
    addr = p.pack((a, b))
    assert (_pointer_at(p, addr, 0), _pointer_at(p, addr, 1)) == (0x7F0000500000, 0x7F0000400000)
    c = FakeTensor(0x7F0000600000)  # a new array of a known type: its pointer only, no view
    assert _pointer_at(p, p.pack((c, b))) == 0x7F0000600000 and c.views == 0
    with pytest.raises(LaunchError, match=r"argument 0 \(FakeTensor\) is in host memory"):
        p.pack((FakeTensor(0x1000, is_cuda=False), b))
    p.pack((c, b))
    c.is_cuda = False  # the same tensor moved to the host (`t.data = t.cpu()`): refused on the fast path too
    with pytest.raises(LaunchError, match=r"argument 0 \(FakeTensor\) is in host memory"):
        p.pack((c, b))


def test_an_interface_array_is_read_through_its_interface_after_the_first_check(monkeypatch):
    from drvtma.runtime import args as kernel  # the packer's address readers live in runtime.args

    from support.fake_arrays import FakeCAI

    checked = []
    monkeypatch.setattr(kernel, "_array_address", lambda name, i, arr: checked.append(arr) or 0)
    p = ArgPacker("k", [(0, 8)])
    a, b = FakeCAI(0x7F0000200000, (16,), "<f4"), FakeCAI(0x7F0000300000, (16,), "<f4")
    assert _pointer_at(p, p.pack((a,))) == 0x7F0000200000
    assert _pointer_at(p, p.pack((b,))) == 0x7F0000300000 and checked == [a]


def test_a_refused_pack_leaves_no_fast_path_behind():
    p = ArgPacker("k", [(0, 8), (8, 4)])
    p.pack((1, 2))
    with pytest.raises(LaunchError, match="argument 1 has unsupported type str"):
        p.pack((1, "x"))
    with pytest.raises(LaunchError, match="takes 2 argument"):
        p.pack(())
    with pytest.raises(LaunchError, match="argument 1 has unsupported type str"):
        p.pack((1, "x"))


def test_every_benchmark_names_a_function_that_exists():
    import importlib

    from drvtma.cli.bench import BENCHMARKS

    for name, (module, func, help_) in BENCHMARKS.items():
        assert callable(getattr(importlib.import_module(module), func)), name
        assert help_
