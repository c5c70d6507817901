"""`drvtma info [--target T | --table]`: versions, and what the current GPU (or a target) offers a TMA tool."""

from __future__ import annotations

import argparse

from .parser import Parser

HELP = "versions, device and driver, and what the GPU offers (capabilities)"


def target(text: str) -> str:
    """A compile target (sm_90a, sm_120a, compute_90), checked by the capability table's own parser."""
    from ..errors import ArgumentError
    from ..runtime.capabilities import ARCHS, parse_target

    try:
        cc, _ = parse_target(text)
    except ArgumentError as exc:
        raise argparse.ArgumentTypeError(f"wants a target such as sm_90a, sm_100a or sm_120a, got {text!r}") from exc
    if cc not in ARCHS:  # no row to print: the table knows only GPUs with TMA
        known = ", ".join(f"sm_{a}{b}" for a, b in ARCHS)
        raise argparse.ArgumentTypeError(f"wants a target of a GPU with TMA ({known}), got {text!r}")
    return text


def _print_row(row) -> None:
    width = max(len(k) for k, _ in row.rows())
    for key, value in row.rows():
        print(f"{key:<{width}}  {value}")


def info_command(argv: list[str]) -> int:
    p = Parser(prog="drvtma info", description=HELP + " (needs the CUDA driver, unless --target or --table)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--target", type=target, help="print a target's row of the capability table (no GPU needed)")
    group.add_argument("--table", action="store_true", help="print the whole capability table as Markdown")
    args = p.parse_args(argv)
    from ..runtime import capabilities

    if args.table:
        print(capabilities.markdown(), end="")
        return 0
    if args.target:
        cc, _ = capabilities.parse_target(args.target)
        _print_row(capabilities.for_cc(cc))
        return 0
    from ..errors import CapabilityError, NoGpuError
    from ..runtime import driver

    for key, value in driver.versions().items():
        print(f"{key}: {value}")
    try:
        props = driver.device_properties()
    except NoGpuError as exc:
        if isinstance(exc, CapabilityError):
            raise
        raise NoGpuError(f"{exc}; `drvtma info --target sm_120a` prints a target's capabilities without one") \
            from None
    print(f"device: {props.name}, sm_{props.compute_capability[0]}{props.compute_capability[1]}, "
          f"{props.sm_count} SMs, L2 {props.l2_bytes >> 20} MiB, "
          f"shared memory per block (opt-in) {props.smem_per_block_optin} B")
    _print_row(driver.device_capabilities())
    return 0
