"""`drvtma check`: describe a tensor-map spec, list every rule it breaks, and encode it when a GPU is present;
`drvtma check gemm` / `conv` (FORMS): a GEMM or convolution configuration, rule by rule."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Callable, cast

from ..errors import CudaError, DrvtmaError
from ..tma.dtypes import ALL_DTYPES, tma_dtype
from ..tma.im2col.encode import encode_im2col
from ..tma.im2col.rules import validate_im2col
from ..tma.im2col.spec import Im2colSpec
from ..tma.targets import map_target
from ..tma.tiled.encode import TensorMap, encode_tiled
from ..tma.tiled.rules import validate_all
from ..tma.tiled.spec import Interleave, L2Promotion, OobFill, Swizzle, TensorMapSpec, _enum_value
from .check_im2col import im2col_spec, tiled_only
from .parser import Entry, Parser, address, list_of

# `drvtma check FORM ...`: what else it checks, rule by rule (argv -> exit status, imported when run)
FORMS = {
    "gemm": Entry("drvtma.cli.check_gemm", "check_gemm_command", "a GEMM configuration (and problem) against every "
                  "rule of the kernel"),
    "conv": Entry("drvtma.cli.check_gemm", "check_conv_command", "a convolution on the GEMM kernel against every rule"),
}

# The values each option accepts (any case; the spec also takes the enums' own names, e.g. B128).
SWIZZLES = ("none", "32B", "64B", "128B", "128B_atom_32B", "128B_atom_32B_flip_8B", "128B_atom_64B")
INTERLEAVES = ("none", "16B", "32B")
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
FILLS = ("zero", "nan")
EXAMPLES = """accepted values:
  --dtype         {dtypes}
                  (and aliases: f16, bf16, f32, f64, tf32, fp8, u8, u16, u32, u64, i32, i64, ...)
  --swizzle       {swizzles}
                  (the 128B_atom_* swizzles and the packed types 16u4_align8b, 16u4_align16b, 16u6_align16b: Blackwell)
  --target        the GPU the map is for: sm_90a, sm_100a, sm_103a, sm_120a (default: the GPU, else sm_90a)
  --interleave    {interleaves}
  --l2-promotion  {l2}
  --oob-fill      {fills} (nan: floating-point types only)
  --shape, --box, --strides, --strides-bytes, --element-strides: integers, comma- or x-separated, NumPy order
  --address       a device address, decimal or 0x hex, >= 0

examples:
  drvtma check --dtype f32 --shape 4,250 --box 2,32 --strides-bytes 1000,4
               (rows of 1000 B break stride_alignment: the rule and its fix, exit 1)
  drvtma check --dtype bf16 --shape 1024x1024 --box 64x64 --swizzle 128B --address 0x7f0000000000
  drvtma check --json '{{"dtype": "float16", "shape": [64, 64], "box": [64, 64], "swizzle": "128B"}}'
  drvtma check --json spec.json --print-json
  drvtma check --dtype u8 --shape 256 --box 128 --encode        (encodes it on a GPU)
  drvtma check --target sm_100a --dtype 16u4_align8b --shape 64,256 --box 16,128 --swizzle 128B
               (Blackwell's rules, answered on a CPU; --target sm_90a refuses it with the arch it needs)
  drvtma check --im2col --dtype bf16 --shape 32,56,56,64 --lower-corner=-1,-1 --upper-corner=-1,-1 \\
               --channels-per-pixel 64 --pixels-per-column 128 --swizzle 128B
               (an im2col map, NumPy order N, [D, [H,]] W, C; corners D, H, W; give negative lists with =)
  drvtma check gemm --m 4096 --n 4096 --k 4096 --dtype bf16
               (a GEMM configuration, every rule listed; `drvtma check gemm --help`, `drvtma check conv --help`)

exit status: 0 valid, 1 rules broken (listed) or the driver refused it, 2 usage, 3 --encode without a usable GPU"""


_ints = list_of(lambda v: int(v.replace("_", ""), 0), "integers separated by commas or x (e.g. 4,250)",
                separators=",x")


def _choice(enum, accepted: tuple[str, ...]):
    """A type: one of `accepted` (any case) or the enum's own member names."""
    def parse(text: str) -> str:
        try:
            _enum_value(text, enum, "value")
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(f"wants one of {', '.join(accepted)}, got {text!r}") from None
        return text
    parse.__name__ = enum.__name__
    return parse


def _dtype(text: str) -> str:
    try:
        tma_dtype(text)
    except (DrvtmaError, ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"wants a tensor-map type ({', '.join(d.name for d in ALL_DTYPES)} or "
                                         f"an alias such as f32, bf16), got {text!r}") from None
    return text


def _target(text: str) -> str:
    try:
        return cast(str, map_target(text))  # None only for None
    except DrvtmaError:
        raise argparse.ArgumentTypeError(f"wants a target such as sm_90a, sm_100a, sm_103a or sm_120a, got "
                                         f"{text!r}") from None


def _wrap(text: str) -> str:
    return textwrap.fill(text, 96, subsequent_indent=" " * 18)


def accepted_values(examples: str = EXAMPLES) -> str:
    """The epilog listing what each map option accepts (`examples` holds the {dtypes} ... fields)."""
    return examples.format(dtypes=_wrap(", ".join(d.name for d in ALL_DTYPES)), swizzles=", ".join(SWIZZLES),
                           interleaves=", ".join(INTERLEAVES), l2=", ".join(L2_PROMOTIONS), fills=", ".join(FILLS))


def _parser() -> Parser:
    p = Parser(
        prog="drvtma check", description="Describe, validate and (on a GPU) encode a tiled tensor map. Axes are "
        "in NumPy order (outermost first); needs no GPU unless --encode. `drvtma check gemm` and `drvtma check "
        "conv` check a GEMM or convolution configuration instead.", epilog=accepted_values())
    add_map_options(p)
    im2col = p.add_argument_group("im2col maps (--im2col; no --box)")
    im2col.add_argument("--im2col", action="store_true", help="an im2col map (cuTensorMapEncodeIm2col)")
    im2col.add_argument("--lower-corner", type=_ints, help="bounding-box lower corner per spatial axis (D, H, W)")
    im2col.add_argument("--upper-corner", type=_ints, help="bounding-box upper corner per spatial axis (D, H, W)")
    im2col.add_argument("--channels-per-pixel", type=_ints, help="channels one load brings per pixel")
    im2col.add_argument("--pixels-per-column", type=_ints, help="pixels one load brings")
    p.add_argument("--encode", action="store_true", help="also encode it on the GPU (a scratch buffer is "
                   "allocated when no --address is given)")
    p.add_argument("--print-json", action="store_true", help="print the normalised spec as JSON")
    p.add_argument("--show", action="store_true", help="draw the box at the origin in shared memory (text; "
                   "`drvtma show` draws more)")
    p.add_argument("--map", help="check a map made elsewhere instead: its 128 bytes as hex, or a file of the raw "
                   "bytes (as `drvtma decode`); the rules it breaks with fixes, and findings such as bit 85")
    return p


def add_map_options(p: Parser) -> None:
    """The options that make a spec (`spec_from_args` reads them): shared by `drvtma check` and `drvtma show`."""
    p.add_argument("--json", help="the spec as JSON text (an object of TensorMapSpec fields), a file holding it, "
                   "or - for stdin; the flags below override its fields")
    p.add_argument("--dtype", type=_dtype, help="element type (see below)")
    p.add_argument("--shape", type=_ints, help="elements per axis, e.g. 4,250")
    p.add_argument("--box", type=_ints, help="box (elements per load) per axis, e.g. 2,32")
    p.add_argument("--strides", type=_ints, help="strides in elements")
    p.add_argument("--strides-bytes", type=_ints, help="strides in bytes")
    p.add_argument("--element-strides", type=_ints, help="traversal strides (1 = every element)")
    p.add_argument("--interleave", type=_choice(Interleave, INTERLEAVES), help=", ".join(INTERLEAVES))
    p.add_argument("--swizzle", type=_choice(Swizzle, SWIZZLES), help=", ".join(SWIZZLES))
    p.add_argument("--l2-promotion", type=_choice(L2Promotion, L2_PROMOTIONS), help=", ".join(L2_PROMOTIONS))
    p.add_argument("--oob-fill", type=_choice(OobFill, FILLS), help=", ".join(FILLS))
    p.add_argument("--address", type=address, help="global address to check alignment against (>= 0)")
    p.add_argument("--target", type=_target, help="the GPU the map is for (sm_90a, sm_100a, sm_103a, sm_120a; "
                   "default: the GPU's, else sm_90a)")
    p.add_argument("--allow-overlap", action="store_true", help="accept stride 0 and overlapping strides")
    p.add_argument("--allow-undocumented", action="store_true", help="accept INTERLEAVE_32B with another swizzle")


def _json_fields(text: str) -> dict:
    """--json's object, from stdin, a file or the text itself; ValueError names what is wrong."""
    if text == "-":
        where, text = "stdin", sys.stdin.read()
    elif Path(text).is_file():
        where, text = repr(text), Path(text).read_text()
    elif text.lstrip()[:1] in ("{", "[", '"') or text.strip() in ("true", "false", "null") or \
            text.strip().lstrip("-").replace(".", "", 1).isdigit():
        where = "the JSON text"
    else:
        raise ValueError(f"--json: {text!r} is neither a file nor JSON text; give a file or an object such as "
                         '\'{"dtype": "f32", "shape": [4, 250], "box": [2, 32]}\'')
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--json: {where} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"--json: {where} holds a JSON {type(value).__name__}; give an object of TensorMapSpec "
                         "fields such as {\"dtype\": \"f32\", \"shape\": [4, 250], \"box\": [2, 32]}")
    return value


def spec_from_args(args) -> TensorMapSpec | Im2colSpec:
    fields: dict = _json_fields(args.json) if args.json else {}
    flags = {"dtype": args.dtype, "shape": args.shape, "box": args.box, "strides": args.strides,
             "strides_bytes": args.strides_bytes, "element_strides": args.element_strides,
             "interleave": args.interleave, "swizzle": args.swizzle, "l2_promotion": args.l2_promotion,
             "oob_fill": args.oob_fill, "base_address": args.address, "target": args.target}
    given = {k: v for k, v in flags.items() if v is not None}
    # strides (elements) and strides_bytes say the same thing: a flag for one replaces the JSON's other
    for name, other in (("strides", "strides_bytes"), ("strides_bytes", "strides")):
        if name in given:
            fields.pop(other, None)
    fields.update(given)
    if getattr(args, "im2col", False):  # `drvtma check` only; `drvtma show` draws tiled maps
        if fields.pop("target", None) is not None:
            raise ValueError("--target: tiled maps only (an im2col map is checked for the GPU's target, else sm_90a)")
        return im2col_spec(fields, args)
    for key in ("dtype", "shape", "box"):
        if fields.get(key) is None:
            raise ValueError(f"{key}: the spec needs one; give --{key} (or {key!r} in --json)")
    base = fields.get("base_address")
    if isinstance(base, str):  # JSON carries addresses as hex text
        try:
            fields["base_address"] = address(base)
        except argparse.ArgumentTypeError as exc:
            raise ValueError(f"base_address: {exc}") from None
    elif base is not None and (isinstance(base, bool) or not isinstance(base, int) or base < 0):
        raise ValueError(f"base_address: wants an address >= 0 (an integer or hex text), got {base!r}")
    if args.allow_overlap:
        fields["allow_overlap"] = True
    if args.allow_undocumented:
        fields["allow_undocumented"] = True
    return TensorMapSpec.from_dict(fields)


def check_command(argv: list[str]) -> int:
    """0: valid (and encoded with --encode); 1: rules broken or the driver refused; 2: bad arguments."""
    if argv and argv[0] in FORMS:
        return FORMS[argv[0]].run(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if (why := tiled_only(args)) is not None:
        parser.error(why)
    if args.map is not None:
        return _check_map(parser, args, argv)
    try:
        spec = spec_from_args(args)
    except (DrvtmaError, ValueError, TypeError, OSError) as exc:  # not a spec at all: a usage error
        parser.error(str(exc))
    print(spec.describe())
    if args.print_json:
        print(json.dumps(spec.to_dict()))
    errors = validate_im2col(spec) if isinstance(spec, Im2colSpec) else validate_all(spec)  # Im2colSpec: --im2col
    if errors:
        print(f"\n{len(errors)} rule(s) broken:")
        for e in errors:
            print(f"  - {e}")
        print(f"drvtma check: {len(errors)} rule(s) broken: {', '.join(e.rule for e in errors)}", file=sys.stderr)
        return 1
    print("\nvalid: every rule holds" + ("" if spec.base_address is not None else " (no address given to check)"))
    if args.show:
        from ..show import draw_image, text_form

        print("\n" + text_form(draw_image(cast(TensorMapSpec, spec)), with_spec=False))  # --im2col refuses --show
    if not args.encode:
        return 0
    try:
        encode: Callable[..., TensorMap] = encode_im2col if args.im2col else encode_tiled
        if spec.base_address is not None:
            tmap = encode(spec)
        else:
            from ..runtime.driver import DeviceBuffer

            scratch = DeviceBuffer(max(spec.extent_bytes, 16))
            tmap = encode(spec, scratch)
    except CudaError as exc:
        print(f"\nthe driver refused it: {exc}")
        return 1
    raw = tmap.to_bytes()
    print(f"\nencoded: {tmap.describe().splitlines()[0]}")
    for row in range(0, len(raw), 32):
        print("  " + raw[row:row + 32].hex(" ", 8))
    return 0


def _check_map(parser: Parser, args, argv: list[str]) -> int:
    """--map: the bytes explained (tma.maps.findings); alone, as the spec flags describe another map."""
    from ..tma.maps.findings import explain
    from .decode import map_arg, print_report

    others = [a for a in argv if a.startswith("--") and a.split("=")[0] != "--map"]
    if others:
        parser.error(f"--map: checks the map's own bytes; drop {' '.join(others)}")
    try:
        report = explain(map_arg(args.map))
    except (DrvtmaError, ValueError) as exc:
        parser.error(f"--map: {exc}")
    return print_report(report, "drvtma check")
