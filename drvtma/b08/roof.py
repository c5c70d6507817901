"""`drvtma bench roof`: how close the TMA read modes get to the memory roof of this GPU.

In one run: the device-to-device copy rate (cuMemcpyDtoD, counting bytes read + written), a plain vectorized read
kernel (cu/b08/roof.cu), and the TMA read modes (pipeN, ws, plus the article's bulk1d/tensor2d/pipe2) at several stage
sizes, stage counts and blocks per SM, each as a fraction of the copy rate. Every TMA run is verified (per-tile
checksums) and the read kernel's word sum is checked. For each ring mode it names the bytes in flight per SM where
the curve bends: the least that reaches 90% of that mode's best rate.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..errors import DrvtmaError
from ..runtime.driver import call, cu
from ..runtime.figures import csv_text, table_text
from ..runtime.timing import copy_rate_gbs, gb_per_s, time_launches
from .modes import STATIC_SMEM_RESERVE, B08Runner, ModeConfig
from .verify import make_input

SMEM_PER_SM = 228 * 1024  # H100/H200: shared memory per SM, of which each block also reserves 1 KiB
THREADS_PER_SM = 2048
KNEE_FRACTION = 0.90
# The ring shapes `drvtma bench roof` tries by default (those that fit an SM).
ROOF_STAGES = (2, 3, 4, 8)
ROOF_TILES_PER_STAGE = (1, 2, 4, 8, 16)
ROOF_BLOCKS_PER_SM = (1, 2, 4)
ROOF_SPLITS = ("thread", "warp")


@dataclass(frozen=True)
class RoofPoint:
    label: str
    mode: str
    stages: int
    tiles_per_stage: int
    blocks_per_sm: int  # resident blocks per SM (the occupancy API's answer, at most what the grid asked for)
    in_flight_per_sm: int  # bytes one SM can have requested and not consumed
    median_ms: float
    read_gbs: float  # bytes read per second / 1e9
    registers: int = 0  # per thread
    register_bound: bool = False  # registers, not shared memory or threads, capped the resident blocks
    split: str = ""  # ring modes: "thread" or "warp" (ModeConfig.split)

    @property
    def curve(self) -> str:
        """The family a knee is found in: the mode, and its split for the rings."""
        return f"{self.mode} ({self.split} split)" if self.split else self.mode

    def fraction(self, copy_gbs: float) -> float:
        return self.read_gbs / copy_gbs


def ring_configs(num_tiles: int, sm_count: int, *, threads: int = 256, stages=ROOF_STAGES,
                 tiles_per_stage=ROOF_TILES_PER_STAGE, blocks_per_sm=ROOF_BLOCKS_PER_SM, splits=ROOF_SPLITS) -> list[tuple[ModeConfig, int]]:
    """(config, blocks per SM) of pipeN and ws that fit an SM's shared memory and threads, as persistent grids.

    With the warp split only fills of a whole number of tiles per consumer warp are taken: a smaller fill would
    leave warps idle and measure that instead of the copies."""
    out = []
    warps = threads // 32
    for split in splits:
        for mode in ("pipeN", "ws"):
            block_threads = threads + (32 if mode == "ws" else 0)
            for bps in blocks_per_sm:
                if bps * block_threads > THREADS_PER_SM:
                    continue
                per_block = -(-num_tiles // (sm_count * bps))
                for k in stages:
                    for t in tiles_per_stage:
                        ring = k * t * 4096
                        if bps * (ring + STATIC_SMEM_RESERVE + 1024) > SMEM_PER_SM or (split == "warp" and t % warps):
                            continue
                        out.append((ModeConfig(mode, threads=threads, tiles_per_block=per_block, stages=k,
                                               tiles_per_stage=t, split=split), bps))
    return out


def knees(points: list[RoofPoint], fraction: float = KNEE_FRACTION) -> dict[str, RoofPoint]:
    """Per curve (mode and split): the point with the fewest bytes in flight per SM that reaches `fraction` of that
    curve's best rate."""
    out = {}
    for curve in sorted({p.curve for p in points}):
        mine = [p for p in points if p.curve == curve]
        best = max(p.read_gbs for p in mine)
        ok = [p for p in mine if p.read_gbs >= fraction * best]
        out[curve] = min(ok, key=lambda p: (p.in_flight_per_sm, -p.read_gbs))
    return out


def measure_read_kernel(runner, sm_count: int, runs: int, warmups: int, expected_word_sum: int
                        ) -> list[RoofPoint]:
    """The plain read kernel at a few launch shapes; each checked against the input's word sum."""
    from ..runtime.driver import DeviceBuffer, synchronize
    from ..runtime.kernel import load_module

    points = []
    n_vec = runner.n // 4
    for unroll, threads, bps in ((4, 512, 4), (8, 256, 8), (8, 1024, 2)):
        kernel = load_module("b08/roof.cu", defines={"ROOF_UNROLL": unroll}).kernel("roof_read_vec4")
        grid = sm_count * bps
        with DeviceBuffer(grid * 4) as sums:
            sums.fill_u32(0xDEADBEEF)
            kernel.launch(runner.address, n_vec, sums, grid=grid, block=threads)
            synchronize()
            got = int(sums.download(np.uint32).sum(dtype=np.uint32))
            if got != expected_word_sum:
                raise DrvtmaError(f"roof_read_vec4 (unroll {unroll}, {threads} threads, {bps} blocks/SM) read a word "
                                  f"sum of 0x{got:08x}, expected 0x{expected_word_sum:08x}")
            t = time_launches(lambda: kernel.launch(runner.address, n_vec, sums, grid=grid, block=threads),
                              runs=runs, warmups=warmups)
        points.append(RoofPoint(f"read_vec4 x{unroll}, {threads} thr", "read_vec4", 0, 0, bps, 0, t.median,
                                gb_per_s(runner.n * 4, t.median)))
    return points


def residency(kernel, block_threads: int, smem_bytes: int) -> tuple[int, int]:
    """(blocks one SM can hold, registers per thread) of a loaded kernel, from the driver's occupancy API."""
    blocks = call(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor, kernel.function, block_threads, smem_bytes)
    regs = call(cu.cuFuncGetAttribute, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, kernel.function)
    return int(blocks), int(regs)


def blocks_by_registers(regs_per_thread: int, block_threads: int, regs_per_sm: int = 65536) -> int:
    """Blocks an SM's register file holds: registers go to warps in units of 256 (8 per thread)."""
    per_warp = -(-regs_per_thread * 32 // 256) * 256
    return regs_per_sm // (per_warp * -(-block_threads // 32))


def measure_tma(runner, configs, runs: int, warmups: int, progress=None) -> list[RoofPoint]:
    points = []
    for i, (cfg, bps) in enumerate(configs):
        runner.run_checked(cfg, 0)  # also sets the kernel's shared-memory opt-in, which residency needs
        t = time_launches(lambda: runner.launch(cfg, 0), runs=runs, warmups=warmups)
        runner.check_status(cfg, "timed launches")
        fits, regs = residency(runner.kernel(cfg), cfg.block_threads, cfg.smem_bytes)
        register_bound = blocks_by_registers(regs, cfg.block_threads) <= min(bps, fits) < bps
        bps = min(bps, fits)
        in_flight = bps * cfg.bytes_in_flight
        p = RoofPoint(cfg.describe(), cfg.mode, cfg.stages, cfg.tiles_per_stage, bps, in_flight, t.median,
                      gb_per_s(runner.n * 4, t.median), regs, register_bound,
                      cfg.split if cfg.spec.ring else "")
        points.append(p)
        if progress is not None:
            print(f"[{i + 1}/{len(configs)}] {p.label}, {bps} blocks/SM: {p.read_gbs:.0f} GB/s", file=progress,
                  flush=True)
    return points


@dataclass
class RoofResult:
    device: str
    nbytes: int
    copy_gbs: float
    read_points: list[RoofPoint]
    tma_points: list[RoofPoint]

    def rows(self) -> list[list]:
        rows = []
        for p in self.read_points + self.tma_points:
            rows.append([p.mode, p.split, p.stages or "", p.tiles_per_stage or "",
                         f"{p.tiles_per_stage * 4}" if p.tiles_per_stage else "", p.blocks_per_sm, p.registers or "",
                         f"{p.in_flight_per_sm // 1024}" if p.in_flight_per_sm else "", f"{p.median_ms:.4f}",
                         f"{p.read_gbs:.0f}", f"{p.fraction(self.copy_gbs):.3f}"])
        return rows

    HEADERS = ["mode", "split", "stages", "tiles/stage", "stage KiB", "blocks/SM", "regs", "in flight KiB/SM", "ms",
               "read GB/s", "x copy rate"]

    def text(self, fmt: str = "simple") -> str:
        lines = [f"roof: {self.device}, {self.nbytes / 2**30:.2f} GiB read per launch",
                 f"cuMemcpyDtoD: {self.copy_gbs:.0f} GB/s (read + written bytes) = 1.000", "",
                 table_text(self.HEADERS, self.rows(), fmt), ""]
        best_read = max(self.read_points, key=lambda p: p.read_gbs)
        lines.append(f"plain read kernel, best: {best_read.read_gbs:.0f} GB/s = "
                     f"{best_read.fraction(self.copy_gbs):.3f} of the copy rate ({best_read.label}, "
                     f"{best_read.blocks_per_sm} blocks/SM)")
        if self.tma_points:
            best = max(self.tma_points, key=lambda p: p.read_gbs)
            lines.append(f"TMA, best: {best.read_gbs:.0f} GB/s = {best.fraction(self.copy_gbs):.3f} of the copy rate "
                         f"({best.label}, {best.blocks_per_sm} blocks/SM, {best.in_flight_per_sm // 1024} KiB in "
                         f"flight per SM)")
            ring = [p for p in self.tma_points if p.mode in ("pipeN", "ws")]
            for curve, p in knees(ring).items():
                lines.append(f"{curve}: the curve bends at {p.in_flight_per_sm // 1024} KiB in flight per SM "
                             f"({p.read_gbs:.0f} GB/s, {KNEE_FRACTION:.0%} of its best; {p.label}, "
                             f"{p.blocks_per_sm} blocks/SM)")
            if ring:
                bound = [p for p in ring if p.register_bound]
                lines.append(f"registers: {min(p.registers for p in ring)}-{max(p.registers for p in ring)} per thread "
                             f"in the rings; they capped the resident blocks in {len(bound)} of {len(ring)} shapes "
                             "(where they do not, setmaxnreg has nothing to rebalance)")
        return "\n".join(lines)

    def csv_text(self) -> str:
        return csv_text(["mode", "split", "stages", "tiles_per_stage", "blocks_per_sm", "registers",
                         "in_flight_bytes_per_sm", "median_ms", "read_gbs", "fraction_of_copy", "label"],
                        [["memcpy_dtod", *[""] * 7, f"{self.copy_gbs:.1f}", "1.0000", "read + written bytes"],
                         *([p.mode, p.split, p.stages, p.tiles_per_stage, p.blocks_per_sm, p.registers,
                            p.in_flight_per_sm, f"{p.median_ms:.6f}", f"{p.read_gbs:.1f}",
                            f"{p.fraction(self.copy_gbs):.4f}", p.label] for p in self.read_points + self.tma_points)])


def run_roof(*, nbytes: int = 1 << 30, runs: int = 5, warmups: int = 2, threads: int = 256, stages=ROOF_STAGES,
             tiles_per_stage=ROOF_TILES_PER_STAGE, blocks_per_sm=ROOF_BLOCKS_PER_SM, splits=ROOF_SPLITS,
             article_modes: bool = True, progress=sys.stderr) -> RoofResult:
    from ..runtime.driver import device_properties

    props = device_properties()
    n = nbytes // 4 // 1024 * 1024
    if progress is not None:
        print(f"roof: {props.name}, {n * 4 / 2**30:.2f} GiB", file=progress, flush=True)
    copy_gbs = copy_rate_gbs(n * 4, runs=runs, warmups=warmups)
    inp = make_input(n, seed=1)
    runner = B08Runner.upload(inp)
    try:
        assert runner.reference is not None  # B08Runner.upload attaches the input's reference
        runner.reference.prepare([0])
        word_sum = int(inp.data.view(np.uint32).sum(dtype=np.uint32))
        read_points = measure_read_kernel(runner, props.sm_count, runs, warmups, word_sum)
        configs = ring_configs(runner.num_tiles, props.sm_count, threads=threads, stages=stages,
                               tiles_per_stage=tiles_per_stage, blocks_per_sm=blocks_per_sm, splits=splits)
        if article_modes:
            # 64 tiles per block as in the article: many blocks, up to 8 resident per SM
            configs = [(ModeConfig(m, threads=threads, tiles_per_block=64), 8)
                       for m in ("bulk1d", "tensor2d", "pipe2")] + configs
        tma_points = measure_tma(runner, configs, runs, warmups, progress)
    finally:
        runner.close()
    return RoofResult(f"{props.name} ({props.sm_count} SMs)", n * 4, copy_gbs, read_points, tma_points)
