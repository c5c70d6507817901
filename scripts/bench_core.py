#!/usr/bin/env python3
"""Core costs: cold compile, cache-hit compile, and per-launch host overhead of drvtma (its checked launch and its
prepared launch, `Kernel.prepare`) against a bare cuLaunchKernel with pre-packed arguments and cuda.core's launch, on
the same kernel in the same run; then the host-cost figures (encode and launch against the bare calls and cuda.core)
as one `{"bench": "host"}` line. Prints a table and JSON lines."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from tabulate import tabulate

from drvtma import DeviceBuffer, load_module, synchronize
from drvtma.runtime import compiler
from drvtma.runtime.driver import call, cu
from drvtma.runtime.figures import record_figure
from drvtma.runtime.launch import LaunchConfig
from drvtma.runtime.timing import collector_off


def time_compiles(repeats: int) -> dict:
    source = compiler.find_source("core_roundtrip.cu")
    saved = os.environ.get("DRVTMA_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DRVTMA_CACHE_DIR"] = tmp  # an empty cache: the first compile is cold
        compiler.clear_memory_cache()
        t0 = time.perf_counter()
        compiler.compile_cubin(source)
        cold = time.perf_counter() - t0
        disk, memory = [], []
        for _ in range(repeats):
            compiler.clear_memory_cache()
            t0 = time.perf_counter()
            compiler.compile_cubin(source)
            disk.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            compiler.compile_cubin(source)
            memory.append(time.perf_counter() - t0)
        if saved is None:
            del os.environ["DRVTMA_CACHE_DIR"]
        else:
            os.environ["DRVTMA_CACHE_DIR"] = saved
    return {"cold_compile_ms": cold * 1e3, "disk_hit_ms": statistics.median(disk) * 1e3,
            "memory_hit_ms": statistics.median(memory) * 1e3}


def _cuda_core_launcher(cubin: bytes, name: str, args: tuple):
    """A no-argument function that launches `name` through cuda.core (grid 1, block 32, legacy stream), or None
    when this cuda.core cannot (the figure is then left out)."""
    try:
        import cuda.core as cc

        kernel = cc.ObjectCode.from_cubin(cubin).get_kernel(name)
        config = cc.LaunchConfig(grid=1, block=32)
        stream = getattr(cc, "LEGACY_DEFAULT_STREAM", None) or cc.Device(0).default_stream
        cc.launch(stream, config, kernel, *args)

        def launch():
            cc.launch(stream, config, kernel, *args)

        return launch
    except Exception as exc:  # noqa: BLE001 - a figure this cuda.core cannot give
        print(f"cuda.core launch: not measured ({type(exc).__name__}: {exc})")
        return None


def time_launches(batches: int, per_batch: int) -> dict:
    """Host time per launch of the same (pointer, int, float) kernel: bare cuLaunchKernel / cuLaunchKernelEx with
    pre-packed arguments, cuda.core's launch, drvtma's launch, drvtma's launch of the same arguments after a
    tensor map, and drvtma's prepared launch (as it is, and with its pointer changed at every call). Each batch is
    short enough that the launch queue never fills (no device back-pressure)."""
    import itertools

    import numpy as np

    from drvtma.tma.tiled.encode import encode_tiled
    from drvtma.tma.tiled.spec import TensorMapSpec

    mod = load_module("runtime/launch_cost.cu")
    plain, with_map = mod.kernel("plain_args"), mod.kernel("map_args")
    buf, other = DeviceBuffer(1 << 16), DeviceBuffer(1 << 16)
    tmap = encode_tiled(TensorMapSpec.create("float32", (64, 256), (8, 32)), buf)
    args = (buf, 0, 1.0)  # n = 0: the kernel does nothing, so only launch costs show
    plain.launch(*args, grid=1, block=32)
    with_map.launch(tmap, *args, grid=1, block=32)
    params = plain.packer.pack(args)  # pre-packed once for the bare calls
    fn = plain.function
    core_launch = _cuda_core_launcher(mod.cubin, "plain_args", (np.uint64(buf.ptr), np.int32(0), np.float32(1.0)))

    def drvtma_launch():
        plain.launch(*args, grid=1, block=32)

    def drvtma_map_launch():
        with_map.launch(tmap, *args, grid=1, block=32)

    prepared = plain.prepare(LaunchConfig.make(1, 32), *args)  # checked in full here, once
    prepared()
    swapped = plain.prepare(LaunchConfig.make(1, 32), *args)
    next_args = itertools.cycle([(other, 0, 1.0), args]).__next__

    def drvtma_prepared_launch():  # the same arguments: cuLaunchKernelEx with the pre-packed buffer and config
        prepared()

    def drvtma_prepared_refresh():  # the pointer changes at every call: one argument checked and rewritten
        swapped(*next_args())

    packer = plain.packer

    def drvtma_pack():  # the arguments' share of drvtma_launch (its per-launch checks), no driver call
        packer.pack(args)

    def bare_launch():
        cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, params, 0)

    def checked_launch():
        call(cu.cuLaunchKernel, fn, 1, 1, 1, 32, 1, 1, 0, 0, params, 0)

    config = cu.CUlaunchConfig()
    config.gridDimX = config.gridDimY = config.gridDimZ = 1
    config.blockDimX, config.blockDimY, config.blockDimZ = 32, 1, 1
    config.sharedMemBytes, config.hStream, config.attrs, config.numAttrs = 0, 0, [], 0

    def bare_launch_ex():  # the call drvtma makes, with a prebuilt config: the floor of drvtma's way
        cu.cuLaunchKernelEx(config, fn, params, 0)

    paths = {"bare_cuLaunchKernel": bare_launch, "checked_cuLaunchKernel": checked_launch,
             "bare_cuLaunchKernelEx": bare_launch_ex, "drvtma_launch": drvtma_launch,
             "drvtma_map_launch": drvtma_map_launch, "drvtma_pack": drvtma_pack,
             "drvtma_prepared_launch": drvtma_prepared_launch, "drvtma_prepared_refresh": drvtma_prepared_refresh}
    if core_launch is not None:
        paths["cuda_core_launch"] = core_launch
    samples = {name: [] for name in paths}
    # The paths take turns batch by batch, with the collector off, so a slow spell of the host or a collection
    # lands on no path alone (timing them one after the other once gave 1.29x and 1.72x in two runs).
    with collector_off():
        for _ in range(batches):
            for name, launch in paths.items():
                synchronize()
                t0 = time.perf_counter()
                for _ in range(per_batch):
                    launch()
                samples[name].append((time.perf_counter() - t0) / per_batch)
        synchronize()
    results = {f"{name}_us": statistics.median(s) * 1e6 for name, s in samples.items()}
    results["drvtma_over_bare"] = results["drvtma_launch_us"] / results["bare_cuLaunchKernel_us"]
    results["launch_map_over_plain"] = results["drvtma_map_launch_us"] / results["drvtma_launch_us"]
    results["launch_prepared_over_plain"] = results["drvtma_prepared_launch_us"] / results["drvtma_launch_us"]
    if "cuda_core_launch_us" in results:
        results["launch_over_cuda_core"] = results["drvtma_launch_us"] / results["cuda_core_launch_us"]
        results["launch_prepared_over_cuda_core"] = (results["drvtma_prepared_launch_us"]
                                                     / results["cuda_core_launch_us"])
    buf.close()
    other.close()
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--per-batch", type=int, default=200)
    p.add_argument("--encode-repeats", type=int, default=1000, help="maps per timed encode batch (host figures)")
    p.add_argument("--cpu-only", action="store_true", help="compile timings only (no GPU)")
    args = p.parse_args()
    figures = time_compiles(args.repeats)
    host = None
    if not args.cpu_only:
        figures.update(time_launches(args.batches, args.per_batch))
        host = host_figures(figures, args.encode_repeats)
    print(tabulate([(k, f"{v:.3f}") for k, v in figures.items()], headers=["figure", "value"], tablefmt="github"))
    print(json.dumps({"bench": "core", **{k: round(v, 4) for k, v in figures.items()}}))
    if host is not None:
        record_figure(host)
    return 0


def host_figures(launch: dict, encode_repeats: int) -> dict:
    """The host-cost targets in one line, encode and launch measured in this process: encode_known_over_bare
    <= 1.5, encode_new_over_bare <= 3, launch_over_cuda_core <= 1, launch_map_over_plain <= 1.2; beside them
    launch_prepared_over_cuda_core, the prepared launch measured in the same batches (it does strictly less per call
    than cuda.core's launch: see drvtma.runtime.launch)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_tensormap import time_encode

    enc = time_encode(encode_repeats)
    out = {"bench": "host", "encode_known_over_bare": enc["encode_known_over_bare"],
           "encode_new_over_bare": enc["encode_new_over_bare"],
           "launch_over_cuda_core": launch.get("launch_over_cuda_core"),
           "launch_prepared_over_cuda_core": launch.get("launch_prepared_over_cuda_core"),
           "launch_map_over_plain": launch["launch_map_over_plain"],
           "encode_known_over_prebuilt": enc["encode_known_over_prebuilt"],
           "encode_new_over_prebuilt": enc["encode_new_over_prebuilt"],
           "encode_bare_us": enc["encode_bare_us"], "encode_bare_prebuilt_us": enc["encode_bare_prebuilt_us"],
           "encode_cuda_core_us": enc["encode_cuda_core_us"],
           "encode_known_us": enc["encode_known_geometry_us"], "encode_new_us": enc["encode_validated_us"],
           "launch_bare_ex_us": launch["bare_cuLaunchKernelEx_us"], "launch_cuda_core_us":
           launch.get("cuda_core_launch_us"), "launch_drvtma_us": launch["drvtma_launch_us"],
           "launch_map_us": launch["drvtma_map_launch_us"], "launch_pack_us": launch["drvtma_pack_us"],
           "launch_prepared_us": launch["drvtma_prepared_launch_us"],
           "launch_prepared_refresh_us": launch["drvtma_prepared_refresh_us"]}
    if out["launch_over_cuda_core"] is not None and out["launch_over_cuda_core"] > 1.0:
        out["launch_note"] = _launch_note(launch)
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


def _launch_note(launch: dict) -> str:
    """Where drvtma's launch spends the time cuda.core's does not, from this run's figures."""
    total, core = launch["drvtma_launch_us"], launch["cuda_core_launch_us"]
    pack, floor = launch["drvtma_pack_us"], launch["bare_cuLaunchKernelEx_us"]
    return (f"drvtma {total:.2f} us vs cuda.core {core:.2f} us: cuLaunchKernelEx through cuda-bindings with a "
            f"prebuilt config takes {floor:.2f} us, the arguments' checks {pack:.2f} us, the launch shape and the "
            f"call's Python {max(total - floor - pack, 0):.2f} us")


if __name__ == "__main__":
    raise SystemExit(main())
