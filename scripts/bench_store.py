#!/usr/bin/env python3
"""Round trip y = x*a + b over a large fp32 array: TMA load -> compute in shared memory -> TMA store, against a
plain vectorised load/store kernel, each as a fraction of cuMemcpyDtoD's rate. Rates count bytes read + written.
Prints a table and one JSON line; checks the output bit for bit and says so (never asserts)."""

from __future__ import annotations

import argparse

import numpy as np
from tabulate import tabulate

from drvtma import DeviceBuffer, StatusBuffer, device_properties, load_module
from drvtma.runtime.figures import record_figure
from drvtma.runtime.timing import gb_per_s, time_copy, time_launches
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.spec import TensorMapSpec

COLS = 4096  # the array is viewed as rows of 16 KiB
A, B = 1.5, -0.25


def time_ms(fn, repeats: int) -> float:
    return time_launches(fn, runs=repeats, warmups=1).median


def check(out: DeviceBuffer, x: np.ndarray) -> str:
    got = out.download(np.float32, x.shape)
    want = x * np.float32(A) + np.float32(B)
    bad = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
    return "ok" if bad == 0 else f"MISMATCH ({bad} elements)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mib", type=int, default=1024, help="size of the input array (the output is the same)")
    p.add_argument("--box", default="32x128", help="TMA tile, rows x columns of fp32 (columns <= 256)")
    p.add_argument("--stages", type=int, default=4, help="tiles in flight per CTA (2..8)")
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    box_rows, box_cols = (int(v) for v in args.box.lower().split("x"))
    if not 2 <= args.stages <= 8:  # one stage cannot refill ahead; the kernel has barriers for at most 8
        p.error(f"--stages must be in 2..8, got {args.stages}")
    props = device_properties()
    rows = max(box_rows, (args.mib << 20) // (4 * COLS) // box_rows * box_rows)
    n = rows * COLS
    nbytes = 4 * n
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    tile_bytes = box_rows * box_cols * 4
    smem = args.stages * tile_bytes
    ctas_per_sm = max(1, min(8, props.smem_per_sm // (smem + 2048)))
    module = load_module("tma/roundtrip_store.cu")
    results = []
    with DeviceBuffer.from_array(x) as src, DeviceBuffer(nbytes) as dst, StatusBuffer() as status:
        memcpy_ms = time_copy(nbytes, runs=args.repeats, warmups=1).median

        plain = module.kernel("plain_roundtrip")
        grid = props.sm_count * 8
        dst.fill_u32(0x7FBADBAD)
        plain_ms = time_ms(lambda: plain.launch(src, dst, n // 4, A, B, grid=grid, block=256), args.repeats)
        plain_check = check(dst, x)

        spec = TensorMapSpec.create("float32", (rows, COLS), (box_rows, box_cols))
        in_map, out_map = encode_tiled(spec, src), encode_tiled(spec, dst)
        tma = module.kernel("tma_roundtrip")
        tiles_x, num_tiles = COLS // box_cols, (rows // box_rows) * (COLS // box_cols)
        tma_grid = props.sm_count * ctas_per_sm
        dst.fill_u32(0x7FBADBAD)
        tma_ms = time_ms(lambda: tma.launch(in_map, out_map, box_cols, box_rows, tiles_x, num_tiles, args.stages, A,
                                            B, status, grid=tma_grid, block=256, shared_mem=smem), args.repeats)
        status.check("tma_roundtrip")
        tma_check = check(dst, x)

    moved = 2 * nbytes
    memcpy_rate = gb_per_s(moved, memcpy_ms)
    for name, ms, config, verdict in (
            ("cuMemcpyDtoD", memcpy_ms, "-", "-"),
            ("plain float4 kernel", plain_ms, f"grid {grid} x 256", plain_check),
            ("TMA load -> x*a+b -> TMA store", tma_ms,
             f"grid {tma_grid} x 256, tile {box_rows}x{box_cols}, {args.stages} stages", tma_check)):
        rate = gb_per_s(moved, ms)
        results.append({"kernel": name, "ms": round(ms, 4), "GBps": round(rate, 1),
                        "of_memcpy": round(rate / memcpy_rate, 3), "config": config, "check": verdict})
    print(f"{props.name}: {args.mib} MiB in, {args.mib} MiB out (bytes read + written), median of {args.repeats}")
    print(tabulate([(r["kernel"], r["ms"], r["GBps"], r["of_memcpy"], r["config"], r["check"]) for r in results],
                   headers=["kernel", "ms", "GB/s", "of memcpy", "config", "output"], tablefmt="github"))
    line = {"bench": "store_roundtrip", "device": props.name, "mib": args.mib, "box": args.box,
            "stages": args.stages, "results": results}
    record_figure(line)
    return 0 if plain_check == tma_check == "ok" else 1  # a wrong output fails the step, it is not just a row


if __name__ == "__main__":
    raise SystemExit(main())
