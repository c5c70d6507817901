"""Probe cases: exactly representable data, operand tiles loaded through tensor maps, deliberately wrong
descriptors, and gather probes that show which shared byte each element of B comes from.

`operand_plan` lays one operand out the way docs/wgmma.md describes (every swizzle, K- or MN-major, boxes narrower
than the span, several k-steps across panels) as one TMA box of a rank-3 view; `random_group` draws a whole
launch; `mutate` breaks a descriptor in one of `WRONG_KINDS`; `gather_group` / `decode_gather` read B's
address map back through an identity A.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tma.tiled.spec import SWIZZLE_SPAN_BYTES, Swizzle, TensorMapSpec
from . import oracle
from .descriptor import SmemDescriptor, WgmmaSwizzle, to_tma_swizzle
from .dtypes import ALL_TYPES, K_BYTES, M, WgmmaType, wgmma_type
from .layout import descriptor_for
from .probe import MAX_STEPS, PROBE_NS, Box, ProbeCase, ProbeGroup

WRONG_KINDS = ("swizzle_code", "tma_enum", "lbo_sbo_swap", "lbo_plus16", "sbo_plus16", "sbo_minus16",
               "start_shift", "base_offset", "ptx_base_offset")
MARGIN = 4096  # region bytes before and after the tiles, so most wrong descriptors still read inside it


def exact_bits(dtype, rng: np.random.Generator, shape) -> np.ndarray:
    """Random values whose products and sums wgmma computes exactly: small integers times powers of two."""
    t = wgmma_type(dtype)
    if t.name == "s8":
        return rng.integers(-128, 128, shape).astype(np.int8).view(np.uint8)
    if t.name == "u8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    lim, scales = (8, (0.5, 1.0, 2.0)) if t.itemsize >= 2 else (4, (0.5, 1.0))
    v = rng.integers(-lim, lim + 1, shape) * rng.choice(scales, shape)
    return t.to_bits(v)


def exact_c(dtype, rng: np.random.Generator, n: int) -> np.ndarray:
    t = wgmma_type(dtype)
    if t.is_int:
        return rng.integers(-(1 << 20), 1 << 20, (M, n)).astype(np.int32)
    return rng.integers(-64, 65, (M, n)).astype(np.float32)


@dataclass
class OperandPlan:
    """One operand's tensor map (rank-3 view, one box), global bytes, and where boxes may go."""

    spec: TensorMapSpec
    raw: np.ndarray
    major: str
    rows: int  # MN extent read (64 for A, N for B)
    steps: int
    coord_ranges: tuple[int, int]  # random ranges of the two outer coordinates
    atom: int  # alignment the tile needs (8 x span, 128 without swizzle)
    logical: tuple[int, int]  # the global matrix: K-major (rows, K), MN-major (K, MN), row-major
    outer: int  # elements per step of the view's first coordinate (kb for K-major, the MN atom for MN-major)
    k_elems: int  # K elements per k-step

    def logical_tile(self, box: Box, step: int) -> np.ndarray:
        """(rows, K) raw bits k-step `step` of a tile loaded by `box` must read (the global matrix itself)."""
        carrier = {1: np.uint8, 2: np.uint16, 4: np.uint32}[self.spec.itemsize]
        g = self.raw.view(carrier).reshape(self.logical)
        c0, c1 = box.coords[0], box.coords[1]
        k0 = step * self.k_elems
        if self.major == "K":
            return g[c1:c1 + self.rows, c0 * self.outer + k0:c0 * self.outer + k0 + self.k_elems]
        return g[c1 + k0:c1 + k0 + self.k_elems, c0 * self.outer:c0 * self.outer + self.rows].T

    def box(self, rng, dst: int) -> Box:
        return Box((int(rng.integers(0, self.coord_ranges[0] + 1)), int(rng.integers(0, self.coord_ranges[1] + 1)),
                    0), dst)

    def descriptors(self, dst: int, operand: str, dtype) -> list[SmemDescriptor]:
        return descriptor_for(self.spec, dst, operand, self.major, dtype=dtype, n=self.rows)[:self.steps]


def operand_plan(rng, dtype, rows: int, steps: int, major: str, tma_swizzle, narrow_bytes: int | None = None,
                 extra: int = 2) -> OperandPlan:
    """A tile of `rows` x `steps` k-steps, K- or MN-major, as one box of a rank-3 view of a random global tensor."""
    t = wgmma_type(dtype)
    e = t.itemsize
    swz = Swizzle(tma_swizzle)
    span = SWIZZLE_SPAN_BYTES[swz] or 16
    if major == "K":
        inner = span if narrow_bytes is None or swz == Swizzle.NONE else narrow_bytes
        kb = inner // e
        panels = 2 * steps if swz == Swizzle.NONE else -(-steps * K_BYTES // inner)
        g_rows, g_k = rows + 8 * extra, (panels + extra) * kb
        shape, strides = (g_k // kb, g_rows, kb), (inner, g_k * e, e)
        box = (panels, rows, kb)
        ranges = (extra, 8 * extra)
        total, logical, outer = g_rows * g_k, (g_rows, g_k), kb
    else:
        atom = span // e
        cols = -(-rows // atom)
        bk = steps * (K_BYTES // e)
        g_mn, g_k = (cols + extra) * atom, bk + 8 * extra
        shape, strides = (g_mn // atom, g_k, atom), (span, g_mn * e, e)
        box = (cols, bk, atom)
        ranges = (extra, 8 * extra)
        total, logical, outer = g_mn * g_k, (g_k, g_mn), atom
    raw = exact_bits(t, rng, total).view(np.uint8)
    spec = TensorMapSpec.create(t.tma_dtype, shape, box, strides_bytes=strides, swizzle=swz)
    spec.validate()
    return OperandPlan(spec, raw, major, rows, steps, ranges, 8 * span if swz != Swizzle.NONE else 128, logical,
                       outer, t.k)


def mutate(desc: list[SmemDescriptor], kind: str, rng) -> tuple[list[SmemDescriptor], int]:
    """Break every k-step's descriptor the same way; returns them and the box shift (unaligned_tile only)."""
    shift = 0
    d0 = desc[0]
    if kind == "swizzle_code":
        new = int(rng.choice([c for c in range(4) if c != int(d0.swizzle)]))
        return [d.replace(swizzle=WgmmaSwizzle(new)) for d in desc], 0
    if kind == "tma_enum":  # the CUtensorMapSwizzle value written into bits 62-63 (pitfall 1)
        tma = int(to_tma_swizzle(d0.swizzle))
        if tma == int(d0.swizzle):  # none and 64B agree: fall back to another code
            return mutate(desc, "swizzle_code", rng)
        return [d.replace(swizzle=WgmmaSwizzle(tma)) for d in desc], 0
    if kind == "lbo_sbo_swap":
        if d0.lbo == d0.sbo:
            return mutate(desc, "sbo_plus16", rng)
        return [d.replace(lbo=d.sbo, sbo=d.lbo) for d in desc], 0
    if kind == "lbo_plus16":
        return [d.replace(lbo=d.lbo + 16) for d in desc], 0
    if kind == "sbo_plus16":
        return [d.replace(sbo=d.sbo + 16) for d in desc], 0
    if kind == "sbo_minus16":
        return [d.replace(sbo=max(d.sbo - 16, 0)) for d in desc], 0
    if kind == "start_shift":
        delta = 16 * int(rng.choice([-7, -5, -3, -2, -1, 1, 2, 3, 5, 7, 8, 16]))
        return [d.replace(start=d.start + delta) for d in desc], 0
    if kind == "base_offset":
        bo = int(rng.integers(1, 8))
        return [d.replace(base_offset=bo) for d in desc], 0
    if kind == "ptx_base_offset":  # a tile off its pattern boundary, base offset as PTX's formula gives it
        if d0.swizzle == WgmmaSwizzle.NONE:
            return mutate(desc, "base_offset", rng)
        j = int(rng.integers(1, d0.span // 16))  # 1..7 for 128B, 1..3 for 64B, 1 for 32B
        shift = 128 * j
        bo = ((d0.start + shift) >> 7) & 7
        if bo % (d0.span // 16) == 0:  # the formula gives 0 (or a multiple of the pattern): shift once more
            shift, bo = shift + 128, ((d0.start + shift + 128) >> 7) & 7
        return [d.replace(start=d.start + shift, base_offset=bo) for d in desc], shift
    raise ValueError(f"unknown wrong-descriptor kind {kind!r}")


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


def random_group(rng, dtype, *, n: int | None = None, cases: int = 32, wrong_fraction: float = 0.15,
                 config: dict | None = None) -> ProbeGroup:
    """One launch: a random layout (form, majorness, swizzles, k-steps, narrow boxes) and `cases` CTAs with their
    own data, tile placement, scale-d, and for about `wrong_fraction` of them a deliberately wrong descriptor."""
    t = wgmma_type(dtype)
    cfg = dict(config or {})
    n = n or int(rng.choice([v for v in PROBE_NS if v in t.ns]))
    rs = cfg.get("rs", bool(rng.random() < 0.3))
    majors = ("K", "MN") if t.transposable else ("K",)
    major_a = "K" if rs else cfg.get("major_a", str(rng.choice(majors)))
    major_b = cfg.get("major_b", str(rng.choice(majors)))
    steps = cfg.get("steps", int(rng.integers(1, MAX_STEPS + 1)))
    plans = {}
    for op, rows, major in (("A", M, major_a), ("B", n, major_b)):
        if op == "A" and rs:
            continue
        swz = Swizzle(cfg.get(f"swizzle_{op.lower()}", int(rng.integers(0, 4))))
        narrow = None
        span = SWIZZLE_SPAN_BYTES[swz]
        if major == "K" and span > 32 and rng.random() < 0.3:
            narrow = int(rng.choice([w for w in (32, 64) if w < span]))
        plans[op] = operand_plan(rng, t, rows, steps, major, swz, narrow)
    # region: margin | A slot | B slot | margin; each slot leaves room to shift the tile by whole atoms
    slots, offset = {}, MARGIN
    for op, plan in plans.items():
        slot = _round_up(plan.spec.smem_bytes, 1024) + 2048
        slots[op] = (offset, slot)
        offset += slot
    region = _round_up(offset + MARGIN, 1024)
    background = exact_bits(t, rng, region // t.itemsize).view(np.uint8)
    out = []
    for _ in range(cases):
        wrong = rng.random() < wrong_fraction
        case = _random_case(rng, t, n, steps, rs, major_a, major_b, plans, slots, region, wrong)
        out.append(case)
    return ProbeGroup(t, n, background, out, spec_a=plans["A"].spec if "A" in plans else None,
                      spec_b=plans["B"].spec, a_bytes=plans["A"].raw if "A" in plans else None,
                      b_bytes=plans["B"].raw, plans=plans)


def fuzz_group(rng, g_index: int, *, cases: int, wrong_fraction: float) -> ProbeGroup:
    """Launch `g_index` of the GPU fuzz: types in turn, each type's N in turn, and per round of types the form,
    majors and swizzles on a rotation (not drawn), so every pair of them meets within a few rounds."""
    t = ALL_TYPES[g_index % len(ALL_TYPES)]
    j = g_index // len(ALL_TYPES)  # the round
    ns = [v for v in PROBE_NS if v in t.ns]
    rs = j % 3 == 2
    d = g_index % len(ALL_TYPES)
    ss_round = j - j // 3  # rounds with A in shared memory so far: A's swizzle turns with them
    cfg: dict[str, bool | int | str] = {"rs": rs, "swizzle_b": (j + d) % 4, "swizzle_a": (ss_round + 2 + d) % 4}
    if t.transposable:
        cfg["major_b"] = "MN" if (j // 4 + j) % 2 else "K"
        cfg["major_a"] = "MN" if (ss_round // 4 + ss_round // 2) % 2 and not rs else "K"
    return random_group(rng, t, n=ns[j % len(ns)], cases=cases, wrong_fraction=wrong_fraction, config=cfg)


def _random_case(rng, t: WgmmaType, n, steps, rs, major_a, major_b, plans, slots, region, wrong) -> ProbeCase:
    boxes, descs, expected = {}, {}, {}
    for op, plan in plans.items():
        start, slot = slots[op]
        # shifted bases: whole atoms, and for a third of the cases any 128-B line (TMA's own alignment)
        unit = 128 if rng.random() < 0.35 else plan.atom
        room = (slot - plan.spec.smem_bytes) // unit
        dst = start + unit * int(rng.integers(0, room + 1)) if room > 0 else start
        boxes[op] = [plan.box(rng, dst)]
        descs[op] = expected[op] = plan.descriptors(dst, op, t)
    label = "valid"
    if wrong:
        for _ in range(12):
            op = str(rng.choice(sorted(plans)))
            kind = str(rng.choice(WRONG_KINDS))
            new, shift = mutate(expected[op], kind, rng)
            if any(d.start < 0 or d.start >= region for d in new):
                continue
            rows = M if op == "A" else n
            major = major_a if op == "A" else major_b
            ext = [oracle.read_extent(d, t, rows, major, model) for d in new
                   for model in oracle.BASE_OFFSET_MODELS]  # inside the region whatever the base offset does
            lo, hi = min(e[0] for e in ext), max(e[1] for e in ext)
            if lo < 0 or hi > region or boxes[op][0].dst + shift + plans[op].spec.smem_bytes > region:
                continue
            if new == expected[op]:
                continue
            descs[op] = new
            if shift:
                boxes[op] = [Box(boxes[op][0].coords, boxes[op][0].dst + shift)]
                expected[op] = None  # the tile itself is misplaced: no descriptor_for answer to compare with
            label = f"{kind}:{op}"
            break
    a_bits = None
    if rs:
        a_bits = np.stack([exact_bits(t, rng, (M, t.k)) for _ in range(steps)])
    return ProbeCase(steps=steps, desc_b=descs["B"], desc_a=descs.get("A"), a_bits=a_bits, major_a=major_a,
                     major_b=major_b, a_boxes=boxes.get("A", []), b_boxes=boxes["B"], c_init=exact_c(t, rng, n),
                     scale_d=bool(rng.random() < 0.5), expected_a=expected.get("A"), expected_b=expected["B"],
                     label=label)


# ---------------------------------------------------------------------------------------------- gather probes

GATHER_REGION = 64 * 1024  # f16 slots 0..32767: slot = hi * 1024 + lo, both exact in f16


def gather_groups(descs: list[SmemDescriptor], major: str, n: int) -> tuple[ProbeGroup, ProbeGroup]:
    """Two launches (low and high slot digits) that read B through each descriptor with A = identity rows:
    D[m, j] = B[j, m % 16], so D names the 2-byte slot every B element came from."""
    t = wgmma_type("f16")
    slots = np.arange(GATHER_REGION // 2)
    eye = np.zeros((M, t.k), dtype=np.float16)
    eye[np.arange(M), np.arange(M) % t.k] = 1
    a_bits = eye.view(np.uint16)[None]
    groups = []
    for digit in (slots % 1024, slots // 1024):
        bg = digit.astype(np.float16).view(np.uint8)
        cases = [ProbeCase(steps=1, desc_b=[d], a_bits=a_bits, major_b=major, c_init=np.zeros((M, n), np.float32),
                           scale_d=False, label="gather") for d in descs]
        groups.append(ProbeGroup(t, n, bg, cases))
    return groups[0], groups[1]


def decode_gather(lo_regs, hi_regs, n: int) -> np.ndarray:
    """(cases, n, 16) byte addresses (region-relative) of B's elements from the two launches' registers."""
    out = []
    for lo, hi in zip(lo_regs, hi_regs):
        d_lo = oracle.fragments_to_matrix(np.asarray(lo, np.uint32).view(np.float32), n)
        d_hi = oracle.fragments_to_matrix(np.asarray(hi, np.uint32).view(np.float32), n)
        slot = d_hi[:16].T.astype(np.int64) * 1024 + d_lo[:16].T.astype(np.int64)
        out.append(2 * slot)
    return np.stack(out)
