"""The `drvtma` command line. Each subcommand lives with the code it drives; this file only dispatches."""

from __future__ import annotations

import sys

from ..errors import ArgumentError, CapabilityError, DrvtmaError, NoGpuError
from .parser import USAGE, Entry, dispatch, listing

# subcommand -> what runs it (argv -> exit status, imported when run) and its one-line help
COMMANDS = {
    "sweep": Entry("drvtma.cli.bench", "sweep_command",
                   "time ways of feeding shared memory (sync loads, bulk and tensor copies, pipelines, rings) "
                   "against the compute per tile, as the B-08 TMA article does (needs a TMA GPU)"),
    "bench": Entry("drvtma.cli.bench", "bench_command",
                   "benchmarks: roof, floors (the rings), descriptors, multicast, gemm (`drvtma bench NAME --help`)"),
    "check": Entry("drvtma.cli.check", "check_command", "describe, validate and (on a GPU) encode a tensor map; "
                   "`check gemm` / `check conv`: a GEMM or convolution configuration, rule by rule"),
    "wgmma": Entry("drvtma.cli.wgmma", "wgmma_command", "wgmma descriptors for a TMA tile per k-step, or --decode one"),
    "compile": Entry("drvtma.cli.compile", "compile_command",
                     "compile a kernel file with NVRTC and list its TMA instructions, or --inspect a binary"),
    "info": Entry("drvtma.cli.info", "info_command", "versions, device and driver, and what the GPU offers"),
    "decode": Entry("drvtma.cli.decode", "decode_command",
                    "decode a tensor map's 128 bytes (hex) into its spec and address"),
    "fuzz": Entry("drvtma.cli.fuzz", "fuzz_command",
                  "fuzz a TMA operation against its oracle: report, shrunk reproducers"),
    "repro": Entry("drvtma.cli.fuzz", "repro_command",
                   "replay a reproducer written by `drvtma fuzz` and print the diff"),
    "audit": Entry("drvtma.cli.audit", "audit_command",
                   "run a Python program under CUPTI and report every tensor map it encodes or launches"),
    "show": Entry("drvtma.cli.show", "show_command",
                  "draw a map's box in shared memory, a wgmma operand's reads over it, its bank conflicts"),
}


EXIT_CODES = """exit status:
  0  ok
  1  rules broken (a spec, descriptor or configuration breaks a named rule), a mismatch found, or a compile failed
  2  usage: a wrong option or value (one line on stderr names it and what would be right)
  3  no usable GPU (no driver, no device, or one without what the command needs: the named rule says which)"""


def _usage() -> str:
    return "\n".join(["usage: drvtma COMMAND [ARGS...]   (drvtma COMMAND --help)", "", "commands:",
                      *listing(COMMANDS, 8), "", EXIT_CODES])


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
    except OSError as exc:  # a path the checks let through that the system refused (/proc, a full disk): usage
        if exc.filename is None:
            raise
        print(f"drvtma {name}: cannot use {exc.filename!r}: {exc.strerror}; give a path drvtma may write",
              file=sys.stderr)
        return USAGE


if __name__ == "__main__":
    sys.exit(main())
