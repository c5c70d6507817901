"""The `drvtma` command line. Each subcommand lives with the code it drives; this file only dispatches."""

from __future__ import annotations

import importlib
import sys

from ..errors import DrvtmaError, NoGpuError

# subcommand -> (module, function taking argv and returning an exit code, one-line help)
COMMANDS = {
    "sweep": ("drvtma.cli.bench", "sweep_command", "time the B-08 modes over fma_iters (needs a Hopper GPU)"),
    "bench": ("drvtma.cli.bench", "bench_command",
              "benchmarks: roof, floors (the rings), descriptors, multicast, gemm (`drvtma bench NAME --help`)"),
    "check": ("drvtma.cli.check", "check_command", "describe, validate and (on a GPU) encode a tensor map"),
    "wgmma": ("drvtma.cli.wgmma", "wgmma_command", "wgmma descriptors for a TMA tile per k-step, or --decode one"),
    "compile": ("drvtma.cli.main", "compile_command", "compile a kernel file with NVRTC and list its TMA instructions"),
    "info": ("drvtma.cli.main", "info_command", "versions, device and driver"),
    "decode": ("drvtma.cli.decode", "decode_command", "decode a tensor map's 128 bytes (hex) into its spec and address"),
    "fuzz": ("drvtma.cli.fuzz", "fuzz_command", "fuzz a TMA operation against its oracle: report, shrunk reproducers"),
    "repro": ("drvtma.cli.fuzz", "repro_command", "replay a reproducer written by `drvtma fuzz` and print the diff"),
}


def _usage() -> str:
    lines = ["usage: drvtma COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def info_command(argv: list[str]) -> int:
    from ..runtime import driver

    for key, value in driver.versions().items():
        print(f"{key}: {value}")
    props = driver.device_properties()
    print(f"device: {props.name}, sm_{props.compute_capability[0]}{props.compute_capability[1]}, "
          f"{props.sm_count} SMs, L2 {props.l2_bytes >> 20} MiB, "
          f"shared memory per block (opt-in) {props.smem_per_block_optin} B")
    return 0


def compile_command(argv: list[str]) -> int:
    import argparse

    from ..runtime import compiler
    from ..runtime import sass

    p = argparse.ArgumentParser(prog="drvtma compile", description=COMMANDS["compile"][2])
    p.add_argument("source", help="a .cu file (a name under cu/ or a path)")
    p.add_argument("-D", dest="defines", action="append", default=[], help="NAME=VALUE")
    args = p.parse_args(argv)
    defines = dict(d.split("=", 1) if "=" in d else (d, None) for d in args.defines)
    cubin = compiler.compile_cubin(args.source, defines=defines)
    for name, ops in sorted(sass.functions(cubin).items()):
        tma = sorted({op for op in ops if op.startswith(("UTMA", "UBLK", "SYNCS"))})
        print(f"{name}: {len(ops)} instructions; TMA/mbarrier: {', '.join(tma) or 'none'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"drvtma: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    try:
        return int(getattr(importlib.import_module(module), func)(rest) or 0)
    except NoGpuError as exc:
        print(f"drvtma {name}: needs an NVIDIA Hopper GPU, and none is usable here ({exc}).", file=sys.stderr)
        return 3
    except DrvtmaError as exc:
        print(f"drvtma {name}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
