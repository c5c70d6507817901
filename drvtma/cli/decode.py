"""`drvtma decode HEX [--json]`: what a tiled sm_90 tensor map's 128 bytes say (no GPU needed)."""

from __future__ import annotations

import json
import string
import sys

from ..errors import DrvtmaError
from .parser import Parser

MAP_DIGITS = 256  # 128 bytes


def decode_parser() -> Parser:
    p = Parser(
        prog="drvtma decode",
        description="Decode the 128 bytes of a tiled sm_90 CUtensorMap (256 hex digits, spaces, _ and one leading "
                    "0x allowed; '-' reads stdin) into its spec in NumPy order, its global address, and the rules "
                    "it breaks. Exit status 1 when it breaks one, as `drvtma check`.")
    p.add_argument("hex", nargs="+", help="the map's bytes in memory order, as hex")
    p.add_argument("--json", action="store_true", help='print {"address": ..., "spec": TensorMapSpec.to_dict()}')
    return p


def map_hex(text: str) -> bytes:
    """The 128 bytes of `text`; ValueError names what is wrong with it and what would be right."""
    digits = "".join(text.split()).replace("_", "")
    digits = digits[2:] if digits[:2].lower() == "0x" else digits
    if "0x" in digits.lower():
        raise ValueError("HEX: '0x' inside the digits (two values pasted?); give the 128 bytes as one run of "
                         f"{MAP_DIGITS} hex digits in memory order")
    bad = sorted({c for c in digits if c not in string.hexdigits})
    if bad:
        raise ValueError(f"HEX: {''.join(bad)!r} are not hex digits; give {MAP_DIGITS} hex digits (0-9, a-f)")
    if len(digits) != MAP_DIGITS:
        raise ValueError(f"HEX: {len(digits)} hex digits; a tensor map is 128 bytes: give exactly {MAP_DIGITS}")
    return bytes.fromhex(digits)


def decode_command(argv: list[str]) -> int:
    from ..tma.decode import decode, derived_words, fields
    from ..tma.rules import validate_all

    parser = decode_parser()
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.hex == ["-"] else "".join(args.hex)
    try:
        raw = map_hex(text)
        spec, address = decode(raw)
        f = fields(raw)
    except (DrvtmaError, ValueError) as exc:  # not the bytes of a map drvtma can read: usage
        parser.error(str(exc))
    if args.json:
        print(json.dumps({"address": hex(address), "spec": spec.to_dict()}))
        return 0
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
    if broken:
        print(f"drvtma decode: {len(broken)} rule(s) broken: {', '.join(e.rule for e in broken)}", file=sys.stderr)
        return 1
    return 0
