"""`drvtma show`: draw a tensor map's box in shared memory (labels from the oracle), a wgmma operand's reads over
it and the bank conflicts of a warp's reads; SVG, PNG (matplotlib) or terminal text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import cast

from ..errors import DrvtmaError
from ..tma.tiled.rules import validate_all
from ..tma.tiled.spec import TensorMapSpec
from .check import _ints, accepted_values, add_map_options, spec_from_args
from .parser import Parser, address, choice_list, int_at_least, list_of, out_file

EXAMPLES = """{accepted}

show examples:
  drvtma show --dtype bf16 --shape 64,64 --box 64,64 --swizzle 128B --base-offset 512 --svg bf16.svg
  drvtma show --dtype u8 --shape 100,112 --box 16,64 --at=-8,48 --cells element
  drvtma show --dtype bf16 --shape 128,64 --box 128,64 --swizzle 128B --wgmma B --descriptor 0x8000004000010000
               (a 64B-swizzle descriptor over a 128B image: the wrong reads marked, exit 1)
  drvtma show --dtype f32 --shape 32,32 --box 32,32 --banks column,row --png banks.png   (needs matplotlib)
  (negative box coordinates: --at=-8,48)

exit status: 0 drawn, 1 rules broken or a wgmma read finds the wrong element, 2 usage"""
PATTERNS = ("ldmatrix", "column", "row")


def _base_offset(text: str) -> int:
    try:
        value = int(text.replace("_", ""), 0)
    except ValueError:
        value = -1
    if value < 0 or value % 128 or value >= 1024:
        raise argparse.ArgumentTypeError(f"wants the image's shared address mod 1024: 0, 128, ... 896, got {text!r}")
    return value


def _parser() -> Parser:
    p = Parser(prog="drvtma show", description="Draw what a tiled tensor map's load puts in shared memory: each "
               "cell labelled with the global coordinates it holds (from the oracle), the swizzle phase coloured; "
               "optionally what a wgmma operand reads from it and the bank conflicts of a warp's reads. Needs no "
               "GPU.", epilog=EXAMPLES.replace("{accepted}", accepted_values().split("\n\nexamples:")[0]))
    add_map_options(p)
    p.add_argument("--at", type=_ints, help="the box's coordinates (NumPy order; default the origin)")
    p.add_argument("--base-offset", type=_base_offset, default=0, help="the image's shared address mod 1024 (a "
                   "multiple of 128; the swizzle is on absolute addresses)")
    p.add_argument("--cells", choices=("chunk", "element"), default="chunk", help="one cell per 16-byte chunk "
                   "(default) or per element")
    p.add_argument("--colour", choices=("row", "chunk"), default="row", help="colour data cells by box row "
                   "(default) or by the chunk of the row they came from")
    p.add_argument("--wgmma", choices=("A", "B"), help="lay this wgmma operand's reads over the image")
    p.add_argument("--major", choices=("K", "MN"), default="K", help="the operand's major-ness (default K)")
    p.add_argument("--n", type=int_at_least(1), help="rows of operand B (default: the tile's MN extent)")
    p.add_argument("--descriptor", type=list_of(address, "64-bit descriptors, comma-separated, one per k-step"),
                   help="read with these descriptors (hex, one per k-step) instead of descriptor_for's")
    p.add_argument("--banks", type=choice_list(PATTERNS + ("none",), "ldmatrix, column, row or none, "
                   "comma-separated"), default=PATTERNS, help="read patterns whose bank conflicts to count "
                   "(default all: ldmatrix, column, row; none: no count)")
    p.add_argument("--svg", type=out_file, help="write the picture as SVG")
    p.add_argument("--png", type=out_file, help="write the picture as PNG (needs matplotlib: drvtma[plot])")
    return p


def show_command(argv: list[str]) -> int:
    from .. import show

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        spec = cast(TensorMapSpec, spec_from_args(args))  # no --im2col here: always tiled
    except (DrvtmaError, ValueError, TypeError, OSError) as exc:
        parser.error(str(exc))
    if args.at is not None and len(args.at) != spec.rank:
        parser.error(f"--at: wants {spec.rank} coordinates (NumPy order, one per axis of --shape), got "
                     f"{len(args.at)}: {','.join(map(str, args.at))}")
    errors = validate_all(spec)
    if errors:
        print(spec.describe())
        for e in errors:
            print(f"  - {e}")
        print(f"drvtma show: {len(errors)} rule(s) broken: {', '.join(e.rule for e in errors)}", file=sys.stderr)
        return 1
    if args.png:  # refuse before drawing when matplotlib is absent
        show.png.pyplot(args.png)
    picture = show.draw_image(spec, args.at, base_offset=args.base_offset)
    over = None
    if args.wgmma:
        over = show.overlay(picture, args.wgmma, args.major, args.descriptor, n=args.n)
    banks = tuple(show.bank_report(picture, p) for p in args.banks if p != "none")
    if args.svg or args.png:
        scene = show.build(picture, unit=args.cells, colour=args.colour, over=over, banks=banks)
        if args.svg:
            Path(args.svg).write_text(show.svg_text(scene))
            print(f"wrote {args.svg}")
        if args.png:
            show.write_png(scene, args.png)
            print(f"wrote {args.png}")
        for b in banks:
            print(b.describe())
        if over is not None:
            print(f"wgmma {over.operand}: " + (f"MISMATCH: {over.first_mismatch}" if over.wrong else
                                               f"every one of the {over.reads} reads finds the element it expects"))
    else:
        print(show.text_form(picture, unit=args.cells, over=over, banks=banks))
    return 1 if over is not None and over.wrong else 0
