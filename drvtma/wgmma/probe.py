"""Batched wgmma probes: one launch runs many cases (one CTA, one warpgroup each) of one type and N.

A `ProbeGroup` holds what one launch needs: the tensor maps' specs and global bytes for A and B, the shared
region's background bytes, and its `ProbeCase`s (boxes to load, descriptors per k-step relative to the region,
A registers, the initial accumulator, scale-d). `predict(group)` is the oracle's answer; `WgmmaProbe.run(group)`
the H200's, both as (cases, 128, N/2) uint32 accumulator registers. `run` refuses a case whose descriptors break a
rule or do not read the tile its boxes loaded (``descriptor_mismatch``) before any launch, unless
``unchecked=True`` (the fuzz's deliberately wrong descriptors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from ..errors import WgmmaError
from ..runtime.driver import Resource, ScratchBuffers
from ..tma.tiled import oracle as tma_oracle
from ..tma.tiled.encode import encode_tiled
from ..tma.tiled.spec import TensorMapSpec
from . import oracle, rules
from .descriptor import SmemDescriptor
from .dtypes import M, WgmmaType, wgmma_type

if TYPE_CHECKING:
    from ..runtime.kernel import Module
    from ..runtime.status import StatusBuffer

PROBE_SOURCE = "wgmma/wgmma_probe.cu"
PROBE_NS = (8, 16, 24, 32, 48, 80, 128, 256)  # one kernel each; scripts/gen_wgmma_ops.py writes the wrappers
MAX_STEPS = 8
MAX_BOXES = 4
REGION_ALIGN_SLACK = 1024
MAX_REGION_BYTES = 200 * 1024
FLAG_RS, FLAG_SCALE_D, FLAG_TRANS_A, FLAG_TRANS_B = 1, 2, 4, 8

# Mirror of struct WgCase (cu/wgmma/wgmma_probe.cu).
CASE_DTYPE = np.dtype([("desc_a", "<u8", MAX_STEPS), ("desc_b", "<u8", MAX_STEPS),
                       ("a_coords", "<i4", (MAX_BOXES, 4)), ("b_coords", "<i4", (MAX_BOXES, 4)),
                       ("a_dst", "<u4", MAX_BOXES), ("b_dst", "<u4", MAX_BOXES),
                       ("a_boxes", "<u4"), ("b_boxes", "<u4"), ("steps", "<u4"), ("flags", "<u4"),
                       ("tx_bytes", "<u4"), ("a_rank", "<u4"), ("b_rank", "<u4"), ("pad", "<u4")])


@dataclass
class Box:
    """One TMA load: coordinates in NumPy order and the destination, bytes into the region."""

    coords: tuple[int, ...]
    dst: int


@dataclass
class ProbeCase:
    """One CTA. Descriptors are relative to the region; `expected_*` are what descriptor_for gives for the boxes
    (None where no tile was loaded for that operand, e.g. a hand-made gather probe)."""

    steps: int
    desc_b: list[SmemDescriptor]
    desc_a: list[SmemDescriptor] | None = None  # None: A from registers
    a_bits: np.ndarray | None = None  # (steps, 64, K) raw A for the register form
    major_a: str = "K"
    major_b: str = "K"
    a_boxes: list[Box] = field(default_factory=list)
    b_boxes: list[Box] = field(default_factory=list)
    c_init: np.ndarray | None = None  # (64, N) float32 / int32
    scale_d: bool = True
    expected_a: list[SmemDescriptor] | None = None
    expected_b: list[SmemDescriptor] | None = None
    label: str = "valid"  # or the kind of deliberate error

    @property
    def rs(self) -> bool:
        return self.desc_a is None


@dataclass
class ProbeGroup:
    """Everything one launch needs. `a_bytes` / `b_bytes` are the global bytes from each spec's base address."""

    dtype: WgmmaType
    n: int
    background: np.ndarray  # uint8, the region's bytes before any load
    cases: list[ProbeCase]
    spec_a: TensorMapSpec | None = None
    spec_b: TensorMapSpec | None = None
    a_bytes: np.ndarray | None = None
    b_bytes: np.ndarray | None = None
    plans: dict = field(default_factory=dict)  # how the fuzz laid the operands out (drvtma.wgmma.cases)

    def __post_init__(self):
        self.dtype = wgmma_type(self.dtype)

    @property
    def region_bytes(self) -> int:
        return int(self.background.size)


def check_case(group: ProbeGroup, case: ProbeCase, index: int = 0) -> None:
    """Every rule a case must pass before it reaches the GPU (what `run` does unless unchecked)."""
    t = group.dtype
    rules.check_shape(t, group.n)
    rules.check_operands(t, case.major_a, case.major_b, a_from_registers=case.rs)
    if not 1 <= case.steps <= MAX_STEPS:
        raise WgmmaError("k_step_range", f"cases[{index}].steps", case.steps, f"use 1..{MAX_STEPS} k-steps")
    for name, descs, want, major in (("desc_a", case.desc_a, case.expected_a, case.major_a),
                                     ("desc_b", case.desc_b, case.expected_b, case.major_b)):
        if descs is None:
            continue
        for s, d in enumerate(descs[:case.steps]):
            where = f"cases[{index}].{name}[{s}]"
            rules.check_descriptor(d, parameter=where)
            if want is not None:
                rules.check_matches(d, want[s], major=major, parameter=where)


def _image(group: ProbeGroup, case: ProbeCase) -> np.ndarray:
    """The region after the case's loads (the TMA oracle, swizzle on region-relative = absolute mod 1024)."""
    img = np.array(group.background, dtype=np.uint8, copy=True)
    for spec, raw, boxes in ((group.spec_a, group.a_bytes, case.a_boxes), (group.spec_b, group.b_bytes, case.b_boxes)):
        for box in boxes:
            spec = cast(TensorMapSpec, spec)  # boxes come with their operand's spec
            vals = tma_oracle.box_values(spec, raw, [box.coords]).reshape(-1).view(np.uint8)
            where = tma_oracle.box_row_addresses(spec, box.dst).reshape(-1)
            img[where] = vals
    return img


def operand_tiles(group: ProbeGroup, case: ProbeCase, model: str | None = None):
    """([A_s], [B_s]) raw bits each k-step reads, per the oracle."""
    t, img = group.dtype, _image(group, case)
    b = [oracle.gather(img, 0, d, t, group.n, case.major_b, model) for d in case.desc_b[:case.steps]]
    if case.rs:
        a = [cast(np.ndarray, case.a_bits)[s] for s in range(case.steps)]  # the register form carries A's bits
    else:
        assert case.desc_a is not None  # not rs
        a = [oracle.gather(img, 0, d, t, M, case.major_a, model) for d in case.desc_a[:case.steps]]
    return a, b


def predict_case(group: ProbeGroup, case: ProbeCase, model: str | None = None) -> np.ndarray:
    """(128, N/2) uint32 accumulator registers the oracle expects."""
    a, b = operand_tiles(group, case, model)
    d = oracle.mma(a, b, group.dtype, c=case.c_init, scale_d=case.scale_d)
    return oracle.matrix_to_fragments(oracle.accumulator_bits(d, group.dtype), group.n)


def predict(group: ProbeGroup, model: str | None = None) -> np.ndarray:
    return np.stack([predict_case(group, c, model) for c in group.cases])


def _case_records(group: ProbeGroup) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t, n = group.dtype, group.n
    recs = np.zeros(len(group.cases), dtype=CASE_DTYPE)
    a_regs = np.zeros((len(group.cases), MAX_STEPS, 128, 4), dtype=np.uint32)
    c_init = np.zeros((len(group.cases), 128, n // 2), dtype=np.uint32)
    for i, c in enumerate(group.cases):
        r = recs[i]
        r["steps"] = c.steps
        r["desc_b"][:c.steps] = [d.encode() for d in c.desc_b[:c.steps]]
        if c.rs:  # the register form carries A's bits
            for s in range(c.steps):
                a_regs[i, s] = oracle.pack_a_registers(cast(np.ndarray, c.a_bits)[s], t)
        else:
            assert c.desc_a is not None  # not rs
            r["desc_a"][:c.steps] = [d.encode() for d in c.desc_a[:c.steps]]
        for prefix, boxes, spec in (("a", c.a_boxes, group.spec_a), ("b", c.b_boxes, group.spec_b)):
            if len(boxes) > MAX_BOXES:
                raise WgmmaError("box_count", f"{prefix}_boxes", len(boxes), f"use at most {MAX_BOXES} boxes")
            r[f"{prefix}_boxes"] = len(boxes)
            for j, box in enumerate(boxes):
                spec = cast(TensorMapSpec, spec)  # boxes come with their operand's spec
                tma_oracle.check_load_coordinates(spec, [box.coords])
                if box.dst % 128 or box.dst + spec.smem_bytes > group.region_bytes:
                    raise WgmmaError("box_dst", f"{prefix}_boxes[{j}].dst", box.dst,
                                     "use a 128-byte multiple that keeps the box inside the region")
                r[f"{prefix}_coords"][j, :spec.rank] = spec.tma_coordinates(box.coords)
                r[f"{prefix}_dst"][j] = box.dst
                r["tx_bytes"] += spec.expect_tx_bytes
            if spec is not None:
                r[f"{prefix}_rank"] = spec.rank
        r["flags"] = ((FLAG_RS if c.rs else 0) | (FLAG_SCALE_D if c.scale_d else 0)
                      | (FLAG_TRANS_A if c.major_a == "MN" else 0) | (FLAG_TRANS_B if c.major_b == "MN" else 0))
        if c.c_init is not None:
            c_init[i] = oracle.matrix_to_fragments(oracle.accumulator_bits(c.c_init, t), n)
    return recs, a_regs, c_init


class WgmmaProbe(Resource):
    """Compiled probe modules (one per type, loaded on first use), the launch of a group and its device scratch."""

    def __init__(self, *, extra_defines: dict | None = None):
        """`extra_defines` go on top of the type's (tests: a short wait timeout, a forced timeout)."""
        self.status: StatusBuffer | None = None  # made on the first launch: refusing a case needs no GPU
        self.scratch = ScratchBuffers()  # operands, cases and results, reused launch after launch
        self._modules: dict[str, Module] = {}
        self.extra_defines = dict(extra_defines or {})

    def kernel(self, dtype, n: int):
        from ..runtime.kernel import load_module

        t = wgmma_type(dtype)
        if t.name not in self._modules:
            self._modules[t.name] = load_module(PROBE_SOURCE, defines={f"DRVTMA_WGMMA_{t.name.upper()}": 1,
                                                                       "WG_T": t.name, **self.extra_defines})
        return self._modules[t.name].kernel(f"wgmma_probe_n{n}")

    def _upload(self, name: str, arr: np.ndarray):
        """The scratch buffer `name` holding arr's bytes from its start."""
        arr = np.ascontiguousarray(arr)
        buf = self.scratch.get(name, arr.nbytes)
        if arr.nbytes:
            buf.upload(arr)
        return buf

    def run(self, group: ProbeGroup, *, unchecked: bool = False, poison: int = 0x7FBADBAD):
        """(cases, 128, N/2) uint32 registers and the region's shared address per case."""
        if group.n not in PROBE_NS:
            raise WgmmaError("shape_n", "N", group.n, f"the probe kernels are built for N in {PROBE_NS}")
        if group.region_bytes % 1024 or group.region_bytes > MAX_REGION_BYTES:
            raise WgmmaError("region_bytes", "background", group.region_bytes,
                             f"use a multiple of 1024 up to {MAX_REGION_BYTES} B")
        if not unchecked:
            for i, c in enumerate(group.cases):
                check_case(group, c, i)
        recs, a_regs, c_init = _case_records(group)
        kernel = self.kernel(group.dtype, group.n)
        maps = []
        for name, spec, raw in (("a", group.spec_a, group.a_bytes), ("b", group.spec_b, group.b_bytes)):
            if spec is None:  # no loads for this operand: any valid map fills the parameter
                spec, raw = TensorMapSpec.create("uint8", (16, 16), (16, 16)), np.zeros(256, np.uint8)
            maps.append(encode_tiled(spec, self._upload(name, np.asarray(raw, dtype=np.uint8))))
        out = self.scratch.get("out", recs.size * 128 * (group.n // 2) * 4)
        out.fill_u32(poison)
        addr = self._upload("addr", np.zeros(len(recs), np.uint32))
        if self.status is None:
            from ..runtime.status import StatusBuffer

            self.status = StatusBuffer()
        self.status.reset()
        kernel.launch(maps[0], maps[1], self._upload("cases", recs), self._upload("a_regs", a_regs),
                      self._upload("c_init", c_init), self._upload("background", group.background),
                      group.region_bytes, out, addr, self.status, grid=(len(recs), 1, 1), block=(128, 1, 1),
                      shared_mem=group.region_bytes + REGION_ALIGN_SLACK)
        got = out.download(np.uint32, (len(recs), 128, group.n // 2))
        where = addr.download(np.uint32, (len(recs),))
        self.status.check(kernel.name)
        return got, where

    def _parts(self) -> tuple:
        return self.scratch, self.status
