#!/usr/bin/env python3
"""The oracles' pace on one CPU core, for the standard campaigns' own cases (no GPU needed).

For each target (loads, im2col, stores, reductions) it builds the first `--cases` cases of gpu-check's standard
campaign (the same seed, so the same spec mix), then times, case by case on this one process: building the case
(`generate`), its data, and the oracle's answer (`oracle`: the shared-memory images of every box for loads and
im2col, the memory after the store or reduction for stores). A change that slows the oracle shows here before a
GPU run: a fuzz campaign checks no faster than its oracle answers unless the oracle runs beside the GPU.

Prints a table and one figure line per target, {"bench": "oracle", "target": T, "per_second": ..., "unit": ...}.
With `--workers N`, also the pace of the oracle workers (`drvtma fuzz --oracle-workers N`: `fuzz.oracle_pool`) on
the same cases, handed over batch by batch as a campaign takes them, and how busy the workers were:
{"bench": "oracle_workers", "target": T, "workers": N, "per_second": ..., "busy": ...}. Below N times the one-core
rate with the workers busy: the host's cores are the limit; with them idle, the hand-over is.
Usage: python3 scripts/bench_oracle.py [--cases N] [--targets loads,stores] [--workers N]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from drvtma.fuzz.campaign import build_case  # noqa: E402  (after the source root is on the path)
from drvtma.fuzz.oracle_pool import OraclePool  # noqa: E402
from drvtma.fuzz.standard import standard  # noqa: E402
from drvtma.fuzz.targets import get_target  # noqa: E402
from drvtma.runtime.figures import record_figure, table_text  # noqa: E402
from drvtma.tma.im2col import oracle as im2col_oracle  # noqa: E402
from drvtma.tma.stores import apply_store, smem_from_box  # noqa: E402
from drvtma.tma.tiled import oracle  # noqa: E402
from drvtma.tma.tiled.spec import TensorMapSpec  # noqa: E402

TARGETS = ("loads", "im2col", "stores", "reductions")
FAKE_BASE = 0x7F00_0000_0000  # a 1024-byte aligned address for the maps (no byte is read through it)


def _pool(options: dict) -> np.ndarray:
    return np.random.default_rng(options["data_seed"]).integers(0, 256, options["pool_bytes"], dtype=np.uint8)


def time_loads(options, cases) -> tuple[float, float, int]:
    """(data s, oracle s, boxes) over the cases: the images `LoadsSession` asks the oracle for."""
    pool, clock, t_oracle, boxes = _pool(options), time.perf_counter, 0.0, 0
    for case in cases:
        spec: TensorMapSpec = case.spec.replace(base_address=FAKE_BASE + case.offset)
        window = pool[case.offset:case.offset + spec.extent_bytes]
        t = clock()
        oracle.load_images(spec, window, case.coords, box_offset=case.box_offset,
                           image_bytes=oracle.image_bytes_for(spec, case.box_offset), poison=case.poison)
        t_oracle += clock() - t
        boxes += len(case.coords)
    return 0.0, t_oracle, boxes


def time_im2col(options, cases) -> tuple[float, float, int]:
    pool, clock, t_oracle, loads = _pool(options), time.perf_counter, 0.0, 0
    for case in cases:
        spec = case.spec.replace(base_address=FAKE_BASE + case.offset)
        window = pool[case.offset:case.offset + spec.extent_bytes]
        t = clock()
        im2col_oracle.im2col_images(spec, window, case.coords, case.offsets, box_offset=case.box_offset,
                                    poison=case.poison)
        t_oracle += clock() - t
        loads += len(case.coords)
    return 0.0, t_oracle, loads


def time_stores(options, cases) -> tuple[float, float, int]:
    """The stores oracle as `run_store_cases` uses it: the shared-memory source image, then the memory after."""
    clock, t_data, t_oracle = time.perf_counter, 0.0, 0.0
    rng = np.random.default_rng(0)
    for c in cases:
        t = clock()
        initial, box = c.data()
        pad = rng.integers(0, 256, c.case.spec.smem_bytes, dtype=np.uint8)
        t_data += clock() - t
        t = clock()
        smem_from_box(c.case.spec, box, c.case.smem_offset, pad)
        if min(c.case.coords, default=0) >= 0:
            apply_store(initial.copy(), 0, c.case.spec, c.case.coords, box, c.case.op)
        t_oracle += clock() - t
    return t_data, t_oracle, len(cases)


TIMERS = {"loads": time_loads, "im2col": time_im2col, "stores": time_stores, "reductions": time_stores}


def bench(name: str, count: int) -> dict:
    target = get_target(name)
    std = standard(name)
    options = target.configure()
    t = time.perf_counter()
    cases = [build_case(target, options, std.seed, i)[0] for i in range(min(count, std.examples))]
    t_generate = time.perf_counter() - t
    t_data, t_oracle, size = TIMERS[name](options, cases)
    unit = target.unit
    total = t_generate + t_data + t_oracle
    return {"bench": "oracle", "target": name, "cases": len(cases), "size": size, "unit": unit,
            "generate_s": round(t_generate, 3), "data_s": round(t_data, 3), "oracle_s": round(t_oracle, 3),
            "oracle_per_second": round(size / t_oracle, 1) if t_oracle else math.inf,
            "per_second": round(size / total, 1) if total else math.inf, "cores": 1}


def bench_workers(name: str, count: int, workers: int) -> dict:
    """The first `count` cases of the standard campaign, prepared by `workers` oracle workers and taken batch by
    batch, as a campaign with `--oracle-workers` takes them (the campaign's own checks left out)."""
    target = get_target(name)
    std = standard(name)
    options = target.configure()
    count, per = min(count, std.examples), target.cases_per_batch
    batches = [(b, first, min(first + per, count)) for b, first in enumerate(range(0, count, per))]
    with OraclePool(workers, seed=options.get("data_seed", 0), nbytes=options.get("pool_bytes", 0)) as pool:
        session = SimpleNamespace(pool_base=lambda: FAKE_BASE)  # no device: the maps' fake address
        t = time.perf_counter()
        prepared = pool.prepared_batches(target, options, std.seed, iter(batches), session)
        size = 0
        for _ in prepared:
            built, _answer = prepared.take()
            size += sum(target.size(case) for case, *_ in built)
        seconds = time.perf_counter() - t
        busy = prepared.busy / prepared.capacity if prepared.capacity else 0.0
    return {"bench": "oracle_workers", "target": name, "cases": count, "size": size, "unit": target.unit,
            "workers": workers, "seconds": round(seconds, 3), "per_second": round(size / seconds, 1),
            "busy": round(busy, 3), "slots": pool.directory or "pipe"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=300, help="cases per target (the standard campaign's first ones)")
    p.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    p.add_argument("--workers", type=int, default=0, help="also time N oracle workers on the same cases (0: not)")
    args = p.parse_args(argv)
    names = [n for n in args.targets.split(",") if n]
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names or args.cases < 1 or not 0 <= args.workers <= 64:
        p.error(f"--targets takes {', '.join(TARGETS)} (got {args.targets!r}); --cases at least 1; --workers 0..64")
    rows = []
    for name in names:
        fig = bench(name, args.cases)
        record_figure(fig)
        rows.append((name, f"{fig['cases']:,}", f"{fig['size']:,} {fig['unit']}", f"{fig['generate_s']:.2f}",
                     f"{fig['data_s']:.2f}", f"{fig['oracle_s']:.2f}", f"{fig['oracle_per_second']:,.0f}",
                     f"{fig['per_second']:,.0f}"))
    print(table_text(["target", "cases", "size", "generate s", "data s", "oracle s", "oracle /s (1 core)",
                      "generate+data+oracle /s"], rows))
    if args.workers:
        rows = []
        for name in names:
            fig = bench_workers(name, args.cases, args.workers)
            record_figure(fig)
            rows.append((name, fig["workers"], f"{fig['size']:,} {fig['unit']}", f"{fig['per_second']:,.0f}",
                         f"{fig['busy']:.0%}", fig["slots"]))
        print(table_text(["target", "workers", "size", "prepared /s", "workers busy", "answers through"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
