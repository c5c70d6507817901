"""`drvtma check`: describe a tensor-map spec, list every rule it breaks, and encode it when a GPU is present."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import CudaError
from ..tma.spec import TensorMapSpec
from ..tma.encode import encode_tiled
from ..tma.rules import validate_all


def _ints(text: str) -> list[int]:
    return [int(v, 0) for v in text.replace("x", ",").split(",") if v.strip()]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="drvtma check", description="Describe, validate and (on a GPU) encode a tiled tensor map. Axes are "
        "in NumPy order (outermost first), e.g. `drvtma check --dtype f32 --shape 4,250 --box 2,32 "
        "--strides-bytes 1000,4`.")
    p.add_argument("--json", help="the spec as JSON text, a file name, or - for stdin (fields as TensorMapSpec)")
    p.add_argument("--dtype")
    p.add_argument("--shape", type=_ints)
    p.add_argument("--box", type=_ints)
    p.add_argument("--strides", type=_ints, help="strides in elements")
    p.add_argument("--strides-bytes", type=_ints, help="strides in bytes")
    p.add_argument("--element-strides", type=_ints)
    p.add_argument("--interleave")
    p.add_argument("--swizzle")
    p.add_argument("--l2-promotion")
    p.add_argument("--oob-fill", help="zero or nan")
    p.add_argument("--address", type=lambda t: int(t, 0), help="global address to check alignment against")
    p.add_argument("--allow-overlap", action="store_true")
    p.add_argument("--allow-undocumented", action="store_true")
    p.add_argument("--encode", action="store_true", help="also encode it on the GPU (a scratch buffer is "
                   "allocated when no --address is given)")
    p.add_argument("--print-json", action="store_true", help="print the normalised spec as JSON")
    return p


def _spec_from_args(args) -> TensorMapSpec:
    fields: dict = {}
    if args.json:
        text = sys.stdin.read() if args.json == "-" else (
            Path(args.json).read_text() if not args.json.lstrip().startswith("{") else args.json)
        fields.update(json.loads(text))
    flags = {"dtype": args.dtype, "shape": args.shape, "box": args.box, "strides": args.strides,
             "strides_bytes": args.strides_bytes, "element_strides": args.element_strides,
             "interleave": args.interleave, "swizzle": args.swizzle, "l2_promotion": args.l2_promotion,
             "oob_fill": args.oob_fill, "base_address": args.address}
    given = {k: v for k, v in flags.items() if v is not None}
    # strides (elements) and strides_bytes say the same thing: a flag for one replaces the JSON's other
    for name, other in (("strides", "strides_bytes"), ("strides_bytes", "strides")):
        if name in given:
            fields.pop(other, None)
    fields.update(given)
    if args.allow_overlap:
        fields["allow_overlap"] = True
    if args.allow_undocumented:
        fields["allow_undocumented"] = True
    return TensorMapSpec.from_dict(fields)


def check_command(argv: list[str]) -> int:
    """0: valid (and encoded with --encode); 1: rules broken or the driver refused; 2: bad arguments."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        spec = _spec_from_args(args)
    except (ValueError, TypeError, OSError) as exc:
        print(f"drvtma check: {exc}", file=sys.stderr)
        return 2
    print(spec.describe())
    if args.print_json:
        print(json.dumps(spec.to_dict()))
    errors = validate_all(spec)
    if errors:
        print(f"\n{len(errors)} rule(s) broken:")
        for e in errors:
            print(f"  - {e}")
        return 1
    print("\nvalid: every rule holds" + ("" if spec.base_address is not None else " (no address given to check)"))
    if not args.encode:
        return 0
    try:
        if spec.base_address is not None:
            tmap = encode_tiled(spec)
        else:
            from ..runtime.driver import DeviceBuffer

            scratch = DeviceBuffer(max(spec.extent_bytes, 16))
            tmap = encode_tiled(spec, scratch)
    except CudaError as exc:
        print(f"\nthe driver refused it: {exc}")
        return 1
    raw = tmap.to_bytes()
    print(f"\nencoded: {tmap.describe().splitlines()[0]}")
    for row in range(0, len(raw), 32):
        print("  " + raw[row:row + 32].hex(" ", 8))
    return 0
