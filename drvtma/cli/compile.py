"""`drvtma compile`: a kernel file (yours or drvtma's) through NVRTC, its TMA instructions listed; `--inspect` reads
a cubin, fatbin or PTX built elsewhere (nvcc, CUTLASS, Triton): kernels, parameter layouts, TMA instructions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ArgumentError, NvrtcError
from .parser import Parser


def _define(text: str) -> tuple[str, str | None]:
    name, sep, value = text.partition("=")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"wants NAME or NAME=VALUE with NAME a C identifier, got {text!r}")
    return name, value if sep else None


def _folder(text: str) -> str:
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"wants a directory of headers, got {text!r} (no such directory)")
    return text


def _parser() -> Parser:
    p = Parser(prog="drvtma compile", description="Compile a kernel file with NVRTC for sm_90a and list each "
               "kernel's TMA / mbarrier instructions (needs no GPU), or --inspect a cubin, fatbin or PTX built "
               "elsewhere.")
    p.add_argument("source", help="a .cu file: a path from here, a path under drvtma's cu/ (tma/load_probe.cu) or a "
                   "bare kernel name; with --inspect a .cubin, .fatbin or .ptx")
    p.add_argument("-D", dest="defines", action="append", default=[], type=_define, help="NAME or NAME=VALUE")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], type=_folder,
                   help="a directory of your headers (repeatable); drvtma's own (<drvtma/tma.cuh>) is always there")
    p.add_argument("-X", "--option", dest="options", action="append", default=[],
                   help="an extra NVRTC option, e.g. -X=-lineinfo (repeatable)")
    p.add_argument("--inspect", action="store_true", help="read a binary built elsewhere instead of compiling")
    return p


def compile_command(argv: list[str]) -> int:
    from ..runtime import compiler

    p = _parser()
    args = p.parse_args(argv)
    if args.inspect:
        if args.defines or args.include_dirs or args.options:
            p.error("--inspect: reads a binary built elsewhere; -D, -I and -X are for compiling, drop them")
        return _inspect(p, args.source)
    try:
        source = compiler.find_source(args.source)
    except ArgumentError as exc:
        p.error(f"source: {exc}")
    try:
        cubin = compiler.compile_cubin(source, defines=dict(args.defines), include_dirs=args.include_dirs,
                                       options=args.options)
    except NvrtcError as exc:  # the first line names the file; the log follows
        print(f"drvtma compile: {source}: compile failed\n{exc}", file=sys.stderr)
        return 1
    return _listing(source, "cubin", cubin)


def _inspect(p: Parser, source: str) -> int:
    from ..runtime import images

    if not Path(source).is_file():
        p.error(f"source: no file {source!r}; give a .cubin, .fatbin or .ptx file")
    found = images.read_image(source)
    if found is None:
        p.error(f"source: {source!r} is not a cubin (ELF), fatbin (magic 0xBA55ED50) or PTX (.version first); "
                "give a binary, or compile a .cu without --inspect")
    return _listing(Path(source), found[0], found[1])


def _listing(source: Path, kind: str, data: bytes) -> int:
    from ..errors import DrvtmaError
    from ..runtime import images

    try:
        kernels = images.inspect_image(kind, data)
    except (OSError, DrvtmaError, ValueError) as exc:  # no nvdisasm, or nothing readable: the listing is the job
        print(f"drvtma compile: {source} ({len(data)} B {kind}) has no listing: {exc}", file=sys.stderr)
        return 1
    for name, params, ops in kernels:
        layout = "unknown" if params is None else ", ".join(f"{s} B @{o}" for o, s in params) or "none"
        print(f"{name}: parameters {layout}; TMA/mbarrier: {', '.join(ops) or 'none'}")
    return 0
