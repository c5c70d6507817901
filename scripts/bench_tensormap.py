#!/usr/bin/env python3
"""Tensor-map costs: encode per map, side by side in one process: the bare cuTensorMapEncodeTiled, cuda.core's
as_tensor_map, and drvtma without validation, with it for a new geometry and for a spec already seen; and load boxes
checked per second on the GPU (probe + oracle, bit for bit). Prints a table and one JSON line per figure."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from tabulate import tabulate

from drvtma import DeviceBuffer, context
from drvtma.runtime.timing import collector_off
from drvtma.testing import RngChooser, build_coordinates, build_valid_spec
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.probe import LoadProbe, check_loads
from drvtma.tma.tiled.spec import TensorMapSpec


def _cuda_core_encode(buf: DeviceBuffer, shape, box):
    """cuda.core's own path to a tiled map for the same memory (StridedMemoryView.as_tensor_map), or None when this
    cuda.core has none."""
    try:
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        return None
    if not hasattr(StridedMemoryView, "as_tensor_map"):
        return None

    class Exporter:  # the bf16 bits as uint16: the element type does not change the cost
        __cuda_array_interface__ = {"shape": shape, "typestr": "<u2", "data": (buf.ptr, False), "version": 3,
                                    "strides": None, "stream": None}

    make = getattr(StridedMemoryView, "from_cuda_array_interface", StridedMemoryView)
    view = make(Exporter(), -1)
    view.as_tensor_map(box)  # fails here, not in the timed loop, if this version wants something else
    return lambda: view.as_tensor_map(box)


def time_encode(repeats: int, batches: int = 7) -> dict:
    """Per map, in one process and interleaved batch by batch: the bare cuTensorMapEncodeTiled (arguments built
    once), cuda.core's as_tensor_map, and drvtma's encode_tiled without validation, with validation of a geometry
    never seen before, and for a spec already seen (validation is remembered per geometry, see encode._geometry)."""
    from cuda.bindings import driver as cu

    base = TensorMapSpec.create("bfloat16", (4096, 4096), (64, 64))
    buf = DeviceBuffer(base.extent_bytes)  # 32 MiB: encode_tiled checks the tensor fits the buffer
    base = base.replace(base_address=buf.ptr)
    p = base.tma_params()
    u32, u64 = cu.cuuint32_t, cu.cuuint64_t
    bare_args = (cu.CUtensorMapDataType(p.dtype_enum), u32(p.rank), buf.ptr, [u64(v) for v in p.global_dim],
                 [u64(v) for v in p.global_strides], [u32(v) for v in p.box_dim], [u32(v) for v in p.element_strides],
                 cu.CUtensorMapInterleave(p.interleave), cu.CUtensorMapSwizzle(p.swizzle),
                 cu.CUtensorMapL2promotion(p.l2_promotion), cu.CUtensorMapFloatOOBfill(p.oob_fill))
    bare = cu.cuTensorMapEncodeTiled
    if bare(*bare_args)[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"the bare encode failed: {bare(*bare_args)[0]!r}")

    def bare_built(spec: TensorMapSpec):
        """The bare call as a caller of the driver API writes it for a map: its cuda-python arguments, then the call
        (the arguments of `spec` in the driver's order; no checks)."""
        shape, strides = spec.shape, spec.strides_bytes
        return bare(cu.CUtensorMapDataType(p.dtype_enum), u32(len(shape)), buf.ptr,
                    [u64(v) for v in shape[::-1]], [u64(v) for v in strides[-2::-1]],
                    [u32(v) for v in spec.box[::-1]], [u32(v) for v in spec.element_strides[::-1]],
                    cu.CUtensorMapInterleave(p.interleave), cu.CUtensorMapSwizzle(p.swizzle),
                    cu.CUtensorMapL2promotion(p.l2_promotion), cu.CUtensorMapFloatOOBfill(p.oob_fill))
    try:
        core = _cuda_core_encode(buf, base.shape, base.box)
    except Exception as exc:  # noqa: BLE001 - a figure this cuda.core cannot give
        print(f"cuda.core as_tensor_map: not measured ({type(exc).__name__}: {exc})")
        core = None
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
    runs = {"bare": [], "bare_built": [], "cuda_core": [], "unchecked": [], "new_geometry": [], "known_geometry": []}
    encode_tiled(base, buf)  # the first encode sets up the context and the driver's argument types
    with buf:
        for _ in range(batches):
            plain, new = fresh_specs(), fresh_specs()  # built outside the timed loops
            with collector_off():
                runs["bare"].append(batch_us(lambda s: bare(*bare_args), plain))
                runs["bare_built"].append(batch_us(bare_built, plain))
                if core is not None:
                    runs["cuda_core"].append(batch_us(lambda s: core(), plain))
                runs["unchecked"].append(batch_us(lambda s: encode_tiled(s, buf, validate=False), plain))
                runs["new_geometry"].append(batch_us(lambda s: encode_tiled(s, buf), new))
                runs["known_geometry"].append(batch_us(lambda s: encode_tiled(s, buf), [base] * repeats))
    med = {k: statistics.median(v) if v else None for k, v in runs.items()}
    # "bare" is the call with its arguments built for the map, as any caller of the driver API pays (2.90 us
    # when first measured); "bare_prebuilt" reuses one set of argument objects, the binding and the driver alone.
    return {"encode_bare_us": med["bare_built"], "encode_bare_prebuilt_us": med["bare"],
            "encode_cuda_core_us": med["cuda_core"],
            "encode_unchecked_us": med["unchecked"], "encode_validated_us": med["new_geometry"],
            "encode_known_geometry_us": med["known_geometry"],
            "encode_known_over_bare": med["known_geometry"] / med["bare_built"],
            "encode_new_over_bare": med["new_geometry"] / med["bare_built"],
            "encode_known_over_prebuilt": med["known_geometry"] / med["bare"],
            "encode_new_over_prebuilt": med["new_geometry"] / med["bare"],
            "validation_overhead_pct": (med["new_geometry"] / med["unchecked"] - 1) * 100,
            "known_geometry_overhead_pct": (med["known_geometry"] / med["unchecked"] - 1) * 100}


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


def main() -> int:
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
    print(json.dumps({"bench": "tensormap_encode", **{k: None if v is None else round(v, 3) for k, v in enc.items()}}))
    print(json.dumps({"bench": "tensormap_loads", **{k: round(v, 3) if isinstance(v, float) else v
                                                      for k, v in loads.items()}}))
    core_us = "-" if enc["encode_cuda_core_us"] is None else f"{enc['encode_cuda_core_us']:.2f}"
    rows = [["bare cuTensorMapEncodeTiled, arguments built per map (us/map)", f"{enc['encode_bare_us']:.2f}"],
            ["bare cuTensorMapEncodeTiled, arguments built once (us/map)", f"{enc['encode_bare_prebuilt_us']:.2f}"],
            ["cuda.core as_tensor_map (us/map)", core_us],
            ["encode, no validation (us/map)", f"{enc['encode_unchecked_us']:.2f}"],
            ["encode, validated, new geometry (us/map)", f"{enc['encode_validated_us']:.2f}"],
            ["encode, validated, known geometry (us/map)", f"{enc['encode_known_geometry_us']:.2f}"],
            ["known geometry / bare", f"{enc['encode_known_over_bare']:.2f}"],
            ["new geometry / bare", f"{enc['encode_new_over_bare']:.2f}"],
            ["validation overhead, new geometry", f"{enc['validation_overhead_pct']:.0f}%"],
            ["boxes checked per second (probe + oracle)", f"{loads['boxes_per_s']:.0f}"],
            ["boxes / specs / mismatching specs", f"{loads['boxes']} / {loads['specs']} / {loads['mismatched_specs']}"]]
    print(tabulate(rows, headers=["tensor maps", "value"]))
    return 1 if loads["mismatched_specs"] else 0  # a load that disagrees with the oracle fails the step


if __name__ == "__main__":
    raise SystemExit(main())
