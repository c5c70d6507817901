"""`drvtma wgmma`: the descriptors that read a TMA tile for each k-step, with the rules checked; or explain one."""

from __future__ import annotations

import argparse
import sys

from ..errors import WgmmaError
from ..tma.tiled.spec import Swizzle
from ..wgmma import rules
from ..wgmma.descriptor import SmemDescriptor, from_tma_swizzle
from ..wgmma.dtypes import ALL_TYPES, M, wgmma_type
from ..wgmma.layout import descriptor_for, spec_for_tile, tile_layout
from ..wgmma.probe import PROBE_NS
from .parser import Parser, address, natural

_SWIZZLES = {"none": Swizzle.NONE, "32b": Swizzle.B32, "64b": Swizzle.B64, "128b": Swizzle.B128}
_TYPES = ", ".join(t.name for t in ALL_TYPES)


def _dtype(text: str):
    try:
        return wgmma_type(text)
    except WgmmaError:
        raise argparse.ArgumentTypeError(f"wants one of {_TYPES}, got {text!r}") from None


def _swizzle(text: str) -> Swizzle:
    key = text.lower().replace("swizzle_", "")
    if key not in _SWIZZLES:
        raise argparse.ArgumentTypeError(f"wants none, 32B, 64B or 128B, got {text!r}")
    return _SWIZZLES[key]


def _tile(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    try:
        mn, k = (int(v) for v in parts)
    except ValueError:
        mn = k = 0
    if mn < 1 or k < 1:
        raise argparse.ArgumentTypeError(f"wants MNxK in elements (two positive numbers, e.g. 128x64), got {text!r}")
    return mn, k


def _parser() -> Parser:
    p = Parser(
        prog="drvtma wgmma", description="Print the wgmma shared-memory descriptors that read a tile TMA loaded "
        "(one per 32-byte k-step), or explain a 64-bit descriptor. Exit status 1 when a rule is broken.",
        epilog="examples:\n  drvtma wgmma --dtype bf16 --operand B --major K --swizzle 128B --tile 128x64\n"
               "  drvtma wgmma --dtype e4m3 --operand A --tile 64x128 --smem 0x400\n"
               "  drvtma wgmma --decode 0x4000004002000010")
    p.add_argument("--decode", type=address, help="explain this 64-bit descriptor value (decimal or 0x hex)")
    p.add_argument("--dtype", default="bf16", type=_dtype, help=_TYPES)
    p.add_argument("--operand", default="B", choices=("A", "B"))
    p.add_argument("--major", default="K", choices=("K", "MN"))
    p.add_argument("--swizzle", default="128B", type=_swizzle, help="the tensor map's swizzle: none, 32B, 64B, 128B")
    p.add_argument("--tile", default="128x64", type=_tile, help="MNxK in elements (A: MN = 64 per instruction)")
    p.add_argument("--smem", type=natural, default=0, help="shared address of the tile (>= 0)")
    return p


def _decode(value: int) -> int:
    d = SmemDescriptor.decode(value)
    print(d.describe())
    print(f"  start 0x{d.start:05x}: bits 0-13 = {d.start >> 4}")
    print(f"  LBO {d.lbo} B: bits 16-29 = {d.lbo >> 4}; SBO {d.sbo} B: bits 32-45 = {d.sbo >> 4}")
    print(f"  base offset {d.base_offset} (bits 49-51); swizzle code {int(d.swizzle)} (bits 62-63)")
    try:
        rules.check_descriptor(d)
        print("  rules: start_alignment, field_range, field_alignment, base_offset_use, swizzle_alignment: ok")
    except WgmmaError as exc:
        print(f"  rules: {exc}")
        print(f"drvtma wgmma: rule broken: {exc.rule}", file=sys.stderr)
        return 1
    return 0


def wgmma_command(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.decode is not None:
        return _decode(args.decode)
    t, tma_swizzle, (mn, k) = args.dtype, args.swizzle, args.tile
    rules.check_operands(t, major_a=args.major if args.operand == "A" else "K",
                         major_b=args.major if args.operand == "B" else "K")
    n = M if args.operand == "A" else mn
    if args.operand == "B":
        rules.check_shape(t, n)
    spec = spec_for_tile(t, args.major, tma_swizzle, mn, k)
    lay = tile_layout(spec, args.major, dtype=t)
    descs = descriptor_for(spec, args.smem, args.operand, args.major, dtype=t, n=n)
    print(f"{t.name} operand {args.operand}, {args.major}-major, tile {mn} x {k} (MN x K), TMA swizzle "
          f"{tma_swizzle.name} = wgmma code {int(from_tma_swizzle(tma_swizzle))}")
    print(f"tensor map: shape {spec.shape}, strides {spec.strides_bytes} B, box {spec.box} (NumPy order); "
          f"{spec.smem_bytes} B of shared memory at 0x{args.smem:x}")
    print(f"layout: {lay.panels} {'K panel(s)' if args.major == 'K' else 'MN atom(s)'} of {lay.panel_bytes} B, "
          f"{lay.steps} k-step(s) of {t.k} {t.name}")
    for s, d in enumerate(descs):
        rules.check_descriptor(d, parameter=f"k_step[{s}]")
        print(f"  k-step {s}: {d.describe()}")
    if args.operand == "A" and mn > M:
        step = descs[0].sbo * (M // 8) if args.major == "K" else descs[0].lbo * (M // (lay.inner_bytes // t.itemsize))
        print(f"  rows 64.. of A (the next instruction): every start {step} B further per 64 rows")
    print("rules checked: dtype, operand, major_dtype, register_a_major, shape_n, box_inner_span, "
          "box_inner_kstep, box_rows, tile_alignment, k_step_range, start_alignment, field_range, field_alignment, "
          "base_offset_use, swizzle_alignment")
    if args.operand == "B" and n not in PROBE_NS:  # no answer without evidence: say what the GPU never ran
        print(f"not fuzzed on a GPU at N = {n}: the wgmma probe (its oracle checked bit for bit) runs N in "
              f"{', '.join(map(str, PROBE_NS))} only")
    return 0
