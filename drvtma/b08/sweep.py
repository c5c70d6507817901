"""Timing and fma_iters sweeps of the B-08 modes, and their table, CSV (the article's columns) and Markdown.

Each (fma_iters, mode) point: one checked launch (poisoned sums, verified against NumPy), warm-ups, then `runs`
launches timed with CUDA events one by one, behind a stream hold (drvtma/timing.py), optionally after an L2
flush; median and p95 are reported.
Formatting works on any `SweepResult`, so it is tested on the CPU with synthetic timings.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ..runtime import figures
from ..runtime.timing import HEAD_START_NS, Timing, copy_rate_gbs, gb_per_s, time_launches
from .modes import ARTICLE_MODES, MODES, B08Runner, ModeConfig
from .verify import check_same_total, make_input

ARTICLE_FMA = (1, 2, 4, 8, 16, 32, 64, 128, 256)
ARTICLE_N = 4_194_304
HBM_N = 1 << 28  # 1 GiB of fp32


# B-08's own C++ program (the article's benchmark), compiled and run on this project's H200: median ms per launch.
REFERENCE_H200_MS = {
    1: (0.035584, 0.041728, 0.047840, 0.034592), 2: (0.038432, 0.045952, 0.050656, 0.038496),
    4: (0.044896, 0.052992, 0.057248, 0.045504), 8: (0.059360, 0.067872, 0.071872, 0.061056),
    16: (0.086272, 0.094784, 0.100288, 0.089184), 32: (0.142080, 0.154240, 0.158400, 0.147232),
    64: (0.253952, 0.269856, 0.273760, 0.262976), 128: (0.476512, 0.499936, 0.505824, 0.494240),
    256: (0.924384, 0.964800, 0.969440, 0.959872),
}
# The article's RTX 5090 speedups vs sync (bulk1d, tensor2d, pipe2), from its table.
ARTICLE_5090_SPEEDUP = {
    1: (1.052, 0.913, 1.688), 2: (0.970, 0.859, 1.521), 4: (0.952, 0.860, 1.419), 8: (0.992, 0.893, 1.258),
    16: (0.979, 0.922, 1.183), 32: (0.981, 0.937, 1.114), 64: (0.991, 0.964, 1.060), 128: (0.996, 0.980, 1.034),
    256: (0.998, 0.991, 1.019),
}
REFERENCE_TOLERANCE = 0.10


# ------------------------------------------------------------------------------------------ configuration

@dataclass(frozen=True)
class SweepConfig:
    n: int
    fma_list: tuple[int, ...]
    modes: tuple[ModeConfig, ...]
    runs: int = 7
    warmups: int = 2
    flush_l2: bool = False
    head_start_ns: int = HEAD_START_NS  # 0 times as the article does: the host's issue time included
    verify: bool = True
    seed: int = 0
    preset: str | None = None
    measure_copy: bool = False  # also time cuMemcpyDtoD of n fp32 (read + written bytes) as the bandwidth yardstick

    def __post_init__(self):
        names = [m.name for m in self.modes]
        if len(set(names)) != len(names):
            raise ValueError(f"mode columns must be distinct, got {names}; give ModeConfig(name=...)")
        if not self.fma_list or any(k < 0 for k in self.fma_list):
            raise ValueError(f"fma_list must hold non-negative counts, got {self.fma_list}")
        if self.runs < 1 or self.warmups < 0:
            raise ValueError(f"runs must be >= 1 and warmups >= 0, got {self.runs}, {self.warmups}")


def article_modes(threads: int = 256, tiles_per_block: int = 64) -> list[ModeConfig]:
    return [ModeConfig(m, threads=threads, tiles_per_block=tiles_per_block) for m in ARTICLE_MODES]


def preset(name: str, *, sm_count: int = 132, n: int | None = None) -> SweepConfig:
    """`article`: the article's own configuration (64 blocks of 256 threads); the rings keep its 64 tiles per block,
    so their speed comes from depth and early release. `hbm`: 1 GiB; the article's modes with 64 tiles per block
    (4096 blocks), the rings as persistent grids over all SMs; the sweep also measures the device-to-device copy
    rate, the yardstick of the bandwidth target (the best TMA read at >= 95% of it)."""
    if name == "article":
        # A fill of 8 tiles gives each of the 8 consumer warps one tile; 4 fills = half a block's 256 KiB in flight.
        modes = article_modes() + [
            ModeConfig(m, threads=256, tiles_per_block=64, stages=4, tiles_per_stage=8, split="warp")
            for m in ("pipeN", "ws")]
        return SweepConfig(n or ARTICLE_N, ARTICLE_FMA, tuple(modes), runs=7, warmups=2, preset=name)
    if name == "hbm":
        n = n or HBM_N
        return SweepConfig(n, ARTICLE_FMA, tuple(article_modes() + persistent_rings(n, sm_count)),
                           runs=7, warmups=2, preset=name, measure_copy=True)
    raise ValueError(f"unknown preset {name!r}; presets: article, hbm")


def persistent_rings(n: int, sm_count: int, *, blocks_per_sm: int = 2, threads: int = 256, stages: int = 2,
                     tiles_per_stage: int | None = None, split: str = "warp") -> list[ModeConfig]:
    """pipeN and ws with one run of tiles per block and blocks_per_sm blocks on every SM. The default shape is the
    best of `drvtma bench roof` on the H200: warp-owned tiles, 2 stages of one tile per consumer warp (8 x 4 KiB),
    2 blocks per SM (128 KiB in flight per SM)."""
    num_tiles = n // 1024
    per_block = -(-num_tiles // (sm_count * blocks_per_sm))
    per_stage = tiles_per_stage or (threads // 32 if split == "warp" else 4)
    return [ModeConfig(m, threads=threads, tiles_per_block=per_block, stages=stages, tiles_per_stage=per_stage,
                       split=split) for m in ("pipeN", "ws")]


# ------------------------------------------------------------------------------------------ results

@dataclass
class SweepRow:
    fma_iters: int
    timings: dict[str, Timing]


@dataclass
class SweepResult:
    config: SweepConfig
    rows: list[SweepRow] = field(default_factory=list)
    device: str = ""
    verified: bool = False
    copy_gbs: float | None = None  # cuMemcpyDtoD rate, read + written bytes, when the config asked for it

    def read_gbs(self, row: SweepRow, name: str) -> float:
        """Input bytes a mode read per second / 1e9."""
        return gb_per_s(self.config.n * 4, row.timings[name].median)

    @property
    def mode_names(self) -> list[str]:
        """Columns in the article's order, then the others in the order they ran."""
        names = [cast(str, m.name) for m in self.config.modes]  # ModeConfig.__post_init__ names every mode
        return sorted(names, key=lambda n: (ARTICLE_MODES.index(n) if n in ARTICLE_MODES else len(ARTICLE_MODES),
                                            names.index(n)))

    def speedup(self, row: SweepRow, name: str) -> float | None:
        if "sync" not in row.timings or name not in row.timings:
            return None
        return row.timings["sync"].median / row.timings[name].median


def _column_groups(result: SweepResult) -> list[list[str]]:
    names = result.mode_names
    return [g for g in ([m for m in names if m in ARTICLE_MODES], [m for m in names if m not in ARTICLE_MODES]) if g]


def csv_columns(result: SweepResult) -> list[str]:
    """The article's columns exactly (fma_iters, <mode>_ms..., speedup_<mode>... vs sync), then the same pair of
    groups for the other modes, then <mode>_p95_ms for every mode."""
    has_sync = "sync" in result.mode_names
    cols = ["fma_iters"]
    for group in _column_groups(result):
        cols += [f"{m}_ms" for m in group]
        if has_sync:
            cols += [f"speedup_{m}" for m in group if m != "sync"]
    return cols + [f"{m}_p95_ms" for m in result.mode_names]


def csv_text(result: SweepResult) -> str:
    has_sync = "sync" in result.mode_names
    rows = []
    for row in result.rows:
        values = [str(row.fma_iters)]
        for group in _column_groups(result):
            values += [f"{row.timings[m].median:.6f}" for m in group]
            if has_sync:
                values += [f"{result.speedup(row, m):.4f}" for m in group if m != "sync"]
        values += [f"{row.timings[m].p95:.6f}" for m in result.mode_names]
        rows.append(values)
    return figures.csv_text(csv_columns(result), rows)


def table_text(result: SweepResult, fmt: str = "simple") -> str:
    """The article's table: fma_iters, median ms per mode, speedups vs sync."""
    names = result.mode_names
    headers = ["fma_iters"] + [f"{m} ms" for m in names]
    has_sync = "sync" in names
    if has_sync:
        headers += [f"x {m}" for m in names if m != "sync"]
    body = []
    for row in result.rows:
        line = [row.fma_iters] + [f"{row.timings[m].median:.4f}" for m in names]
        if has_sync:
            line += [f"{result.speedup(row, m):.3f}" for m in names if m != "sync"]
        body.append(line)
    return figures.table_text(headers, body, fmt)


def markdown_text(result: SweepResult) -> str:
    c = result.config
    lines = [f"# drvtma sweep{f' --preset {c.preset}' if c.preset else ''}", ""]
    if result.device:
        lines.append(f"- device: {result.device}")
    lines += [f"- n = {c.n:,} fp32 ({c.n * 4 / 2**20:.0f} MiB), {c.n // 1024} tiles of 4 KiB",
              f"- median and p95 of {c.runs} launches after {c.warmups} warm-up(s), CUDA events around each launch"
              + ("; L2 flushed before each" if c.flush_l2 else "")
              + (f"; each behind a {c.head_start_ns // 1000} us stream hold, so the host's issue time is excluded"
                 if c.head_start_ns else "; no stream hold: the host's issue time is included, as in the article"),
              *([f"- cuMemcpyDtoD in the same run: {result.copy_gbs:.0f} GB/s (read + written bytes)"]
                if result.copy_gbs else []),
              "- verification: " + ("every mode, every fma_iters, per-tile checksums vs NumPy" if result.verified
                                    else "off"),
              "- modes:"]
    lines += [f"  - {m.describe()}: {MODES[m.mode].summary}" for m in c.modes]
    lines += ["", "Median ms per launch, and speedup = sync / mode:", "", table_text(result, "github"), "",
              "p95 ms:", ""]
    names = result.mode_names
    p95 = [[row.fma_iters] + [f"{row.timings[m].p95:.4f}" for m in names] for row in result.rows]
    lines += [figures.table_text(["fma_iters"] + names, p95), ""]
    measured = measurements_text(result)
    if measured:
        lines += ["Measured:", "", *[f"- {t}" for t in measured.splitlines()], ""]
    ref = reference_text(result, "github")
    if ref:
        lines += [ref, ""]
    speedups = [[row.fma_iters, *[f"{x:.3f}" for x in ARTICLE_5090_SPEEDUP[row.fma_iters]],
                 *[f"{result.speedup(row, m):.3f}" for m in ARTICLE_MODES[1:]]]
                for row in result.rows if row.fma_iters in ARTICLE_5090_SPEEDUP
                and all(m in row.timings for m in ARTICLE_MODES)]
    if speedups:
        lines += ["Speedup vs sync: the article's RTX 5090 table next to this run:", "",
                  figures.table_text(["fma_iters", "5090 bulk1d", "5090 tensor2d", "5090 pipe2", "bulk1d", "tensor2d",
                                      "pipe2"], speedups), ""]
    return "\n".join(lines)


def matches_reference(cfg: SweepConfig) -> bool:
    """True when the article's modes ran exactly as the reference program did (n, 256 threads, 64 tiles/block)."""
    article = [m for m in cfg.modes if m.mode in ARTICLE_MODES]
    return cfg.n == ARTICLE_N and bool(article) and all(m.threads == 256 and m.tiles_per_block == 64 for m in article)


def reference_rows(result: SweepResult) -> list[list]:
    """Per fma_iters in the reference: drvtma ms / the article program's ms on the H200, for each article mode."""
    rows = []
    for row in result.rows:
        ref = REFERENCE_H200_MS.get(row.fma_iters)
        if ref is None:
            continue
        line: list[float | None] = [row.fma_iters]
        for m, ref_ms in zip(ARTICLE_MODES, ref):
            line.append(row.timings[m].median / ref_ms if m in row.timings else None)
        rows.append(line)
    return rows


def reference_text(result: SweepResult, fmt: str = "simple") -> str:
    """drvtma's article modes against the article's program on the H200; ratios off by more than 10% marked *."""
    rows = reference_rows(result) if matches_reference(result.config) else []
    if not rows:
        return ""
    body, off = [], 0
    for line in rows:
        cells = [line[0]]
        for r in line[1:]:
            if r is None:
                cells.append("")
                continue
            flag = abs(r - 1) > REFERENCE_TOLERANCE
            off += flag
            cells.append(f"{r:.3f}{' *' if flag else ''}")
        body.append(cells)
    head = ("drvtma ms / ms of the article's own program run on the H200; "
            f"* = more than {REFERENCE_TOLERANCE:.0%} apart ({off} such cell(s)):")
    return head + "\n" + figures.table_text(["fma_iters", *ARTICLE_MODES], body, fmt)


def measurements_text(result: SweepResult) -> str:
    """What this run measured, stated as figures: the best ring mode's speed-up over sync at the lowest fma_iters,
    the best TMA mode's read rate there as a fraction of the device-to-device copy rate (when measured), and the
    modes more than 5% slower than sync at the highest fma_iters."""
    if len(result.rows) < 2 or "sync" not in result.mode_names:
        return ""
    low, high = result.rows[0], result.rows[-1]
    lines = []
    rings = [m for m in result.mode_names if m not in ARTICLE_MODES]
    # every mode ran at every fma_iters, sync included (checked above): no speedup here is None
    if rings:
        best = max(rings, key=lambda m: cast(float, result.speedup(low, m)))
        x = result.speedup(low, best)
        lines.append(f"fma_iters={low.fma_iters}: best ring mode {best} at {x:.2f}x sync")
    if result.copy_gbs:
        tma = [m for m in result.mode_names if m != "sync"]
        best = max(tma, key=lambda m: result.read_gbs(low, m))
        frac = result.read_gbs(low, best) / result.copy_gbs
        lines.append(f"fma_iters={low.fma_iters}: best TMA mode {best} reads {result.read_gbs(low, best):.0f} GB/s = "
                     f"{frac:.3f} of the cuMemcpyDtoD rate {result.copy_gbs:.0f} GB/s")
    slow = [f"{m} ({result.speedup(high, m):.3f}x)" for m in result.mode_names
            if m != "sync" and cast(float, result.speedup(high, m)) < 1 / 1.05]
    lines.append(f"fma_iters={high.fma_iters}: modes more than 5% slower than sync: {', '.join(slow) or 'none'}")
    return "\n".join(lines)


def plot_png(result: SweepResult, path) -> bool:
    """Speedup vs fma_iters as a PNG, when matplotlib is installed; False otherwise."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [m for m in result.mode_names if m != "sync"]
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [r.fma_iters for r in result.rows]
    for m in names:
        ys = [result.speedup(r, m) for r in result.rows]
        if None not in ys:
            ax.plot(xs, ys, marker="o", label=m)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("fma_iters")
    ax.set_ylabel("speedup vs sync")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------------------------ running

def run_sweep(cfg: SweepConfig, *, progress=sys.stderr) -> SweepResult:
    """Upload a random input, then verify and time every mode at every fma_iters (progress lines on `progress`)."""
    from ..runtime.driver import device_properties

    def say(text: str) -> None:
        if progress is not None:
            print(text, file=progress, flush=True)

    props = device_properties()
    say(f"sweep: {props.name}, n = {cfg.n:,}, {len(cfg.fma_list)} fma values x {len(cfg.modes)} modes")
    inp = make_input(cfg.n, cfg.seed)
    runner = B08Runner.upload(inp)
    try:
        if cfg.verify:
            say("sweep: computing the NumPy reference")
            assert runner.reference is not None  # B08Runner.upload attaches the input's reference
            runner.reference.prepare(cfg.fma_list)
            if any(m.spec.tiling == "box" for m in cfg.modes):
                runner.reference.prepare(cfg.fma_list, tiling="box", tiles_x=runner.tiles_x)
        result = SweepResult(cfg, device=f"{props.name} ({props.sm_count} SMs, driver {props.driver_version_str})",
                             verified=cfg.verify)
        if cfg.measure_copy:
            result.copy_gbs = copy_rate_gbs(cfg.n * 4, runs=cfg.runs, warmups=cfg.warmups)
            say(f"sweep: cuMemcpyDtoD of {cfg.n * 4 / 2**20:.0f} MiB: {result.copy_gbs:.0f} GB/s (read + written)")
        flush = runner.flush_l2 if cfg.flush_l2 else None
        total = len(cfg.fma_list) * len(cfg.modes)
        done = 0
        for fma in cfg.fma_list:
            timings: dict[str, Timing] = {}
            raws: dict[str, np.ndarray] = {}
            for mc in cfg.modes:
                name = cast(str, mc.name)  # ModeConfig.__post_init__ names every mode
                if cfg.verify:
                    raws[name] = runner.run_checked(mc, fma)
                timings[name] = time_launches(lambda mc=mc: runner.launch(mc, fma), runs=cfg.runs,
                                              warmups=cfg.warmups, flush=flush, head_start_ns=cfg.head_start_ns)
                runner.check_status(mc, "timed launches")
                done += 1
                say(f"[{done}/{total}] fma_iters={fma} {name}: median {timings[name].median:.4f} ms, "
                    f"p95 {timings[name].p95:.4f} ms" + (", verified" if cfg.verify else ""))
            if cfg.verify:
                check_same_total(raws)
            result.rows.append(SweepRow(fma, timings))
        return result
    finally:
        runner.close()


def write_outputs(result: SweepResult, out_dir, stem: str = "sweep") -> list:
    """CSV and Markdown (figures.write_report) and, with matplotlib, PNG under out_dir; returns the paths written."""
    paths = list(figures.write_report(out_dir, stem, csv_text(result), markdown=markdown_text(result)))
    png = paths[0].with_suffix(".png")
    if plot_png(result, png):
        paths.append(png)
    return paths
