#!/usr/bin/env python3
"""A small correct run of every kernel in cu/tma/global_map.cu and cu/tma/global_map_bench.cu, for compute-sanitizer
(scripts/sanitize.py family `global_maps`): global maps (each fence, with and without prefetch), the __constant__ map,
device-side edits (from a template and from zeros), the fenced rewrite probe, and the descriptor benchmark kernel.
Every load is checked against the oracle; exits non-zero on a mismatch. No expected faults here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drvtma.runtime.driver import DeviceBuffer, context  # noqa: E402
from drvtma.tma.maps.global_maps import POISON, GlobalMapRunner, MapSlots, ReplaceJob  # noqa: E402
from drvtma.tma.maps.replace import Edit, apply_to_spec  # noqa: E402
from drvtma.tma.tiled import oracle  # noqa: E402
from drvtma.tma.tiled.encode import encode_tiled  # noqa: E402
from drvtma.tma.tiled.spec import TensorMapSpec  # noqa: E402


def main() -> int:
    context()
    host = np.random.default_rng(3).integers(0, 256, 4 << 20, dtype=np.uint8)
    bad = 0
    with DeviceBuffer.from_array(host) as buf:
        runner = GlobalMapRunner()
        spec = TensorMapSpec.from_buffer(buf, "float32", (100, 128), (16, 16), swizzle="64B")
        tmap = encode_tiled(spec, buf)
        coords = [(0, 0), (8, 16), (96, 112), (-4, -16)]

        def check(s, got):
            want = oracle.load_images(s, host[s.base_address - buf.ptr:], coords, image_bytes=got.shape[1],
                                      poison=POISON)
            return int((got != want).any(axis=1).sum())

        with MapSlots(1) as slots:
            slots.write(0, tmap)
            for fence in ("sys", "gpu", "none"):
                for prefetch in (False, True):
                    bad += check(spec, runner.load_global(slots.address(0), spec, coords, fence=fence,
                                                          prefetch=prefetch))
        runner.write_const_map(tmap)
        bad += check(spec, runner.load_const(spec, coords, prefetch=True))
        edits = [Edit("global_address", spec.base_address + 4096), Edit("box_dim", 8, 1), Edit("swizzle", 3)]
        edited = spec
        for e in edits:
            edited = apply_to_spec(edited, e)
        res = runner.replace_load(tmap, [ReplaceJob(edits, edited, c) for c in coords])
        bad += check(edited, res.images)
        p = spec.tma_params()
        zero_edits = [Edit("global_address", spec.base_address), Edit.rank(2), Edit.elemtype("float32"),
                      Edit("swizzle", 2), Edit("global_dim", p.global_dim[0], 0), Edit("global_dim", p.global_dim[1], 1),
                      Edit("box_dim", p.box_dim[0], 0), Edit("box_dim", p.box_dim[1], 1)]
        first = runner.replace_load(bytes(128), [ReplaceJob(zero_edits, None, (), from_zeros=True)])
        rest = [Edit("global_stride", p.global_strides[0], 0), Edit("element_stride", 1, 0),
                Edit("element_stride", 1, 1)]
        res = runner.replace_load(first.published[0].tobytes(), [ReplaceJob(rest, spec, c) for c in coords])
        bad += check(spec, res.images)
        a = TensorMapSpec.from_buffer(buf, "uint32", (256, 64), (64, 64), offset_bytes=1 << 20)
        b = a.replace(base_address=a.base_address + (1 << 20))
        low = np.arange(256 * 64, dtype=np.uint32) & 0xFFFF
        buf.upload(low | np.uint32(0xAAAA << 16), 1 << 20)
        buf.upload(low | np.uint32(0xBBBB << 16), 2 << 20)
        counts = runner.rewrite_probe(encode_tiled(a, buf), encode_tiled(b, buf), a, (0, 0), blocks=8,
                                      in_flight=False, acquire=True)
        bad += int((counts != np.array([[4096, 0, 0], [0, 4096, 0]])).any(axis=(1, 2)).sum())  # A, then B
        runner.close()
    from drvtma.tma.maps.descriptor_bench import run_descriptor_bench

    run_descriptor_bench(loads=2, runs=1, warmups=0, launches=2, blocks=4)
    print(f"global_maps: {bad} mismatching loads")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
