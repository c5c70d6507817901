"""`drvtma check gemm` and `drvtma check conv`: a GEMM or convolution configuration against every rule of
`drvtma.gemm.rules`, each listed as holding, broken (with its fix) or skipped (`drvtma.gemm.report.explain`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from ..errors import DrvtmaError
from ..gemm.choice import L2_BYTES
from ..gemm.config import IN_DTYPES, L2_EVICTS, L2_PROMOTIONS, OUT_DTYPES, SWIZZLES, GemmConfig
from ..gemm.conv import ConvShape
from ..gemm.report import GemmReport, explain
from ..gemm.rules import MMA_KINDS
from .parser import Parser, count, int_at_least, natural

SM_COUNT = 132  # --for-problem's default: the SMs of an H100 SXM or an H200

# The help of each GemmConfig field; its values are passed to the rules as given, so a value outside them is a
# broken rule with its fix (exit 1), not a usage error.
FIELD_HELP = {
    "dtype": f"input type: {', '.join(IN_DTYPES)} (or bf16, f16, e4m3, e5m2)",
    "out_dtype": f"C's type: {', '.join(OUT_DTYPES)}",
    "bm": "tile rows (M)", "bn": "tile columns (N)", "bk": "tile depth in elements (default: one 128-byte panel)",
    "stages": "ring depth", "consumers": "consumer warpgroups (1 or 2)", "swizzle": ", ".join(SWIZZLES),
    "setmaxnreg": "move registers from the producer to the consumers", "producer_regs": "the producer's registers",
    "consumer_regs": "each consumer's registers", "persistent": "one CTA per SM walking tiles",
    "group_m": "tile rows walked together", "inflight": "wgmma groups left running (0 or 1)",
    "cluster_m": "2: CTA pairs along M sharing B", "cluster_n": "2: CTA pairs along N sharing A",
    "mma": " or ".join(MMA_KINDS), "streamk": "split the last wave's tiles over every SM",
    "pingpong": "the consumers take whole tiles in turn", "swap_ab": "compute C^T = B . A^T (a small M becomes N)",
    "prefetch_maps": "prefetch the tensor maps before the first load",
    "l2_promotion": ", ".join(L2_PROMOTIONS), "epilogue_buffers": "staging buffers per consumer",
    "stmatrix": "write the epilogue's staging with stmatrix (16-bit C)",
    "evict_a": f"A's L2 priority: {', '.join(L2_EVICTS)}", "evict_b": f"B's L2 priority: {', '.join(L2_EVICTS)}",
}

GEMM_EXAMPLES = """examples:
  drvtma check gemm --m 4096 --n 4096 --k 4096 --dtype bf16
  drvtma check gemm --m 64 --n 4096 --k 4096 --for-problem
               (the configuration `GemmConfig.for_problem` runs this skinny M with: swapped A and B, a 64 x 64 tile)
  drvtma check gemm --m 64 --n 4096 --k 4096 --swap-ab --bm 64 --bn 64 --bk 256 --consumers 1 --stages 3
  drvtma check gemm --dtype e4m3 --stages 5     (smem_capacity broken: the rule and its fix, exit 1)
  drvtma check gemm --m 4096 --n 4096 --k 100   (k_alignment broken: K rows of 200 B, exit 1)

exit status: 0 every rule holds, 1 rules broken (listed, each with its fix), 2 usage"""

CONV_EXAMPLES = """The configuration is the shape's default (what Conv2d runs); the fields given replace its values.

examples:
  drvtma check conv --n 32 --h 56 --w 56 --c 64 --k 64 --r 3 --s 3 --pad 1
  drvtma check conv --n 32 --h 56 --w 56 --c 64 --k 256 --r 1 --s 1 --dtype f16 --stages 3
  drvtma check conv --n 8 --h 28 --w 28 --c 48 --k 64 --r 3 --s 3 --pad 1
               (conv_channels broken: a k-block would straddle two filter taps, exit 1)

exit status: 0 every rule holds, 1 rules broken (listed, each with its fix), 2 usage"""


def _whole(text: str) -> int:
    """Any whole number (the rules judge its range)."""
    try:
        return int(text.strip().replace("_", ""), 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a whole number, got {text!r}") from None


def _bk(text: str) -> int | None:
    return None if text.strip().lower() == "none" else _whole(text)


def add_config_options(p: Parser) -> None:
    """One option per GemmConfig field (`--cluster-m`, `--swap-ab` / `--no-swap-ab`, ...); unset: the default."""
    group = p.add_argument_group("configuration (GemmConfig fields; default: GemmConfig's own)")
    for f in fields(GemmConfig):
        flag, kind = "--" + f.name.replace("_", "-"), str(f.type)
        if kind.startswith("bool"):
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=FIELD_HELP[f.name])
        elif kind.startswith("int"):
            group.add_argument(flag, type=_bk if f.name == "bk" else _whole, help=FIELD_HELP[f.name])
        else:
            group.add_argument(flag, help=FIELD_HELP[f.name])


def config_fields(args) -> dict:
    """The GemmConfig fields given on the command line."""
    return {f.name: getattr(args, f.name) for f in fields(GemmConfig) if getattr(args, f.name) is not None}


def _print(report: GemmReport, prog: str) -> int:
    print(report)
    if report.ok:
        return 0
    names = report.broken_names
    print(f"{prog}: {len(names)} rule(s) broken: {', '.join(names)}", file=sys.stderr)
    return 1


def check_gemm_command(argv: list[str]) -> int:
    """0: every rule holds; 1: rules broken; 2: usage."""
    p = Parser(prog="drvtma check gemm", description="A GEMM configuration (and, with --m --n --k, the problem it "
               "runs) against every rule of the kernel's tables, each with ok, BROKEN and its fix, or skipped. No "
               "GPU.", epilog=GEMM_EXAMPLES)
    extent = int_at_least(1, high=2**31 - 1)
    problem = p.add_argument_group("problem (all three, or none: C [M, N] = A [M, K] . B [N, K]^T)")
    for name in "mnk":
        problem.add_argument(f"--{name}", type=extent, help=name.upper())
    problem.add_argument("--for-problem", action="store_true", help="check the configuration for_problem picks "
                         "for this problem, starting from the one given (drvtma.gemm.choice)")
    problem.add_argument("--sm-count", type=count, default=SM_COUNT, help=f"SMs for --for-problem (default "
                         f"{SM_COUNT}: H100 SXM, H200)")
    problem.add_argument("--l2-mib", type=count, default=L2_BYTES >> 20, help="the GPU's L2 for --for-problem in "
                         f"MiB (default {L2_BYTES >> 20}: H200; an H100 has 50)")
    add_config_options(p)
    args = p.parse_args(argv)
    given = [args.m, args.n, args.k]
    if any(v is not None for v in given) and None in given:
        missing = ", ".join(f"--{n}" for n, v in zip("mnk", given) if v is None)
        p.error(f"{missing}: the problem needs --m, --n and --k together")
    if args.for_problem and args.m is None:
        p.error("--for-problem: give the problem's --m, --n and --k")
    try:
        config = GemmConfig(**config_fields(args))
        if args.for_problem and not config.errors():  # a broken one is reported as given: the choice reads its sizes
            config = config.for_problem(args.m, args.n, args.k, args.sm_count, args.l2_mib << 20)
        report = explain(config, None if args.m is None else (args.m, args.n, args.k))
    except DrvtmaError as exc:  # no configuration at all (the options' types keep this out)
        p.error(str(exc))
    return _print(report, p.prog)


def check_conv_command(argv: list[str]) -> int:
    """0: every rule holds; 1: rules broken; 2: usage."""
    p = Parser(prog="drvtma check conv", description="A forward convolution (NHWC input, KRSC filter) on the GEMM "
               "kernel against every rule: the configuration's, the convolution's (the im2col map, the k-blocks) "
               "and its implicit GEMM's. No GPU.", epilog=CONV_EXAMPLES)
    shape = p.add_argument_group("convolution (ConvShape)")
    for name, what in (("n", "images"), ("h", "input height"), ("w", "input width"), ("c", "input channels"),
                       ("k", "output channels"), ("r", "filter height"), ("s", "filter width")):
        shape.add_argument(f"--{name}", type=count, required=True, help=what)
    shape.add_argument("--stride", type=count, default=1, help="on H and W (default 1)")
    shape.add_argument("--pad", type=natural, default=0, help="on each side (default 0)")
    shape.add_argument("--dilation", type=count, default=1, help="default 1")
    add_config_options(p)
    args = p.parse_args(argv)
    try:
        conv = ConvShape(args.n, args.h, args.w, args.c, args.k, args.r, args.s, args.stride, args.pad, args.dilation)
        config = conv.default_config().with_(**config_fields(args))
        report = explain(config, conv)
    except DrvtmaError as exc:  # no shape at all (the options' types keep this out)
        p.error(str(exc))
    return _print(report, p.prog)
