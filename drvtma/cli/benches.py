"""`drvtma bench multicast`, `bench descriptors`, `bench gemm` and `bench conv`: their arguments, checked before the
GPU is touched; the work is in drvtma.cluster.bench, drvtma.tma.maps.descriptor_bench, drvtma.gemm.bench and
drvtma.gemm.conv_bench."""

from __future__ import annotations

import argparse
import sys

from ..runtime.driver import smem_per_block_optin
from .parser import Parser, count, count_list, items, list_of, natural, out_dir


def multicast_command(argv: list[str]) -> int:
    from ..cluster.bench import DEFAULT_KS, DEFAULT_STAGES, DEFAULT_TILE_KIB, ROW_BYTES, run_multicast_bench
    from ..runtime.figures import write_report

    p = Parser(prog="drvtma bench multicast",
               description="k CTAs of a cluster reading the same tiles: one multicast per slice vs each CTA loading "
                           "its own copy; every run verified, then timed.")
    p.add_argument("--ks", type=count_list, default=DEFAULT_KS, help="CTAs per cluster: 1, 2, 4, 8 (default 1,2,4,8)")
    p.add_argument("--tile-kib", type=count_list, default=DEFAULT_TILE_KIB, help="tile sizes in KiB (default 4,16,32)")
    p.add_argument("--stages", type=count, default=DEFAULT_STAGES, help="ring depth 1..8 (default 2; smem = stages "
                   "x tile)")
    p.add_argument("--runs", type=count, default=7)
    p.add_argument("--warmups", type=natural, default=2)
    p.add_argument("--out", type=out_dir, help="directory for multicast.csv and multicast.md")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if any(k not in (1, 2, 4, 8) for k in args.ks):
        p.error(f"--ks: wants cluster sizes from 1, 2, 4, 8 (portable clusters), got {args.ks}")
    if args.stages > 8:
        p.error(f"--stages: wants 1..8, got {args.stages}")
    for tile in args.tile_kib:
        if (tile * 1024 // ROW_BYTES) % max(args.ks) or tile * 1024 % ROW_BYTES:
            p.error(f"--tile-kib: {tile} KiB tiles do not split into {max(args.ks)} slices of {ROW_BYTES}-byte rows; "
                    "give whole multiples of 2 KiB")
        limit = smem_per_block_optin()  # the device's own figure (the Hopper row's without a GPU)
        if args.stages * tile * 1024 + 1024 > limit:
            p.error(f"--tile-kib: {args.stages} stages of {tile} KiB exceed a block's {limit >> 10} KiB of "
                    "shared memory; give smaller tiles or fewer --stages")
    result = run_multicast_bench(ks=args.ks, tile_kib=args.tile_kib, stages=args.stages, runs=args.runs,
                                 warmups=args.warmups, progress=None if args.quiet else sys.stderr)
    print(result.text())
    if args.out:
        write_report(args.out, "multicast", result.csv_text(), title="drvtma bench multicast", text=result.text())
    return 0


def descriptors_command(argv: list[str]) -> int:
    from ..runtime.figures import record_figure
    from ..tma.maps import descriptor_bench

    p = Parser(prog="drvtma bench descriptors", description=descriptor_bench.__doc__.splitlines()[0])
    p.add_argument("--loads", type=count, default=16, help="dependent loads per CTA (the slope's far end), >= 2")
    p.add_argument("--runs", type=count, default=20)
    p.add_argument("--launches", type=count, default=300, help="launches per host-side loop")
    args = p.parse_args(argv)
    if args.loads < 2:
        p.error(f"--loads: wants at least 2 (the slope runs from 1 load to --loads), got {args.loads}")
    result = descriptor_bench.run_descriptor_bench(loads=args.loads, runs=args.runs, launches=args.launches)
    print(result.text())
    record_figure(result.figures(), echo=False)
    return 0


def _shape(text: str) -> tuple[int, int, int]:
    """MxNxK, each a positive whole number."""
    shape = tuple(count(v) for v in text.lower().split("x"))
    if len(shape) != 3:
        raise ValueError(text)
    return shape


SHAPES = list_of(_shape, "MxNxK[,MxNxK...] with positive M, N and K")


def _one_shape(text: str) -> tuple[int, int, int]:
    try:
        (shape,) = SHAPES(text)
        return shape
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"wants one MxNxK with positive M, N and K, got {text!r}") from None


def _in_dtype(text: str) -> str:
    from ..gemm.config import IN_DTYPES, dtype_name

    name = dtype_name(text)
    if name not in IN_DTYPES:
        raise ValueError(text)
    return name


def gemm_command(argv: list[str]) -> int:
    """`drvtma bench gemm [--dtypes bfloat16,float8_e4m3fn] [--shapes 4096x4096x4096,...] [--out DIR]`."""
    from ..errors import DrvtmaError
    from ..gemm import bench
    from ..gemm.config import IN_DTYPES, GemmConfig

    p = Parser(prog="drvtma bench gemm", description=bench.__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", type=list_of(_in_dtype, f"some of {', '.join(IN_DTYPES)}"),
                   default=",".join(bench.DTYPES), help=f"comma-separated input types: {', '.join(IN_DTYPES)}")
    p.add_argument("--shapes", type=SHAPES, default=",".join("x".join(map(str, s)) for s in bench.SHAPES),
                   help="MxNxK,...")
    p.add_argument("--stages", type=count, help="ring depth (default: the config's)")
    p.add_argument("--swizzle", choices=("none", "32B", "64B", "128B"))
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="any GemmConfig field, e.g. --set cluster_m=2 --set group_m=16 (repeatable)")
    p.add_argument("--versus", action="append", default=[], metavar="FIELD=VALUE",
                   help="also time each point's configuration with this field changed, in the same rounds: its "
                        "speed-up and its own ratio to cuBLAS (repeatable: one variant with every change)")
    p.add_argument("--runs", type=count, default=20, help="timed runs per side, spread over the ABBA pairs")
    p.add_argument("--pairs", type=count, default=bench.PAIRS,
                   help="ABBA pairs per point; its ratio is the median of theirs (at least one run per half)")
    p.add_argument("--warmups", type=natural, default=3)
    p.add_argument("--no-flush", action="store_true", help="keep L2 warm between runs")
    p.add_argument("--backend", choices=("lt", "torch"), help="cuBLAS through nvmath-python (lt) or torch")
    p.add_argument("--claims", action="store_true",
                   help="sweep the async tensor-core article's GEMM claims instead (claims.CLAIMS: each one GemmConfig field) at --claim-shape")
    p.add_argument("--claim-shape", type=_one_shape, default="8192x8192x8192", help="MxNxK of the claim sweep")
    p.add_argument("--only-claims", type=items, default=[],
                   help="comma-separated substrings: sweep only the claims whose text has one")
    p.add_argument("--profile", action="store_true",
                   help="instead of timing: where the cycles go (drvtma.gemm.profile: clock, issue rate, stalls, tail)")
    p.add_argument("--out", type=out_dir, help="directory for gemm.csv and gemm.md")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    try:  # one configuration for every mode (the claim sweep starts from cfg too)
        changes = {}
        for item in args.set:
            try:
                changes.update(bench.config_changes([item]))
            except ValueError as exc:
                raise ValueError(exc if "--set" in str(exc) else f"--set {item!r}: {exc}") from None
        args.versus_changes = {}
        for item in args.versus:
            try:
                args.versus_changes.update(bench.config_changes([item]))
            except ValueError as exc:
                raise ValueError(f"--versus {item!r}: {str(exc).replace('--set ', '')}") from None
        if args.versus and (args.claims or args.profile):
            raise ValueError("--versus times a variant beside the bench's points: not with --claims or --profile")
        given = {"stages": args.stages, "swizzle": args.swizzle}
        cfg = GemmConfig().with_(**{k: v for k, v in given.items() if v is not None}, **changes)
        for d in args.dtypes:
            cfg.with_(dtype=d)
    except (DrvtmaError, ValueError, TypeError) as exc:
        p.error(str(exc))
    return bench.gemm_command(args, argv, cfg, args.shapes, args.claim_shape)


def conv_command(argv: list[str]) -> int:
    """`drvtma bench conv [--batch 32] [--runs 10] [--out DIR]`: exit 1 when a layer's output is off cuDNN's."""
    from ..gemm import conv_bench
    from ..runtime.figures import csv_text, table_text, write_report

    p = Parser(prog="drvtma bench conv", description=conv_bench.__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=count, default=32, help="images per layer (default 32, ResNet-50's layers)")
    p.add_argument("--runs", type=count, default=10)
    p.add_argument("--warmups", type=natural, default=3)
    p.add_argument("--out", type=out_dir, help="directory for conv.csv and conv.md")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # cuDNN's conv2d is the comparison
        p.error("needs torch (pip install torch): cuDNN's conv2d, through torch, is what it compares with")
    from dataclasses import replace

    rows = conv_bench.run_conv_bench([replace(s, n=args.batch) for s in conv_bench.LAYERS], runs=args.runs,
                                     warmups=args.warmups, progress=None if args.quiet else sys.stderr)
    body = conv_bench.table_rows(rows)
    text = table_text(conv_bench.HEADER, body, "simple")
    print(text)
    if args.out:
        write_report(args.out, "conv", csv_text(conv_bench.HEADER, body), title="drvtma bench conv", text=text)
    return 0 if all(r.worst <= 1.0 for r in rows) else 1
