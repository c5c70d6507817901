"""The `drvtma` command line. Each subcommand lives with the code it drives; this file only dispatches."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import ArgumentError, CapabilityError, DrvtmaError, NoGpuError, NvrtcError
from .parser import USAGE, Entry, Parser, dispatch, listing

# subcommand -> what runs it (argv -> exit status, imported when run) and its one-line help
COMMANDS = {
    "sweep": Entry("drvtma.cli.bench", "sweep_command",
                   "time ways of feeding shared memory (sync loads, bulk and tensor copies, pipelines, rings) "
                   "against the compute per tile, as the B-08 TMA article does (needs a TMA GPU)"),
    "bench": Entry("drvtma.cli.bench", "bench_command",
                   "benchmarks: roof, floors (the rings), descriptors, multicast, gemm (`drvtma bench NAME --help`)"),
    "check": Entry("drvtma.cli.check", "check_command", "describe, validate and (on a GPU) encode a tensor map"),
    "wgmma": Entry("drvtma.cli.wgmma", "wgmma_command", "wgmma descriptors for a TMA tile per k-step, or --decode one"),
    "compile": Entry("drvtma.cli.main", "compile_command",
                     "compile a kernel file with NVRTC and list its TMA instructions"),
    "info": Entry("drvtma.cli.info", "info_command", "versions, device and driver, and what the GPU offers"),
    "decode": Entry("drvtma.cli.decode", "decode_command",
                    "decode a tensor map's 128 bytes (hex) into its spec and address"),
    "fuzz": Entry("drvtma.cli.fuzz", "fuzz_command",
                  "fuzz a TMA operation against its oracle: report, shrunk reproducers"),
    "repro": Entry("drvtma.cli.fuzz", "repro_command",
                   "replay a reproducer written by `drvtma fuzz` and print the diff"),
}


EXIT_CODES = """exit status:
  0  ok
  1  rules broken (a spec, descriptor or configuration breaks a named rule), a mismatch found, or a compile failed
  2  usage: a wrong option or value (one line on stderr names it and what would be right)
  3  no usable GPU (no driver, no device, or one without what the command needs: the named rule says which)"""


def _usage() -> str:
    return "\n".join(["usage: drvtma COMMAND [ARGS...]   (drvtma COMMAND --help)", "", "commands:",
                      *listing(COMMANDS, 8), "", EXIT_CODES])


def _define(text: str) -> tuple[str, str | None]:
    import argparse

    name, sep, value = text.partition("=")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"wants NAME or NAME=VALUE with NAME a C identifier, got {text!r}")
    return name, value if sep else None


def compile_command(argv: list[str]) -> int:
    from ..runtime import compiler
    from ..runtime import sass

    p = Parser(prog="drvtma compile", description=COMMANDS["compile"].help + " (needs no GPU)")
    p.add_argument("source", help="a .cu file: a path, a path under cu/ (tma/load_probe.cu) or a bare kernel name")
    p.add_argument("-D", dest="defines", action="append", default=[], type=_define, help="NAME or NAME=VALUE")
    args = p.parse_args(argv)
    source = Path(args.source)
    if not source.is_file():  # not a path from here: a kernel under cu/
        try:
            source = compiler.find_source(args.source)
        except (FileNotFoundError, ArgumentError) as exc:
            p.error(f"source: {exc}")
        if not source.is_file():
            p.error(f"source: no file {args.source!r} here or under {compiler.cu_dir()}; give a .cu file")
    try:
        cubin = compiler.compile_cubin(source, defines=dict(args.defines))
    except NvrtcError as exc:  # the first line names the file; the log follows
        print(f"drvtma compile: {source}: compile failed\n{exc}", file=sys.stderr)
        return 1
    try:
        listing = sass.functions(cubin)
    except (OSError, RuntimeError) as exc:  # nvdisasm is missing or refused: the compile itself succeeded
        print(f"compiled {source} ({len(cubin)} B cubin); no SASS listing: {exc}")
        return 0
    for name, ops in sorted(listing.items()):
        tma = sorted({op for op in ops if op.startswith(("UTMA", "UBLK", "SYNCS"))})
        print(f"{name}: {len(ops)} instructions; TMA/mbarrier: {', '.join(tma) or 'none'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The `drvtma` command: the exit status (0 ok, 1 rules broken, 2 usage, 3 no usable GPU)."""
    try:
        return dispatch("drvtma", "command", COMMANDS, sys.argv[1:] if argv is None else argv, _usage, run=_run)
    except BrokenPipeError:  # `drvtma ... | head`: the reader left; no traceback, and none at exit's flush either
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _run(name: str, argv: list[str]) -> int:
    """One command, its errors turned into a message on stderr and the exit status of their kind."""
    try:
        return COMMANDS[name].run(argv)
    except SystemExit as exc:  # a parser's usage error (already printed) or --help: main returns, as it does
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else USAGE
    except ArgumentError as exc:  # a wrong argument the API refused (a missing source, a bad size): usage
        print(f"drvtma {name}: {exc}", file=sys.stderr)
        return USAGE
    except CapabilityError as exc:  # the GPU lacks a feature: the rule's own sentence says which
        print(f"drvtma {name}: {exc}", file=sys.stderr)
        return 3
    except NoGpuError as exc:
        print(f"drvtma {name}: needs an NVIDIA GPU with TMA (sm_90 or newer), and none is usable here ({exc}).",
              file=sys.stderr)
        return 3
    except DrvtmaError as exc:
        print(f"drvtma {name}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
