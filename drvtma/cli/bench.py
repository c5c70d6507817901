"""`drvtma sweep`, `drvtma bench roof` and `drvtma bench floors`: argument parsing only; the work is in
drvtma.b08.sweep, drvtma.b08.roof and drvtma.b08.floors."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from ..b08.modes import ALL_MODES, MAX_N, TILE_ELEMS, ModeConfig, check_problem_size
from ..b08.roof import ROOF_BLOCKS_PER_SM, ROOF_SPLITS, ROOF_STAGES, ROOF_TILES_PER_STAGE
from ..b08.sweep import (
    ARTICLE_FMA,
    SweepConfig,
    csv_text,
    measurements_text,
    preset,
    reference_text,
    run_sweep,
    table_text,
    write_outputs,
)
from ..errors import DrvtmaError
from ..runtime.figures import write_report
from .parser import (
    Entry,
    Parser,
    choice_list,
    count,
    count_list,
    dispatch,
    listing,
    natural,
    natural_list,
    out_dir,
    out_file,
)

_mode_list = choice_list(ALL_MODES, f"modes from {', '.join(ALL_MODES)}")
_split_list = choice_list(("thread", "warp"), "thread, warp or thread,warp")


def _elements(text: str) -> int:
    n = count(text)
    try:
        check_problem_size(n)
    except DrvtmaError as exc:
        raise argparse.ArgumentTypeError(f"wants a positive multiple of {TILE_ELEMS} (4 KiB fp32 tiles) up to "
                                         f"{MAX_N}, got {text!r} ({exc})") from None
    return n


def _roof_bytes(text: str) -> int:
    nbytes = count(text)
    if nbytes < 4 * TILE_ELEMS or nbytes // 4 > MAX_N:
        raise argparse.ArgumentTypeError(f"wants {4 * TILE_ELEMS} .. {4 * MAX_N} bytes (at least one 4 KiB tile), "
                                         f"got {text!r}")
    return nbytes


def _checked_config(p: Parser, args) -> None:
    """Build the configuration once for a typical device, so a bad combination is a usage error before the GPU."""
    try:
        config_from_args(args)
    except (DrvtmaError, ValueError) as exc:
        p.error(str(exc))


def _add_config_options(p: argparse.ArgumentParser) -> None:
    """The options that shape a sweep configuration (shared by `drvtma sweep` and `drvtma bench floors`)."""
    p.add_argument("--preset", choices=("article", "hbm"), default="article",
                   help="article: n=4,194,304, 64 tiles/block, 256 threads, fma 1..256, 7 runs, 2 warm-ups; "
                        "hbm: 1 GiB over all SMs (default: article)")
    p.add_argument("--n", type=_elements, help="fp32 elements (a multiple of 1024)")
    p.add_argument("--tiles-per-block", type=count, help="tiles per block of the article's modes")
    p.add_argument("--threads", type=count, help="(consumer) threads per block of every mode: a multiple of 32")
    p.add_argument("--fma", type=natural_list,
                   help=f"comma-separated fma_iters (default {','.join(map(str, ARTICLE_FMA))})")
    p.add_argument("--runs", type=count, help="timed launches per point")
    p.add_argument("--warmups", type=natural, help="untimed launches before them")
    p.add_argument("--hold-us", type=natural,
                   help="stream hold before each timed launch, so only GPU time is measured (default 100; 0 times as "
                        "the article does, the host's issue time included)")
    p.add_argument("--modes", type=_mode_list, help=f"comma-separated subset of {','.join(ALL_MODES)}")
    p.add_argument("--stages", type=count, help="ring depth of pipeN and ws")
    p.add_argument("--tiles-per-stage", type=count, help="4 KiB tiles per ring stage of pipeN and ws")
    p.add_argument("--ring-tiles-per-block", type=count, help="tiles per block of pipeN and ws")
    p.add_argument("--ring-threads", type=count, help="consumer threads per block of pipeN and ws (after --threads)")
    p.add_argument("--split", choices=("thread", "warp"),
                   help="pipeN and ws: every thread takes elements of every tile, or a warp owns whole tiles")
    p.add_argument("--seed", type=natural, help="input seed")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def sweep_parser() -> Parser:
    p = Parser(
        prog="drvtma sweep",
        description="Verify and time the B-08 modes over fma_iters (B-08: a Chinese blog chapter on Hopper TMA, "
                    "\"Hopper TMA: from single-thread bulk copy to the throughput wall\", whose program times sync "
                    "loads, bulk1d, tensor2d and pipe2 on an RTX 5090); print the article's table (speedup = sync / "
                    "mode), optionally write CSV (the article's column names), Markdown and a PNG plot.")
    _add_config_options(p)
    p.add_argument("--flush-l2", action=argparse.BooleanOptionalAction, default=None,
                   help="write a buffer of twice the L2 size before each timed launch")
    p.add_argument("--no-verify", action="store_true", help="skip the checked launch (timing only)")
    p.add_argument("--out", type=out_dir, help="directory for sweep.csv, sweep.md (and sweep.png with matplotlib)")
    p.add_argument("--csv", type=out_file, help="also write the CSV to this file")
    return p


def floors_parser() -> Parser:
    p = Parser(
        prog="drvtma bench floors",
        description="For each ring mode of a sweep configuration: the launch floor, the copies alone, the compute "
                    "alone, the full ring and sync, so the slower half shows what bounds the ring and how much any "
                    "ring of that shape can gain over sync. Takes the sweep's options; fma_iters default 1,256.")
    _add_config_options(p)
    p.add_argument("--out", type=out_dir, help="directory for floors.csv and floors.md")
    return p


def _given(**options) -> dict:
    """The options the user gave (those not None)."""
    return {k: v for k, v in options.items() if v is not None}


def config_from_args(args: argparse.Namespace, *, sm_count: int = 132) -> SweepConfig:
    """The preset, with every option the user gave applied on top."""
    cfg = preset(args.preset, sm_count=sm_count, n=args.n)
    modes = list(cfg.modes)
    if args.modes:
        by_mode = {m.mode: m for m in modes}
        modes = [by_mode.get(m) or ModeConfig(m) for m in args.modes]
    ring = _given(stages=args.stages, tiles_per_stage=args.tiles_per_stage, tiles_per_block=args.ring_tiles_per_block,
                  threads=args.ring_threads, split=args.split)  # pipeN and ws; --ring-threads after --threads
    changed = []
    for m in modes:
        kw = _given(threads=args.threads)
        kw.update(ring if m.spec.ring else _given(tiles_per_block=args.tiles_per_block))
        changed.append(m.with_(**kw) if kw else m)
    overrides = _given(fma_list=args.fma, runs=args.runs, warmups=args.warmups,
                       flush_l2=getattr(args, "flush_l2", None), seed=args.seed)
    if getattr(args, "no_verify", False):
        overrides["verify"] = False
    if args.hold_us is not None:
        overrides["head_start_ns"] = args.hold_us * 1000
    return replace(cfg, modes=tuple(changed), **overrides)


def sweep_command(argv: list[str]) -> int:
    parser = sweep_parser()
    args = parser.parse_args(argv)
    _checked_config(parser, args)
    from ..runtime.driver import device_properties

    cfg = config_from_args(args, sm_count=device_properties().sm_count)
    result = run_sweep(cfg, progress=None if args.quiet else sys.stderr)
    print(table_text(result))
    for extra in (measurements_text(result), reference_text(result)):  # the reference only for its own configuration
        if extra:
            print("\n" + extra)
    if args.out:
        for path in write_outputs(result, args.out):
            print(f"wrote {path}", file=sys.stderr)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(csv_text(result))
    return 0


def roof_parser() -> Parser:
    p = Parser(
        prog="drvtma bench roof",
        description="Device-to-device copy rate (read + written bytes), a plain vectorized read kernel and the TMA "
                    "read modes at several stage sizes, stage counts and blocks per SM, as fractions of the copy "
                    "rate; every TMA run verified.")
    p.add_argument("--bytes", type=_roof_bytes, default=1 << 30, help="bytes read per launch (default 1 GiB)")
    p.add_argument("--runs", type=count, default=5)
    p.add_argument("--warmups", type=natural, default=2)
    p.add_argument("--threads", type=count, default=256, help="consumer threads per block of the TMA modes")
    p.add_argument("--stages", type=count_list, default=ROOF_STAGES)
    p.add_argument("--tiles-per-stage", type=count_list, default=ROOF_TILES_PER_STAGE)
    p.add_argument("--blocks-per-sm", type=count_list, default=ROOF_BLOCKS_PER_SM)
    p.add_argument("--split", type=_split_list, default=ROOF_SPLITS,
                   help="pipeN and ws: comma-separated splits to try: thread (every thread takes elements of every "
                        "tile), warp (a warp owns whole tiles); default both")
    p.add_argument("--no-article-modes", action="store_true", help="skip bulk1d, tensor2d and pipe2")
    p.add_argument("--out", type=out_dir, help="directory for roof.csv and roof.md")
    p.add_argument("--quiet", action="store_true")
    return p


def roof_command(argv: list[str]) -> int:
    parser = roof_parser()
    args = parser.parse_args(argv)
    from ..b08.roof import ring_configs, run_roof

    try:  # the configurations for a typical device, so a bad thread count is a usage error before the GPU
        for m in ("bulk1d", "tensor2d", "pipe2"):
            ModeConfig(m, threads=args.threads, tiles_per_block=64)
        ring_configs(args.bytes // 4 // TILE_ELEMS, 132, threads=args.threads, stages=args.stages,
                     tiles_per_stage=args.tiles_per_stage, blocks_per_sm=args.blocks_per_sm, splits=args.split)
    except (DrvtmaError, ValueError) as exc:
        parser.error(f"--threads/--stages/--tiles-per-stage: {exc}")

    result = run_roof(nbytes=args.bytes, runs=args.runs, warmups=args.warmups, threads=args.threads,
                      stages=args.stages, tiles_per_stage=args.tiles_per_stage, blocks_per_sm=args.blocks_per_sm,
                      splits=args.split, article_modes=not args.no_article_modes,
                      progress=None if args.quiet else sys.stderr)
    print(result.text())
    if args.out:
        write_report(args.out, "roof", result.csv_text(), title="drvtma bench roof", text=result.text())
    return 0


def floors_command(argv: list[str]) -> int:
    parser = floors_parser()
    args = parser.parse_args(argv)
    from ..b08.floors import run_floors
    from ..runtime.driver import device_properties

    if args.fma is None:
        args.fma = (1, 256)
    _checked_config(parser, args)
    cfg = config_from_args(args, sm_count=device_properties().sm_count)
    result = run_floors(cfg, progress=None if args.quiet else sys.stderr)
    print(result.text())
    if args.out:
        shown = [a for i, a in enumerate(argv)
                 if a != "--out" and not a.startswith("--out=") and (i == 0 or argv[i - 1] != "--out")]
        write_report(args.out, "floors", result.csv_text(), title=" ".join(["drvtma bench floors", *shown]),
                     text=result.text())
    return 0


# benchmark -> what runs it (imported when run) and its one-line help
BENCHMARKS = {
    "roof": Entry("drvtma.cli.bench", "roof_command", "the TMA read modes against the device-to-device copy rate"),
    "floors": Entry("drvtma.cli.bench", "floors_command",
                    "what bounds each ring mode: its copies alone, its compute alone, the launch"),
    "multicast": Entry("drvtma.cli.benches", "multicast_command",
                       "k CTAs of a cluster reading the same tiles: one multicast vs each its own copy"),
    "descriptors": Entry("drvtma.cli.benches", "descriptors_command",
                         "a load through by-value, global, prefetched and device-edited maps; re-encode vs reuse"),
    "gemm": Entry("drvtma.cli.benches", "gemm_command",
                  "the drvtma GEMM against cuBLAS in one process: TFLOP/s and the ratio per dtype and shape"),
    "conv": Entry("drvtma.cli.benches", "conv_command",
                  "the implicit-GEMM convolution (im2col maps) against cuDNN on ResNet-50 layers"),
}


def _bench_usage() -> str:
    return "\n".join([f"usage: drvtma bench {{{','.join(BENCHMARKS)}}} [options]   (drvtma bench NAME --help)",
                      *listing(BENCHMARKS, 12)])


def bench_command(argv: list[str]) -> int:
    return dispatch("drvtma bench", "benchmark", BENCHMARKS, argv, _bench_usage)
