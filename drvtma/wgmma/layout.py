"""From a tensor map to the wgmma descriptors that read what it loaded.

`descriptor_for(spec, smem_address, operand, major, k_step)` reads the box geometry of a TensorMapSpec (the
shared-memory image TMA writes: rows of `row_pitch_bytes`, swizzled on absolute addresses) and gives the
descriptor of one k-step, or of every k-step the tile holds (k_step=None), the jump to the next K panel included.

Layouts it understands (NumPy order, innermost last; a box lands at `smem_address`, further boxes `panels` of
them back to back, each `spec.smem_bytes` long):
- K-major, swizzled: box (R, kb) with kb*e a multiple of 32 B (kb*e < span is fine: the rest is padding);
  rank 3 (P, R, kb) puts P K panels in one box. SBO = 8 x span, LBO unused (16 B written).
- K-major, no swizzle: box (R, 16 B) per K chunk, or rank 3 (C, R, 16 B): LBO = R x 16 B, SBO = 128 B.
- MN-major (f16/bf16), swizzled: box (BK, span B) per MN atom, or rank 3 (J, BK, span B):
  LBO = BK x span (next MN atom), SBO = 8 x span (next 8 K rows).
- MN-major, no swizzle: box (BK, 16 B) or rank 3 (J, BK, 16 B): SBO = BK x 16 B (next MN chunk), LBO = 128 B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import WgmmaError, as_int
from ..tma.tiled.spec import Interleave, TensorMapSpec
from .descriptor import SPAN_BYTES, SmemDescriptor, WgmmaSwizzle, from_tma_swizzle, to_tma_swizzle
from .dtypes import K_BYTES, M, wgmma_type
from .rules import check_operands

TMA_SMEM_ALIGNMENT = 128


@dataclass(frozen=True)
class TileLayout:
    """How a K x MN tile sits in shared memory, as descriptor_for sees it."""

    major: str
    swizzle: WgmmaSwizzle
    itemsize: int
    rows: int  # K-major: MN rows per panel; MN-major: K rows per atom column
    panels: int  # K-major: K panels (or 16-B chunks without swizzle); MN-major: MN atoms
    inner_bytes: int  # written bytes of one row
    panel_bytes: int  # distance between panels / atoms
    mn_extent: int  # MN elements the layout holds
    steps: int  # k-steps of 32 B the layout holds

    @property
    def span(self) -> int:
        return SPAN_BYTES[self.swizzle]


def tile_layout(spec: TensorMapSpec, major: str, *, panels: int = 1, dtype=None) -> TileLayout:
    """The layout of `panels` boxes of `spec` placed back to back; refuses specs no descriptor can read."""
    if not isinstance(spec, TensorMapSpec):
        raise WgmmaError("spec_type", "tmap_spec", type(spec).__name__, "give the TensorMapSpec that loads the tile")
    panels = as_int(panels, "panels", error=WgmmaError, rule="spec_rank", lo=1)
    if major not in ("K", "MN"):
        raise WgmmaError("operand", "major", major, "use 'K' or 'MN'")
    if spec.interleave != Interleave.NONE:
        raise WgmmaError("spec_interleave", "interleave", spec.interleave, "use INTERLEAVE_NONE",
                         "wgmma reads the canonical layouts only")
    assert spec.element_strides is not None  # __post_init__ fills it
    if any(e != 1 for e in spec.element_strides):
        raise WgmmaError("spec_element_strides", "element_strides", spec.element_strides, "use element strides 1",
                         "strided boxes leave the tile sparse")
    e = spec.itemsize
    if dtype is not None:
        t = wgmma_type(dtype)
        if t.itemsize != e:
            raise WgmmaError("spec_dtype_size", "dtype", spec.dtype.name,
                             f"use a {t.itemsize}-byte tensor-map type for {t.name} (e.g. {t.tma_dtype})",
                             f"the map's elements are {e} B")
        check_operands(t, major_a=major, major_b=major)
    if e not in (1, 2, 4):
        raise WgmmaError("spec_dtype_size", "dtype", spec.dtype.name, "use a 1, 2 or 4-byte type",
                         "wgmma operands are 8, 16 or 32 bits")
    if spec.rank not in (2, 3) or (spec.rank == 3 and panels != 1):
        raise WgmmaError("spec_rank", "box", spec.box, "use a rank-2 box (rows, inner), or rank 3 (panels, rows, "
                         "inner) with panels=1", "descriptor_for reads 2-D tiles")
    swz = from_tma_swizzle(spec.swizzle)
    span = SPAN_BYTES[swz]
    inner = spec.box[-1] * e
    if spec.rank == 3:
        count, rows = spec.box[0], spec.box[1]
    else:
        count, rows = panels, spec.box[0]
    panel_bytes = rows * spec.row_pitch_bytes
    if major == "K":
        if swz == WgmmaSwizzle.NONE and inner != 16:
            raise WgmmaError("box_inner_span", "box[-1]", spec.box[-1],
                             f"use an inner box of {16 // e} elements (16 B), one box or panel per 16-B K chunk",
                             "an unswizzled K-major operand needs its 8 rows of a core matrix 16 B apart; "
                             f"rows of {inner} B are not")
        if swz != WgmmaSwizzle.NONE and inner % K_BYTES:
            raise WgmmaError("box_inner_kstep", "box[-1]", spec.box[-1],
                             f"use an inner box that is a multiple of {K_BYTES // e} elements (32 B)",
                             f"a k-step reads 32 B of K; rows of {inner} B end inside one")
        steps = count // 2 if swz == WgmmaSwizzle.NONE else count * (inner // K_BYTES)
        mn_extent = rows
    else:
        if inner != span:
            raise WgmmaError("box_inner_span", "box[-1]", spec.box[-1],
                             f"use an inner box of {span // e} elements ({span} B), one box per MN atom",
                             f"an MN-major atom is {span} B of MN; a box of {inner} B leaves gaps the "
                             "instruction reads")
        steps = rows // (K_BYTES // e)
        mn_extent = count * inner // e
    return TileLayout(major, swz, e, rows, count, inner, panel_bytes, mn_extent, steps)


def descriptor_for(tmap_spec: TensorMapSpec, smem_address: int, operand: str, major: str, k_step: int | None = None,
                   *, dtype=None, n: int | None = None, panels: int = 1):
    """The descriptor of k-step `k_step` (or the list of all k-steps) that reads the tile TMA loaded at
    `smem_address` with `tmap_spec` as wgmma operand `operand` ("A": 64 rows, "B": `n` rows)."""
    lay = tile_layout(tmap_spec, major, panels=panels, dtype=dtype)
    if operand not in ("A", "B"):
        raise WgmmaError("operand", "operand", operand, "use 'A' or 'B'")
    smem_address = as_int(smem_address, "smem_address", error=WgmmaError, rule="tile_alignment", lo=0)
    n = None if n is None else as_int(n, "n", error=WgmmaError, rule="shape_n", lo=1)
    k_step = None if k_step is None else as_int(k_step, "k_step", error=WgmmaError, rule="k_step_range")
    mn = M if operand == "A" else (lay.mn_extent if n is None else n)
    if mn > lay.mn_extent:
        raise WgmmaError("box_rows", "box", tmap_spec.box,
                         f"load at least {mn} {'rows' if major == 'K' else 'MN elements'} for operand {operand}",
                         f"the tile holds {lay.mn_extent} along MN; operand {operand} reads {mn}")
    if smem_address % TMA_SMEM_ALIGNMENT:
        raise WgmmaError("tile_alignment", "smem_address", smem_address,
                         f"use a 128-byte aligned address ({math.ceil(smem_address / 128) * 128})",
                         "a tensor copy's shared destination is 128-byte aligned; no more is needed: TMA and "
                         "wgmma both swizzle on absolute addresses, so base offset 0 reads the tile [seen]")
    if lay.steps == 0:
        raise WgmmaError("k_step_range", "box", tmap_spec.box, "load at least 32 bytes of K",
                         "the tile holds no complete k-step")
    steps = range(lay.steps) if k_step is None else [k_step]
    out = []
    for s in steps:
        if not 0 <= s < lay.steps:
            raise WgmmaError("k_step_range", "k_step", s, f"use 0..{lay.steps - 1}",
                             f"the tile holds {lay.steps} k-steps of 32 B")
        out.append(_step_descriptor(lay, smem_address, s))
    return out if k_step is None else out[0]


def _step_descriptor(lay: TileLayout, base: int, s: int) -> SmemDescriptor:
    if lay.major == "K":
        if lay.swizzle == WgmmaSwizzle.NONE:
            return SmemDescriptor(base + 2 * s * lay.panel_bytes, lbo=lay.panel_bytes, sbo=128, swizzle=lay.swizzle)
        per_panel = lay.inner_bytes // K_BYTES
        start = base + (s // per_panel) * lay.panel_bytes + (s % per_panel) * K_BYTES
        return SmemDescriptor(start, lbo=16, sbo=8 * lay.span, swizzle=lay.swizzle)
    k_rows = K_BYTES // lay.itemsize
    if lay.swizzle == WgmmaSwizzle.NONE:
        return SmemDescriptor(base + s * k_rows * 16, lbo=128, sbo=lay.panel_bytes, swizzle=lay.swizzle)
    return SmemDescriptor(base + s * k_rows * lay.span, lbo=lay.panel_bytes, sbo=8 * lay.span, swizzle=lay.swizzle)


def spec_for_tile(dtype, major: str, tma_swizzle, mn: int, k: int) -> TensorMapSpec:
    """The tensor map of an MN x K tile (the tile is the whole tensor) laid out for wgmma in one box:
    K-major: a rank-3 view (K panels, MN rows, span or 16 B); MN-major: (MN atoms, K rows, span or 16 B)."""
    t = wgmma_type(dtype)
    e = t.itemsize
    swz = from_tma_swizzle(tma_swizzle)
    span = SPAN_BYTES[swz]
    if major not in ("K", "MN"):
        raise WgmmaError("operand", "major", major, "use 'K' or 'MN'")
    mn = as_int(mn, "mn", error=WgmmaError, rule="box_rows", lo=1)
    k = as_int(k, "k", error=WgmmaError, rule="box_inner_kstep", lo=1)
    if major == "K":
        inner = min(span, k * e)
        if (k * e) % inner:
            raise WgmmaError("box_inner_kstep", "k", k, f"use a K that fills whole {inner}-byte panels")
        shape, strides = (k * e // inner, mn, inner // e), (inner, k * e, e)
    else:
        if (mn * e) % span:
            raise WgmmaError("box_inner_span", "mn", mn, f"use an MN extent that fills whole {span}-byte atoms")
        shape, strides = (mn * e // span, k, span // e), (span, mn * e, e)
    return TensorMapSpec.create(t.tma_dtype, shape, shape, strides_bytes=strides, swizzle=to_tma_swizzle(swz))
