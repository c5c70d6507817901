"""`drvtma decode HEX [--json]`: what a tiled sm_90 tensor map's 128 bytes say (no GPU needed)."""

from __future__ import annotations

import argparse
import json
import sys


def decode_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="drvtma decode",
        description="Decode the 128 bytes of a tiled sm_90 CUtensorMap (256 hex digits, spaces and 0x allowed; '-' "
                    "reads stdin) into its spec in NumPy order, its global address, and the rules it breaks.")
    p.add_argument("hex", nargs="+", help="the map's bytes in memory order, as hex")
    p.add_argument("--json", action="store_true", help='print {"address": ..., "spec": TensorMapSpec.to_dict()}')
    return p


def decode_command(argv: list[str]) -> int:
    from ..tma.decode import decode, derived_words, fields
    from ..tma.rules import validate_all

    args = decode_parser().parse_args(argv)
    text = sys.stdin.read() if args.hex == ["-"] else "".join(args.hex)
    spec, address = decode(text)
    if args.json:
        print(json.dumps({"address": hex(address), "spec": spec.to_dict()}))
        return 0
    f = fields(text)
    print(f"tensor map at global 0x{address:x}")
    print(spec.describe())
    broken = validate_all(spec)
    print("rules broken: " + ("none" if not broken else ""))
    for err in broken:
        print(f"  {err}")
    box_bytes, marker = derived_words(spec)
    if (f.derived_box_bytes, f.derived_swizzle) != (box_bytes, marker):
        print(f"derived words differ from the driver's (box bytes {f.derived_box_bytes} vs {box_bytes}, swizzle "
              f"marker 0x{f.derived_swizzle:x} vs 0x{marker:x}): edited on the device or built from zeros; loads "
              "do not read them")
    for name, bit in (("bit 85 (small-tensor bit)", f.small_tensor_bit), ("bit 86", f.swizzle_atomicity_bit)):
        if bit:
            print(f"{name} is set: no sm_90 driver map seen has it")
    return 0
