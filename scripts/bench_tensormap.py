#!/usr/bin/env python3
"""Tensor-map costs: encode per map with and without drvtma's validation, and load boxes checked per second on
the GPU (probe + oracle, bit for bit). Prints a table and one JSON line per figure; never asserts."""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

import numpy as np
from tabulate import tabulate

from drvtma import DeviceBuffer, context
from drvtma.probe import LoadProbe, check_loads
from drvtma.tensormap import TensorMapSpec, encode_tiled, encode_unchecked
from drvtma.testing import RngChooser, build_coordinates, build_valid_spec


def time_encode(repeats: int) -> dict:
    spec = TensorMapSpec.create("bfloat16", (4096, 4096), (64, 64), swizzle="128B")
    buf = DeviceBuffer(spec.extent_bytes)  # 32 MiB: encode_tiled checks the tensor fits the buffer
    spec = spec.replace(base_address=buf.ptr)
    params = spec.tma_params()

    def batch_us(fn) -> float:
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - t0) / repeats * 1e6

    # As timeit does: the garbage collector off while timing, and the two paths interleaved batch by batch, so a
    # collection or a slow spell of the host lands on neither side alone; medians of 7 batches each.
    runs = {"unchecked": [], "checked": []}
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        with buf:
            for _ in range(7):
                runs["unchecked"].append(batch_us(lambda: encode_unchecked(params, buf.ptr)))
                runs["checked"].append(batch_us(lambda: encode_tiled(spec, buf)))
    finally:
        if gc_was_on:
            gc.enable()
    unchecked, checked = statistics.median(runs["unchecked"]), statistics.median(runs["checked"])
    return {"encode_unchecked_us": unchecked, "encode_validated_us": checked,
            "validation_overhead_pct": (checked / unchecked - 1) * 100}


def time_loads(buf: DeviceBuffer, host: np.ndarray, boxes: int, per_spec: int) -> dict:
    probe = LoadProbe()
    ch = RngChooser(np.random.default_rng(7))
    warm = build_valid_spec(ch, interleave=False, address=False, max_extent_bytes=1 << 20)
    check_loads(warm.replace(base_address=buf.ptr), host, [build_coordinates(ch, warm)], probe=probe)
    done = specs = bad = 0
    t0 = time.perf_counter()
    while done < boxes:
        spec = build_valid_spec(ch, interleave=False, address=False, max_dim=64, max_smem_bytes=16384,
                                max_extent_bytes=4 << 20).replace(base_address=buf.ptr)
        coords = [build_coordinates(ch, spec) for _ in range(per_spec)]
        result = check_loads(spec, host, coords, 128 * ch.integer(0, 7), probe=probe)
        done, specs, bad = done + per_spec, specs + 1, bad + (not result.ok)
    seconds = time.perf_counter() - t0
    probe.close()
    return {"boxes": done, "specs": specs, "boxes_per_spec": per_spec, "mismatched_specs": bad,
            "seconds": seconds, "boxes_per_s": done / seconds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--boxes", type=int, default=20000)
    p.add_argument("--per-spec", type=int, default=64)
    p.add_argument("--encode-repeats", type=int, default=2000)
    args = p.parse_args()
    context()
    host = np.random.default_rng(0).integers(0, 256, 8 << 20, dtype=np.uint8)
    enc = time_encode(args.encode_repeats)
    with DeviceBuffer.from_array(host) as buf:
        loads = time_loads(buf, host, args.boxes, args.per_spec)
    print(json.dumps({"bench": "tensormap_encode", **{k: round(v, 3) for k, v in enc.items()}}))
    print(json.dumps({"bench": "tensormap_loads", **{k: round(v, 3) if isinstance(v, float) else v
                                                      for k, v in loads.items()}}))
    rows = [["encode, driver only (us/map)", f"{enc['encode_unchecked_us']:.2f}"],
            ["encode, validated (us/map)", f"{enc['encode_validated_us']:.2f}"],
            ["validation overhead", f"{enc['validation_overhead_pct']:.0f}% (target < 50%)"],
            ["boxes checked per second (probe + oracle)", f"{loads['boxes_per_s']:.0f} (target >= 5000)"],
            ["boxes / specs / mismatching specs", f"{loads['boxes']} / {loads['specs']} / {loads['mismatched_specs']}"]]
    print(tabulate(rows, headers=["tensor maps", "value"]))


if __name__ == "__main__":
    main()
