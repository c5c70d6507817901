"""`drvtma bench floors`: what bounds a ring mode, its copies or its consumers' compute, and so how much any ring
of that shape can gain over sync.

For each ring mode of a sweep configuration (the article preset by default) and each fma_iters, in one run:
- the launch floor: an empty kernel with the ring's grid, block and shared memory;
- the copies alone (part "copy_only": consumers release every fill untouched);
- the compute alone (part "compute_only": fills complete without a copy, consumers compute on the ring as it is);
- the full ring and sync, both verified against NumPy.
The full ring does the work of both halves, so it cannot beat the slower one: sync / max(copies, compute) is the
most that ring shape, with its grid and its consumers, can gain over sync. The halves are timing probes with no
checksum to verify; each must finish without a barrier timeout, a copy-only launch must leave every sum poisoned
(it computed nothing) and a compute-only launch must write every sum (its consumers saw every fill).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import numpy as np

from ..errors import DrvtmaError
from ..runtime.figures import csv_text, table_text
from ..runtime.timing import time_launches
from .modes import B08Runner, ModeConfig
from .sweep import SweepConfig
from .verify import SUMS_POISON, make_input


def ring_label(m: ModeConfig) -> str:
    """A short name of a ring shape for table rows: `ws 4x8 warp, 256 thr, 64 tiles/block`."""
    return f"{m.name} {m.stages}x{m.tiles_per_stage} {m.split}, {m.threads} thr, {m.tiles_per_block} tiles/block"


@dataclass(frozen=True)
class FloorRow:
    ring: str  # ring_label() of the full ring
    fma_iters: int
    launch_ms: float
    copy_ms: float
    compute_ms: float
    full_ms: float
    sync_ms: float

    @property
    def bound_ms(self) -> float:
        return max(self.copy_ms, self.compute_ms)

    @property
    def limit(self) -> str:
        return "compute" if self.compute_ms >= self.copy_ms else "copies"

    @property
    def speedup(self) -> float:
        return self.sync_ms / self.full_ms

    @property
    def best_speedup(self) -> float:
        """The most this ring shape can gain over sync: sync / its slower half."""
        return self.sync_ms / self.bound_ms


HEADERS = ["ring", "fma", "launch us", "copies us", "compute us", "full us", "sync us", "bound by", "full / bound",
           "x sync", "best x sync"]


@dataclass
class FloorsResult:
    device: str
    config: SweepConfig
    rows: list[FloorRow]

    def table_rows(self) -> list[list]:
        return [[r.ring, r.fma_iters, f"{r.launch_ms * 1e3:.2f}", f"{r.copy_ms * 1e3:.2f}",
                 f"{r.compute_ms * 1e3:.2f}", f"{r.full_ms * 1e3:.2f}", f"{r.sync_ms * 1e3:.2f}", r.limit,
                 f"{r.full_ms / r.bound_ms:.3f}", f"{r.speedup:.2f}", f"{r.best_speedup:.2f}"] for r in self.rows]

    def text(self, fmt: str = "simple") -> str:
        c = self.config
        sync = next((m for m in c.modes if m.mode == "sync"), ModeConfig("sync"))
        lines = [f"floors: {self.device}, n = {c.n:,} fp32, median of {c.runs} launches"
                 + (f" behind a {c.head_start_ns // 1000} us stream hold" if c.head_start_ns else ""),
                 f"sync: {sync.threads} threads, {sync.tiles_per_block} tiles/block "
                 f"({sync.grid(c.n // 1024)} blocks)", "",
                 table_text(HEADERS, self.table_rows(), fmt), "",
                 "bound = the slower half (copies alone or compute alone); the full ring cannot beat it, so "
                 "best x sync = sync / bound is the most this ring shape can gain over sync."]
        return "\n".join(lines)

    def csv_text(self) -> str:
        return csv_text(["ring", "fma_iters", "launch_ms", "copy_only_ms", "compute_only_ms", "full_ms", "sync_ms",
                         "bound_by", "best_speedup", "speedup"],
                        [[r.ring, r.fma_iters, *(f"{v:.6f}" for v in (r.launch_ms, r.copy_ms, r.compute_ms, r.full_ms,
                                                                       r.sync_ms)),
                          r.limit, f"{r.best_speedup:.4f}", f"{r.speedup:.4f}"] for r in self.rows])


def check_probe_sums(cfg: ModeConfig, raw: np.ndarray) -> None:
    """A copy-only probe publishes nothing; a compute-only probe publishes a pair for every tile and slot."""
    unwritten = np.all(raw == np.uint32(SUMS_POISON), axis=-1)
    if cfg.part == "copy_only" and not unwritten.all():
        raise DrvtmaError(f"{cfg.describe()}: wrote {int((~unwritten).sum())} checksum pair(s); the copy-only probe "
                          "must compute nothing")
    if cfg.part == "compute_only" and unwritten.any():
        raise DrvtmaError(f"{cfg.describe()}: {int(unwritten.sum())} checksum pair(s) never written; the "
                          "compute-only probe skipped fills")


def run_floors(cfg: SweepConfig, *, progress=sys.stderr) -> FloorsResult:
    """Time the launch floor, both halves and the full ring of every ring mode in cfg, and sync, per fma_iters."""
    from ..runtime.driver import device_properties
    from ..runtime.kernel import load_module

    rings = [m for m in cfg.modes if m.spec.ring]
    if not rings:
        raise DrvtmaError("floors: the configuration has no ring mode (pipeN or ws) to bound")
    sync = next((m for m in cfg.modes if m.mode == "sync"), ModeConfig("sync"))
    props = device_properties()
    runner = B08Runner.upload(make_input(cfg.n, cfg.seed))
    empty = load_module("runtime/timing.cu").kernel("empty_kernel")

    def timed(launch) -> float:
        return time_launches(launch, runs=cfg.runs, warmups=cfg.warmups, head_start_ns=cfg.head_start_ns).median

    def run(mc: ModeConfig, fma: int) -> float:
        raw = runner.run_checked(mc, fma, verify=mc.part == "full")
        check_probe_sums(mc, raw)
        ms = timed(lambda: runner.launch(mc, fma))
        runner.check_status(mc, "timed launches")
        if progress is not None:
            print(f"floors: fma_iters={fma} {mc.describe()}: {ms * 1e3:.2f} us", file=progress, flush=True)
        return ms

    rows = []
    try:
        assert runner.reference is not None  # B08Runner.upload attaches the input's reference
        runner.reference.prepare(cfg.fma_list)
        # Neither the empty launch nor the copies alone depend on fma_iters: timed once per ring.
        launch_ms = {r: timed(lambda r=r: empty.launch(grid=r.grid(runner.num_tiles), block=r.block_threads,
                                                       shared_mem=r.smem_bytes)) for r in rings}
        copy_ms = {r: run(replace(r, part="copy_only"), cfg.fma_list[0]) for r in rings}
        for fma in cfg.fma_list:
            sync_ms = run(sync, fma)
            for ring in rings:
                compute_ms = run(replace(ring, part="compute_only"), fma)
                rows.append(FloorRow(ring_label(ring), fma, launch_ms[ring], copy_ms[ring], compute_ms,
                                     run(ring, fma), sync_ms))
    finally:
        runner.close()
    return FloorsResult(f"{props.name} ({props.sm_count} SMs)", cfg, rows)
