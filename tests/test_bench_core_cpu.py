"""scripts/bench_core.py's launch timings on a fake driver (no GPU): every path it times runs, the prepared launch
among them (Kernel.prepare on a Kernel made without a GPU, launched through a fake cuLaunchKernelEx that reads the
parameters as the driver does), and the host line carries launch_prepared_over_cuda_core beside
launch_over_cuda_core, from the same batches. The figures themselves need a GPU: scripts/gpu-check runs it."""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from drvtma.runtime import launch as launch_mod
from drvtma.runtime.args import ArgPacker
from drvtma.runtime.driver import DeviceBuffer
from drvtma.runtime.module import Kernel

cu = pytest.importorskip("cuda.bindings.driver")
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_core.py"
LAYOUTS = {"plain_args": [(0, 8), (8, 4), (12, 4)], "map_args": [(0, 128), (128, 8), (136, 4), (140, 4)]}


def _ok(*args):
    return (cu.CUresult.CUDA_SUCCESS,)


def fake_buffer(nbytes: int) -> DeviceBuffer:
    buf = DeviceBuffer.__new__(DeviceBuffer)
    buf.ptr, buf.nbytes = 0x7F0000000000 + 0x100000 * fake_buffer.count, nbytes
    fake_buffer.count += 1
    buf._own(_ok, buf.ptr)
    return buf


fake_buffer.count = 0


def fake_kernel(name: str) -> Kernel:
    k = Kernel.__new__(Kernel)
    k.module, k.name, k.handle, k.params = None, name, name + "-handle", LAYOUTS[name]
    k.packer = ArgPacker(name, k.params)
    k._function, k._smem_optin = name + "-function", 0
    k._required_cluster, k._cluster_non_portable = None, False
    k.forget_configs()
    return k


class FakeMap:
    def __init__(self):
        self.buf = np.zeros(128, np.uint8)

    def __drvtma_param__(self):
        return self.buf.ctypes.data, 128


@pytest.fixture()
def bench(monkeypatch):
    import ctypes

    spec = importlib.util.spec_from_file_location("bench_core_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    launched = defaultdict(list)  # function -> the pointer argument of each cuLaunchKernelEx

    def launch_kernel_ex(config, function, params, extra):
        pointer_slot = 1 if function == "map_args-function" else 0
        where = (ctypes.c_uint64 * 4).from_address(params)[pointer_slot]
        launched[function].append(ctypes.c_uint64.from_address(int(where)).value)
        return (0,)

    kernels = {name: fake_kernel(name) for name in LAYOUTS}
    core_calls = []
    monkeypatch.setattr(module, "load_module", lambda name: SimpleNamespace(
        kernel=kernels.__getitem__, cubin=b"\x7fELF"))
    monkeypatch.setattr(module, "DeviceBuffer", fake_buffer)
    monkeypatch.setattr(module, "synchronize", lambda: None)
    monkeypatch.setattr(module, "cu", SimpleNamespace(cuLaunchKernel=_ok, cuLaunchKernelEx=_ok,
                                                      CUlaunchConfig=cu.CUlaunchConfig))
    monkeypatch.setattr(module, "_cuda_core_launcher", lambda cubin, name, args: lambda: core_calls.append(name))
    monkeypatch.setattr(launch_mod, "_launch_kernel_ex", launch_kernel_ex)
    import drvtma.tma.tiled.encode

    monkeypatch.setattr(drvtma.tma.tiled.encode, "encode_tiled", lambda spec, buf: FakeMap())
    return SimpleNamespace(module=module, launched=launched, core_calls=core_calls)


def test_every_launch_path_runs_and_the_prepared_ratio_sits_beside_the_plain_one(bench):
    results = bench.module.time_launches(batches=2, per_batch=3)
    for name in ("bare_cuLaunchKernel", "checked_cuLaunchKernel", "bare_cuLaunchKernelEx", "drvtma_launch",
                 "drvtma_map_launch", "drvtma_pack", "drvtma_prepared_launch", "drvtma_prepared_refresh",
                 "cuda_core_launch"):
        assert results[f"{name}_us"] > 0, name
    assert results["launch_prepared_over_cuda_core"] == pytest.approx(
        results["drvtma_prepared_launch_us"] / results["cuda_core_launch_us"])
    assert results["launch_over_cuda_core"] == pytest.approx(
        results["drvtma_launch_us"] / results["cuda_core_launch_us"])
    assert len(bench.core_calls) == 2 * 3
    plain = bench.launched["plain_args-function"]
    # warm-ups (ordinary launch, prepared launch), then per batch: 3 ordinary, 3 prepared, 3 prepared-refresh
    buffers = sorted(set(plain))
    assert len(buffers) == 2 and len(plain) == 2 + 2 * 9
    refreshed = plain[2 + 6:2 + 9] + plain[2 + 15:]
    assert refreshed == [buffers[1], buffers[0], buffers[1], buffers[0], buffers[1], buffers[0]]  # it alternates
    assert set(plain[:2 + 6]) == {buffers[0]}


def test_the_host_line_carries_the_prepared_launch(bench, monkeypatch):
    monkeypatch.setitem(sys.modules, "bench_tensormap", SimpleNamespace(
        time_encode=lambda repeats: defaultdict(lambda: 1.0)))
    launch = bench.module.time_launches(batches=1, per_batch=2)
    host = bench.module.host_figures(launch, 10)
    assert host["bench"] == "host"
    assert host["launch_prepared_over_cuda_core"] == round(launch["launch_prepared_over_cuda_core"], 3)
    assert host["launch_over_cuda_core"] == round(launch["launch_over_cuda_core"], 3)
    assert host["launch_prepared_us"] == round(launch["drvtma_prepared_launch_us"], 3)
    assert "launch_prepared_refresh_us" in host


def test_without_cuda_core_the_ratios_to_it_are_left_out(bench, monkeypatch):
    monkeypatch.setattr(bench.module, "_cuda_core_launcher", lambda cubin, name, args: None)
    results = bench.module.time_launches(batches=1, per_batch=1)
    assert "launch_over_cuda_core" not in results and "launch_prepared_over_cuda_core" not in results
    assert results["launch_prepared_over_plain"] > 0
