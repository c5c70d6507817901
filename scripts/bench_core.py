#!/usr/bin/env python3
"""Core costs: cold compile, cache-hit compile, and per-launch host overhead of drvtma against a bare
cuLaunchKernel with pre-packed arguments, on the same kernel in the same run. Prints a table and JSON lines."""

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


def time_launches(batches: int, per_batch: int) -> dict:
    """Host time per launch, each batch short enough that the launch queue never fills (no device back-pressure)."""
    kernel = load_module("core_roundtrip.cu").kernel("scale_add")
    buf = DeviceBuffer(4096)
    args = (buf, buf, 0, 1.0, 0.0)  # n = 0: the kernel does nothing, so only launch costs show
    kernel.launch(*args, grid=1, block=32)
    params = kernel.packer.pack(args)  # pre-packed once for the bare call
    fn = kernel.function

    def drvtma_launch():
        kernel.launch(*args, grid=1, block=32)

    def bare_launch():
        call(cu.cuLaunchKernel, fn, 1, 1, 1, 32, 1, 1, 0, 0, params, 0)

    def raw_launch():  # not even drvtma's result check
        cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, params, 0)

    config = cu.CUlaunchConfig()
    config.gridDimX = config.gridDimY = config.gridDimZ = 1
    config.blockDimX, config.blockDimY, config.blockDimZ = 32, 1, 1
    config.sharedMemBytes, config.hStream, config.attrs, config.numAttrs = 0, 0, [], 0

    def raw_launch_ex():  # the call drvtma makes, with a prebuilt config
        cu.cuLaunchKernelEx(config, fn, params, 0)

    paths = {"bare_cuLaunchKernel": raw_launch, "checked_cuLaunchKernel": bare_launch,
             "bare_cuLaunchKernelEx": raw_launch_ex, "drvtma_launch": drvtma_launch}
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
    buf.close()
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--per-batch", type=int, default=200)
    p.add_argument("--cpu-only", action="store_true", help="compile timings only (no GPU)")
    args = p.parse_args()
    figures = time_compiles(args.repeats)
    if not args.cpu_only:
        figures.update(time_launches(args.batches, args.per_batch))
    print(tabulate([(k, f"{v:.3f}") for k, v in figures.items()], headers=["figure", "value"], tablefmt="github"))
    print(json.dumps({"bench": "core", **{k: round(v, 4) for k, v in figures.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
