"""`drvtma decode HEX [--json]`: what an sm_90 tensor map's 128 bytes say, tiled or im2col (no GPU needed)."""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path

from ..errors import DrvtmaError
from .parser import Parser

MAP_DIGITS = 256  # 128 bytes


def decode_parser() -> Parser:
    p = Parser(
        prog="drvtma decode",
        description="Decode the 128 bytes of a tiled or im2col sm_90 CUtensorMap (256 hex digits, spaces, _ and "
                    "one leading 0x allowed; '-' reads stdin; or a file of the 128 raw bytes) into its mode, its "
                    "spec in NumPy order (an im2col map's corners, channels per pixel and pixels per column "
                    "included), its global address, the rules it breaks (with fixes) and findings (known driver "
                    "defects patched by hand, device edits: not errors). Exit status 1 when it breaks a rule, as "
                    "`drvtma check`.")
    p.add_argument("hex", nargs="+", help="the map's bytes in memory order, as hex, or a file holding them")
    p.add_argument("--json", action="store_true", help='print {"address": ..., "mode": "tiled" or "im2col", '
                   '"spec": its TensorMapSpec or Im2colSpec to_dict(), "broken": [rule, ...], '
                   '"findings": [name, ...]}')
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


def map_arg(text: str) -> bytes:
    """The 128 bytes named on the command line: hex, '-' (hex on stdin), or a file holding the raw bytes (a .bin
    dump) or their hex."""
    if text == "-":
        return map_hex(sys.stdin.read())
    path = Path(text)
    if text.strip() and len(text) < MAP_DIGITS and path.is_dir():
        raise ValueError(f"{text}: a folder; give a file holding the map (128 raw bytes or {MAP_DIGITS} hex "
                         "digits), the hex itself, or '-' for hex on stdin")
    if len(text) < MAP_DIGITS and path.is_file():
        data = path.read_bytes()
        if len(data) == 128:
            return data
        try:
            return map_hex(data.decode())
        except (UnicodeDecodeError, ValueError):
            raise ValueError(f"{text}: {len(data)} bytes, neither the 128 raw bytes of a map nor its "
                             f"{MAP_DIGITS} hex digits") from None
    return map_hex(text)


def print_report(report, prog: str) -> int:
    """A map's explanation (`tma.maps.findings.MapReport`) on stdout; 1 when it breaks a rule (findings are not
    errors)."""
    print("\n".join(report.lines()))
    if report.broken:
        print(f"{prog}: {len(report.broken)} rule(s) broken: {', '.join(e.rule for e in report.broken)}",
              file=sys.stderr)
        return 1
    return 0


def decode_command(argv: list[str]) -> int:
    from ..tma.maps.findings import explain

    parser = decode_parser()
    args = parser.parse_args(argv)
    try:
        raw = map_arg(args.hex[0]) if len(args.hex) == 1 else map_hex("".join(args.hex))
        report = explain(raw)
    except (DrvtmaError, ValueError) as exc:  # not the bytes of a map drvtma can read: usage
        parser.error(str(exc))
    if args.json:
        print(json.dumps({"address": hex(report.address), "mode": report.mode, "spec": report.spec.to_dict(),
                          "broken": [e.rule for e in report.broken], "findings": [f.name for f in report.findings]}))
        return 0
    return print_report(report, "drvtma decode")
