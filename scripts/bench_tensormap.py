#!/usr/bin/env python3
"""Tensor-map costs: encode per map without drvtma's validation, with it for a new geometry, and with it for a
geometry already validated; and load boxes checked per second on the GPU (probe + oracle, bit for bit). Prints a
table and one JSON line per figure; never asserts."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from tabulate import tabulate

from drvtma import DeviceBuffer, context
from drvtma.tma.probe import LoadProbe, check_loads
from drvtma.tma.spec import TensorMapSpec
from drvtma.tma.encode import encode_tiled
from drvtma.runtime.timing import collector_off
from drvtma.testing import RngChooser, build_coordinates, build_valid_spec


def time_encode(repeats: int, batches: int = 7) -> dict:
    """Per map: encode without validation, with validation of a geometry never seen before, and re-encoding a spec
    whose geometry is known (validation is remembered per geometry, see tensormap._valid_geometry_params)."""
    base = TensorMapSpec.create("bfloat16", (4096, 4096), (64, 64), swizzle="128B")
    buf = DeviceBuffer(base.extent_bytes)  # 32 MiB: encode_tiled checks the tensor fits the buffer
    base = base.replace(base_address=buf.ptr)
    serial = iter(range(2 * batches * repeats))  # two lists of new geometries per batch

    def fresh_specs() -> list[TensorMapSpec]:
        """Specs of geometries not encoded before in this process (fewer rows, then narrower rows)."""
        out = []
        for _ in range(repeats):
            k = next(serial)
            out.append(base.replace(shape=(4096 - k % 2048, 4096 - 8 * (k // 2048))))
        return out

    def batch_us(fn, specs) -> float:
        t0 = time.perf_counter()
        for spec in specs:
            fn(spec)
        return (time.perf_counter() - t0) / len(specs) * 1e6

    # As timeit does: the garbage collector off while timing, and the paths interleaved batch by batch, so a
    # collection or a slow spell of the host lands on no path alone; medians of `batches` batches each.
    runs = {"unchecked": [], "new_geometry": [], "known_geometry": []}
    with buf:
        for _ in range(batches):
            plain, new = fresh_specs(), fresh_specs()  # built outside the timed loops
            with collector_off():
                runs["unchecked"].append(batch_us(lambda s: encode_tiled(s, buf, validate=False), plain))
                runs["new_geometry"].append(batch_us(lambda s: encode_tiled(s, buf), new))
                runs["known_geometry"].append(batch_us(lambda s: encode_tiled(s, buf), [base] * repeats))
    unchecked, new, known = (statistics.median(runs[k]) for k in ("unchecked", "new_geometry", "known_geometry"))
    return {"encode_unchecked_us": unchecked, "encode_validated_us": new, "encode_known_geometry_us": known,
            "validation_overhead_pct": (new / unchecked - 1) * 100,
            "known_geometry_overhead_pct": (known / unchecked - 1) * 100}


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
    p.add_argument("--encode-repeats", type=int, default=2000, help="maps per timed batch (7 batches per path)")
    args = p.parse_args()
    context()
    host = np.random.default_rng(0).integers(0, 256, 8 << 20, dtype=np.uint8)
    enc = time_encode(args.encode_repeats)
    with DeviceBuffer.from_array(host) as buf:
        loads = time_loads(buf, host, args.boxes, args.per_spec)
    print(json.dumps({"bench": "tensormap_encode", **{k: round(v, 3) for k, v in enc.items()}}))
    print(json.dumps({"bench": "tensormap_loads", **{k: round(v, 3) if isinstance(v, float) else v
                                                      for k, v in loads.items()}}))
    rows = [["encode, no validation (us/map)", f"{enc['encode_unchecked_us']:.2f}"],
            ["encode, validated, new geometry (us/map)", f"{enc['encode_validated_us']:.2f}"],
            ["encode, validated, known geometry (us/map)", f"{enc['encode_known_geometry_us']:.2f}"],
            ["validation overhead, new geometry", f"{enc['validation_overhead_pct']:.0f}% (target < 50%)"],
            ["validation overhead, known geometry", f"{enc['known_geometry_overhead_pct']:.0f}%"],
            ["boxes checked per second (probe + oracle)", f"{loads['boxes_per_s']:.0f} (target >= 5000)"],
            ["boxes / specs / mismatching specs", f"{loads['boxes']} / {loads['specs']} / {loads['mismatched_specs']}"]]
    print(tabulate(rows, headers=["tensor maps", "value"]))


if __name__ == "__main__":
    main()
