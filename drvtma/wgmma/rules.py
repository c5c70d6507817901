"""Named rules for wgmma shapes, operands and descriptors; each broken one raises WgmmaError(rule, ...).

Shapes and operands (PTX ISA §9.7.15.2-.3, .5.2): ``shape_m`` (M = 64), ``shape_k`` (32 bytes of the type),
``shape_n`` (8..256 step 8; s8/u8: 8, 16, 24, 32, 48, 64, ... 256), ``major_dtype`` (MN-major only for f16/bf16,
with imm-trans), ``register_a_major`` (A from registers is K-major), ``operand`` (A or B).
Descriptors: ``start_alignment``, ``field_range``, ``field_alignment`` (descriptor.py), ``swizzle_code``,
``base_offset_range``, ``base_offset_use`` (a nonzero base offset reads a TMA tile wrong, wherever it sits:
docs/wgmma.md), ``swizzle_alignment`` (a swizzled start is a multiple of 32 B: a tile base or a k-step into it),
``descriptor_mismatch`` (a descriptor that does not read the tile its tensor map wrote; see layout.py).
"""

from __future__ import annotations

from ..errors import WgmmaError, as_int
from .descriptor import SmemDescriptor, WgmmaSwizzle
from .dtypes import K_BYTES, M, wgmma_type

RULES = ("shape_m", "shape_k", "shape_n", "major_dtype", "register_a_major", "operand", "dtype", "start_alignment",
         "field_range", "field_alignment", "swizzle_code", "base_offset_range", "base_offset_use",
         "swizzle_alignment", "reserved_bits", "descriptor_mismatch", "field_type", "descriptor_type")
# Rules of descriptor_for (a tensor-map spec that no descriptor can read)
LAYOUT_RULES = ("spec_type", "spec_interleave", "spec_element_strides", "spec_dtype_size", "spec_rank",
                "box_inner_span", "box_inner_kstep", "box_rows", "tile_alignment", "k_step_range")


def check_shape(dtype, n: int, m: int = M, k: int | None = None) -> None:
    t = wgmma_type(dtype)
    m = as_int(m, "M", error=WgmmaError, rule="shape_m")
    n = as_int(n, "N", error=WgmmaError, rule="shape_n")
    k = None if k is None else as_int(k, "K", error=WgmmaError, rule="shape_k")
    if m != M:
        raise WgmmaError("shape_m", "M", m, "use M = 64 (split taller tiles over warpgroups or instructions)",
                         "every wgmma.mma_async shape is m64")
    if k is not None and k != t.k:
        raise WgmmaError("shape_k", "K", k, f"use K = {t.k} for {t.name}",
                         f"one instruction covers {K_BYTES} bytes of K ({t.k} {t.name})")
    if n not in t.ns:
        near = min(t.ns, key=lambda v: abs(v - n))
        allowed = "8..256 in steps of 8" if t.ns[1] - t.ns[0] == 8 and len(t.ns) == 32 else \
            "8, 16, 24, then 32..256 in steps of 16"
        raise WgmmaError("shape_n", "N", n, f"use N = {near} (allowed for {t.name}: {allowed})",
                         f"m64n{n} is not a {t.name} shape")


def check_operands(dtype, major_a: str = "K", major_b: str = "K", a_from_registers: bool = False) -> None:
    t = wgmma_type(dtype)
    for name, major in (("major_a", major_a), ("major_b", major_b)):
        if major not in ("K", "MN"):
            raise WgmmaError("operand", name, major, "use 'K' or 'MN'")
        if major == "MN" and not t.transposable:
            raise WgmmaError("major_dtype", name, major,
                             f"store {t.name} K-major (transpose in global memory or in registers first)",
                             f"only f16/bf16 have imm-trans; {t.name} operands must be K-major")
    if a_from_registers and major_a != "K":
        raise WgmmaError("register_a_major", "major_a", major_a, "use K-major A fragments, or A from shared memory",
                         "the register (RS) form has no imm-trans-a")


def check_descriptor(desc: SmemDescriptor, *, parameter: str = "descriptor") -> int:
    """Every field rule; returns the encoded value."""
    if not isinstance(desc, SmemDescriptor):
        raise WgmmaError("descriptor_type", parameter, type(desc).__name__,
                         "give an SmemDescriptor (SmemDescriptor.decode(value) for a 64-bit value)")
    if desc.start % 16:
        raise WgmmaError("start_alignment", f"{parameter}.start", desc.start,
                         f"start at a 16-byte multiple ({desc.start // 16 * 16})",
                         "shared matrices start 16-byte aligned; the encoding would drop the low bits")
    value = desc.encode()  # field_range, field_alignment, base_offset_range
    if desc.base_offset and desc.swizzle != WgmmaSwizzle.NONE:
        raise WgmmaError("base_offset_use", f"{parameter}.base_offset", desc.base_offset,
                         "use base offset 0 for tiles TMA wrote, wherever they sit (128-byte aligned)",
                         "TMA swizzles on absolute addresses and wgmma does too; the base offset shifts wgmma's "
                         "phase back by that many 128-B lines, so a TMA tile reads wrong [seen, docs/wgmma.md]")
    if desc.swizzle != WgmmaSwizzle.NONE and desc.start % K_BYTES:
        raise WgmmaError("swizzle_alignment", f"{parameter}.start", desc.start,
                         f"start on a multiple of {K_BYTES} B ({desc.start // K_BYTES * K_BYTES})",
                         f"a {desc.span}B-swizzled operand starts at a tile or a 32-B k-step; a start between "
                         "them pairs chunks of two k-steps")
    return value


def check_matches(got: SmemDescriptor, want: SmemDescriptor, *, major: str, parameter: str) -> None:
    """``descriptor_mismatch`` when `got` would read a different tile than `want` (fields wgmma ignores aside)."""
    for name, d in (("got", got), ("want", want)):
        if not isinstance(d, SmemDescriptor):
            raise WgmmaError("descriptor_type", f"{parameter} ({name})", type(d).__name__, "give an SmemDescriptor")
    fields = ["start", "swizzle", "sbo", "base_offset"]
    lbo_read = want.swizzle == WgmmaSwizzle.NONE or major == "MN"
    if lbo_read:
        fields.append("lbo")
    for f in fields:
        g, w = getattr(got, f), getattr(want, f)
        if g != w:
            show = (lambda v: f"{int(v)} ({v.name})") if f == "swizzle" else (lambda v: v)
            raise WgmmaError("descriptor_mismatch", f"{parameter}.{f}", show(g),
                             f"use {f} = {show(w)} (drvtma.wgmma.descriptor_for)",
                             f"the tile its tensor map wrote is read with {f} = {show(w)}; "
                             f"this descriptor gives wrong numbers silently")
