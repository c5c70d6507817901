"""One GEMM configuration (every claim of the async tensor-core article is one field), its derived sizes, and the
compile-time defines of cu/gemm/gemm_ws.cu, descriptors included (from drvtma.wgmma.descriptor_for, never written by
hand). Its named rules are the tables of `drvtma.gemm.rules`; `errors()` and `check()` run them.

Fields and the claim each one answers (drvtma sweep gemm / bench gemm --claims, next session):
- swizzle: "none" / "32B" / "64B" / "128B" for the A and B tiles ("swizzle choice changes performance 10-20%");
- stages: ring depth ("2-4 stages");
- consumers: 1 or 2 consumer warpgroups; setmaxnreg: on / off (producer_regs / consumer_regs when on);
- persistent: one CTA per SM walking tiles, or one tile per CTA; group_m: tile order (1 = row-major);
- inflight: wgmma groups left running while the next stage is issued (0 or 1);
- dtype: bf16 / fp16 / fp8 ("FP8 1.5-2x FP16"); cluster_m: 2 = CTA pairs along M, each loading half of the
  shared B tile and multicasting it into both (fast.cu's 2x1 cluster); cluster_n: 2 = pairs along N sharing A;
- mma: "wgmma", or "mma_sync" (ldmatrix + mma.sync on the same ring: "traditional mma ~50% of peak");
- streamk: the tiles of the last, partial wave cut into equal runs of k-blocks over all SMs (fp32 partial sums
  through a workspace), so no SM idles at the end (what bounds 4096^3: 512 tiles on 132 SMs).
- pingpong: the two consumer warpgroups take whole tiles in turn (CUTLASS's ping-pong schedule), so one's
  epilogue overlaps the other's main loop; swap_ab: C^T = B . A^T, a small M becomes wgmma's N;
- prefetch_maps: the producer prefetches the three tensor maps (prefetch.tensormap) before its first load;
- evict_a, evict_b: the L2 priority ("normal", "first", "last") of A's and B's loads (C's operands, also swapped);
- stmatrix: the epilogue writes the staging buffers with stmatrix (four 8x8 matrices of 16-bit C per instruction;
  swapped, transposed) instead of one 32-bit pair (swapped: one 16-bit value) per store;
- epilogue_buffers: staging buffers (64 rows x 128 B of C) per consumer warpgroup; as many as the warpgroup's
  tile has panels: one barrier pair per tile, and the stores drain while the next main loop runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import cast

import numpy as np

from ..errors import GemmError, as_int, broken_rules
from ..tma.tiled.spec import TensorMapSpec
from ..wgmma import descriptor_for, wgmma_type
from .choice import L2_BYTES, for_problem, problem_extent
from .rules import (  # noqa: F401 (the vocabularies, limits and generated_ns: importable from here too)
    GEMM_RULES,
    IN_DTYPES,
    L2_EVICTS,
    L2_PROMOTIONS,
    MAX_ACC_REGS,
    MAX_CTA_RANGE,
    MAX_STAGES,
    OUT_DTYPES,
    PROBLEM_RULES,
    REGISTERS_PER_SM,
    SMEM_LIMIT,
    SWIZZLES,
    WGMMA_M,
    generated_ns,
)

KERNEL_SOURCE = "gemm/gemm_ws.cu"
KERNEL_NAME = "gemm_ws"
ALIGN_SLACK = 1024  # the ring starts at the first 1024-byte boundary of dynamic shared memory
EPI_BUF_BYTES = 64 * 128  # one staging buffer: 64 rows x 128 B of C

_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "f16": "float16", "half": "float16",
                  "e4m3": "float8_e4m3fn", "fp8": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn",
                  "e5m2": "float8_e5m2", "fp32": "float32", "f32": "float32"}


def dtype_name(value) -> str:
    """The ml_dtypes / NumPy name of a dtype ("bf16" -> "bfloat16", "e4m3" -> "float8_e4m3fn")."""
    name = str(getattr(value, "name", value)).lower()
    return _DTYPE_ALIASES.get(name, name)


_INT_FIELDS = ("bm", "bn", "bk", "stages", "consumers", "producer_regs", "consumer_regs", "group_m", "inflight",
               "cluster_m", "cluster_n", "epilogue_buffers")


@dataclass(frozen=True)
class GemmConfig:
    """C = alpha * A . B^T with A [M, K], B [N, K] K-major; the kernel's compile-time shape and schedule."""

    dtype: str = "bfloat16"
    out_dtype: str = "bfloat16"
    bm: int = 128
    bn: int = 256
    bk: int | None = None  # None: one 128-byte panel of K (64 16-bit elements, 128 fp8)
    stages: int = 4
    consumers: int = 2
    swizzle: str = "128B"
    setmaxnreg: bool = True
    producer_regs: int = 40
    consumer_regs: int = 232
    persistent: bool = True
    group_m: int = 8
    inflight: int = 0
    cluster_m: int = 1
    cluster_n: int = 1
    mma: str = "wgmma"
    streamk: bool = False
    pingpong: bool = False
    swap_ab: bool = False
    prefetch_maps: bool = False
    l2_promotion: str = "none"
    epilogue_buffers: int = 2
    evict_a: str = "normal"
    evict_b: str = "normal"
    stmatrix: bool = False

    def __post_init__(self):
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        object.__setattr__(self, "out_dtype", dtype_name(self.out_dtype))
        # types here, so the rules (check) compare numbers: 2.5 stages or "128" rows are refused by name
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if not (name == "bk" and value is None):
                object.__setattr__(self, name, as_int(value, name, error=GemmError, rule="type"))
        for name in ("setmaxnreg", "persistent", "streamk", "pingpong", "swap_ab", "prefetch_maps", "stmatrix"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise GemmError("type", name, value, f"give {name}=True or False", f"{type(value).__name__} is not "
                                "a bool")
            object.__setattr__(self, name, bool(value))
        for name in ("swizzle", "mma", "l2_promotion", "evict_a", "evict_b"):
            if not isinstance(getattr(self, name), str):
                raise GemmError("type", name, getattr(self, name), "give the name as text (e.g. swizzle='128B', "
                                "mma='wgmma')")

    def with_(self, **changes) -> GemmConfig:
        return replace(self, **changes)

    # ---- derived geometry
    @property
    def wgmma(self):
        return wgmma_type(IN_DTYPES[self.dtype])

    @property
    def itemsize(self) -> int:
        return self.wgmma.itemsize

    @property
    def out_itemsize(self) -> int:
        return OUT_DTYPES[self.out_dtype][1]

    @property
    def k_tile(self) -> int:
        return self.bk if self.bk is not None else 128 // self.itemsize

    @property
    def span(self) -> int:
        """Bytes of K one TMA box holds: the swizzle span (16 B without swizzle: one core-matrix column)."""
        return {"none": 16, "32B": 32, "64B": 64, "128B": 128}[self.swizzle]

    @property
    def panel_elems(self) -> int:
        return self.span // self.itemsize

    @property
    def panels(self) -> int:
        return self.k_tile // self.panel_elems

    @property
    def tile_wgs(self) -> int:
        """Consumer warpgroups that share one tile (ping-pong: each has whole tiles of its own)."""
        return 1 if self.pingpong else self.consumers

    @property
    def wg_rows(self) -> int:
        return self.bm // self.tile_wgs

    @property
    def m_atoms(self) -> int:
        return self.wg_rows // WGMMA_M

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    def box_spec(self, operand: str) -> TensorMapSpec:
        """The box one TMA load of A (BM rows) or B (BN rows) delivers: rows x one panel of K."""
        rows = self.bm if operand == "A" else self.bn
        return TensorMapSpec.create(self.wgmma.tma_dtype, (rows, self.panel_elems), (rows, self.panel_elems),
                                    swizzle=SWIZZLES[self.swizzle])

    # Computed once per configuration (it is frozen): the byte counts come from validated TensorMapSpecs, too slow
    # to rebuild at every launch, whose host time must stay inside the stream hold (docs/gemm.md, "The slow runs").
    @cached_property
    def a_bytes(self) -> int:
        return self.box_spec("A").smem_bytes * self.panels

    @cached_property
    def stage_bytes(self) -> int:
        return self.a_bytes + self.box_spec("B").smem_bytes * self.panels

    @cached_property
    def tx_bytes(self) -> int:
        return self.panels * (self.box_spec("A").expect_tx_bytes + self.box_spec("B").expect_tx_bytes)

    @property
    def epilogue_width(self) -> int:
        """Columns of the tile one staging panel (and one TMA store) takes: 128 B of C's row, 64 rows; swapped, the
        tile's columns are C's rows: up to 64 of them, each 128 B (64 columns of C) wide."""
        return min(self.bn, 64) if self.swap_ab else 128 // self.out_itemsize

    @property
    def epilogue_panels(self) -> int:
        """Staging panels of one warpgroup's tile."""
        return self.m_atoms * (self.bn // self.epilogue_width)

    @property
    def beside_ring_bytes(self) -> int:
        """Dynamic shared memory besides the ring: alignment slack, the staging buffers of every consumer."""
        return ALIGN_SLACK + self.consumers * self.epilogue_buffers * EPI_BUF_BYTES

    def stages_that_fit(self) -> int:
        """The deepest ring (at most MAX_STAGES) of this tile that fits in shared memory beside the staging buffers."""
        return max(1, min(MAX_STAGES, (SMEM_LIMIT - self.beside_ring_bytes) // self.stage_bytes))

    @cached_property
    def smem_bytes(self) -> int:
        """Dynamic shared memory of one CTA: alignment slack, the ring, the staging buffers."""
        return self.beside_ring_bytes + self.stages * self.stage_bytes

    # ---- rules
    def check(self) -> GemmConfig:
        """Raise the first GemmError (rule named); return self when the kernel can take this configuration."""
        errors = self.errors()
        if errors:
            raise errors[0]
        return self

    def errors(self) -> list[GemmError]:
        """Every broken rule of `rules.GEMM_RULES`, in table order (a broken gate, such as an unknown dtype, ends
        the list: what follows reads what it vouches for)."""
        return cast(list[GemmError], broken_rules(GEMM_RULES, self))  # the GEMM rules yield GemmErrors

    def check_problem(self, m: int, n: int, k: int) -> None:
        """Shapes TMA can describe (`rules.PROBLEM_RULES`): int32 extents, 16-byte row strides of A, B (K) and C (N).
        Raises the first GemmError."""
        m, n, k = (problem_extent(name, v) for name, v in (("m", m), ("n", n), ("k", k)))
        for err in broken_rules(PROBLEM_RULES, self, m, n, k):
            raise err

    # ---- descriptors and defines
    def descriptors(self) -> tuple[list[int], list[int], int]:
        """(A descriptors of consumer 0 [atom][step], B descriptors [step], consumer stride in bytes), start
        addresses relative to the stage, each from descriptor_for on the box TMA loads; consumer c reads the
        A descriptors moved by c x the stride, checked here against descriptor_for."""
        self.check()
        t, a_spec, b_spec = self.wgmma, self.box_spec("A"), self.box_spec("B")
        pitch = a_spec.row_pitch_bytes

        def a_steps(offset):
            return descriptor_for(a_spec, offset, "A", "K", dtype=t, panels=self.panels)

        desc_a = [d for atom in range(self.m_atoms) for d in a_steps(atom * WGMMA_M * pitch)]
        wg_bytes = self.wg_rows * pitch
        for cw in range(1, self.tile_wgs):
            moved = [d for atom in range(self.m_atoms) for d in a_steps(cw * wg_bytes + atom * WGMMA_M * pitch)]
            if moved != [d.advanced(cw * wg_bytes) for d in desc_a]:
                raise GemmError("consumer_offset", "bm", self.bm, f"use a bm whose {self.consumers} consumer "
                                "tiles start on whole swizzle atoms (a multiple of 64 rows each)",
                                f"consumer {cw}'s A descriptors are not consumer 0's moved by {cw * wg_bytes} B")
        desc_b = descriptor_for(b_spec, self.a_bytes, "B", "K", dtype=t, n=self.bn, panels=self.panels)
        return [d.encode() for d in desc_a], [d.encode() for d in desc_b], wg_bytes

    def defines(self) -> dict:
        desc_a, desc_b, wg_bytes = self.descriptors()
        a_spec, b_spec = self.box_spec("A"), self.box_spec("B")
        regs = self.setmaxnreg
        return {
            f"DRVTMA_WGMMA_{self.wgmma.name.upper()}": 1, "GEMM_T": self.wgmma.name,
            "GEMM_BM": self.bm, "GEMM_BN": self.bn, "GEMM_BK": self.k_tile, "GEMM_STAGES": self.stages,
            "GEMM_CONSUMERS": self.consumers, "GEMM_PANELS": self.panels, "GEMM_PANEL_ELEMS": self.panel_elems,
            "GEMM_A_BOX_BYTES": a_spec.smem_bytes, "GEMM_B_BOX_BYTES": b_spec.smem_bytes,
            "GEMM_STEPS": len(desc_b), "GEMM_TX_BYTES": self.tx_bytes,
            "GEMM_DESC_A": ",".join(f"0x{v:016x}ull" for v in desc_a),
            "GEMM_DESC_B": ",".join(f"0x{v:016x}ull" for v in desc_b), "GEMM_A_WG_BYTES": wg_bytes,
            "GEMM_OUT": OUT_DTYPES[self.out_dtype][0], "GEMM_OUT_BYTES": self.out_itemsize,
            "GEMM_PRODUCER_REGS": self.producer_regs if regs else 0,
            "GEMM_CONSUMER_REGS": self.consumer_regs if regs else 0,
            "GEMM_GROUP_M": self.group_m, "GEMM_INFLIGHT": self.inflight,
            "GEMM_IN": list(IN_DTYPES).index(self.dtype), "GEMM_IN_BYTES": self.itemsize,
            "GEMM_MMA_SYNC": int(self.mma == "mma_sync"), "GEMM_CLUSTER_M": self.cluster_m,
            "GEMM_CLUSTER_N": self.cluster_n,
            "GEMM_STREAMK": int(self.streamk), "GEMM_PINGPONG": int(self.pingpong), "GEMM_SWAP_AB": int(self.swap_ab),
            "GEMM_PREFETCH_MAPS": int(self.prefetch_maps), "GEMM_EPI_BUFS": self.epilogue_buffers,
            "GEMM_EPI_PANELS": self.epilogue_panels, "GEMM_STMATRIX": int(self.stmatrix),
            **dict(zip(("GEMM_EVICT_A", "GEMM_EVICT_B"), self.kernel_operands(L2_EVICTS[self.evict_a],
                                                                             L2_EVICTS[self.evict_b]))),
        }

    # ---- launch shape
    def kernel_extents(self, m: int, n: int) -> tuple[int, int]:
        """The (M, N) the kernel computes for C [m, n]: swapped, C^T's."""
        return self.kernel_operands(m, n)

    def kernel_operands(self, a, b) -> tuple:
        """What of A's and B's (extents, addresses, buffers) the kernel takes as its A and its B: swapped, B's and
        A's."""
        return (b, a) if self.swap_ab else (a, b)

    def tiles(self, m: int, n: int) -> int:
        return math.ceil(m / self.bm) * math.ceil(n / self.bn)

    def cluster_tiles(self, m: int, n: int) -> int:
        """Units of work of one cluster: cluster_m tile rows by cluster_n tile columns (the last may run past M, N)."""
        return math.ceil(math.ceil(m / self.bm) / self.cluster_m) * math.ceil(math.ceil(n / self.bn) / self.cluster_n)

    def grid(self, m: int, n: int, sm_count: int) -> int:
        """CTAs: persistent, one per SM (at most one cluster per cluster tile); else one cluster per cluster tile."""
        units = self.cluster_tiles(m, n)
        if self.streamk:  # one CTA per SM, whatever the tile count: the split runs spread over all of them
            return sm_count
        clusters = min(units, sm_count // self.cluster_size) if self.persistent else units
        return clusters * self.cluster_size

    def for_problem(self, m: int, n: int, k: int, sm_count: int, l2_bytes: int | None = None) -> GemmConfig:
        """The configuration to run this problem with (`drvtma.gemm.choice`: each choice timed against cuBLAS)."""
        return for_problem(self, m, n, k, sm_count, L2_BYTES if l2_bytes is None else l2_bytes)

    @property
    def cluster(self) -> tuple[int, int, int] | None:
        """The launch's cluster shape (None: no cluster)."""
        return (self.cluster_size, 1, 1) if self.cluster_size > 1 else None

    @property
    def cluster_size(self) -> int:
        """CTAs of one cluster (a pair along M or N, or one)."""
        return self.cluster_m * self.cluster_n

    def label(self) -> str:
        regs = f"{self.producer_regs}/{self.consumer_regs}" if self.setmaxnreg else "off"
        return (f"{self.dtype}->{self.out_dtype} {self.bm}x{self.bn}x{self.k_tile} {self.stages} stages, "
                f"{self.consumers} consumer WG, swizzle {self.swizzle}, setmaxnreg {regs}, "
                f"{'persistent' if self.persistent else 'tile per CTA'}, group_m {self.group_m}, "
                f"inflight {self.inflight}" + (", mma.sync" if self.mma == "mma_sync" else "")
                + (f", {self.cluster_m}-CTA cluster (B multicast)" if self.cluster_m > 1 else "")
                + (f", {self.cluster_n}-CTA cluster along N (A multicast)" if self.cluster_n > 1 else "")
                + (", stream-K last wave" if self.streamk else "") + (", ping-pong" if self.pingpong else "")
                + (", swapped A and B" if self.swap_ab else "") + (", maps prefetched" if self.prefetch_maps else "")
                + (f", L2 promotion {self.l2_promotion}" if self.l2_promotion != "none" else "")
                + "".join(f", {x} evict_{v}" for x, v in (("A", self.evict_a), ("B", self.evict_b)) if v != "normal")
                + (f", {self.epilogue_buffers} staging buffers" if self.epilogue_buffers != 2 else "")
                + (", stmatrix epilogue" if self.stmatrix else ""))
