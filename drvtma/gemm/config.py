"""One GEMM configuration (every claim of the async tensor-core article is one field), its named rules, and the compile-time
defines of cu/gemm/gemm_ws.cu, descriptors included (from drvtma.wgmma.descriptor_for, never written by hand).

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
- epilogue_buffers: staging buffers (64 rows x 128 B of C) per consumer warpgroup; as many as the warpgroup's
  tile has panels: one barrier pair per tile, and the stores drain while the next main loop runs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

import numpy as np

from ..errors import GemmError, as_int
from ..runtime.capabilities import HOPPER
from ..runtime.compiler import include_dir
from ..tma.tiled.spec import L2Promotion, Swizzle, TensorMapSpec
from ..wgmma import descriptor_for, wgmma_type
from ..wgmma.dtypes import M as WGMMA_M
from .choice import L2_BYTES, MAX_CTA_RANGE, for_problem, problem_extent  # problem_extent: importable here too

KERNEL_SOURCE = "gemm/gemm_ws.cu"
KERNEL_NAME = "gemm_ws"
SMEM_LIMIT = HOPPER.smem_per_block_optin  # the kernel is sm_90a only; a launch checks the device's own figure
REGISTERS_PER_SM = 65_536
ALIGN_SLACK = 1024  # the ring starts at the first 1024-byte boundary of dynamic shared memory
EPI_BUF_BYTES = 64 * 128  # one staging buffer: 64 rows x 128 B of C
MAX_STAGES = 16  # the deepest ring: a small tile's stages are small, and a skinny GEMM streams B at the depth it has
MAX_ACC_REGS = 128  # accumulator floats per consumer thread that fit beside the rest (fast.cu: more serialise)

IN_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
OUT_DTYPES = {"bfloat16": (0, 2), "float16": (1, 2), "float32": (2, 4)}  # name -> (GEMM_OUT, bytes)
_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "f16": "float16", "half": "float16",
                  "e4m3": "float8_e4m3fn", "fp8": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn",
                  "e5m2": "float8_e5m2", "fp32": "float32", "f32": "float32"}
SWIZZLES = {"none": Swizzle.NONE, "32B": Swizzle.B32, "64B": Swizzle.B64, "128B": Swizzle.B128}
# how far the L2 widens an A or B load's requests from memory (CU_TENSOR_MAP_L2_PROMOTION_*)
L2_PROMOTIONS = {"none": L2Promotion.NONE, "64B": L2Promotion.B64, "128B": L2Promotion.B128, "256B": L2Promotion.B256}
L2_EVICTS = {"normal": 0, "first": 1, "last": 2}  # an operand's L2 priority -> GEMM_EVICT_* (kEvict* in copy.cuh)


def dtype_name(value) -> str:
    """The ml_dtypes / NumPy name of a dtype ("bf16" -> "bfloat16", "e4m3" -> "float8_e4m3fn")."""
    name = str(getattr(value, "name", value)).lower()
    return _DTYPE_ALIASES.get(name, name)


@lru_cache(maxsize=None)
def generated_ns(type_name: str) -> tuple[int, ...]:
    """The N values wgmma_ops.cuh has an SS wrapper for (it is generated for a subset of the legal N)."""
    text = (include_dir() / "drvtma" / "wgmma_ops.cuh").read_text()
    return tuple(sorted({int(n) for n in re.findall(rf"wgmma_ss_{type_name}_n(\d+)\(", text)}))


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

    def __post_init__(self):
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        object.__setattr__(self, "out_dtype", dtype_name(self.out_dtype))
        # types here, so the rules (check) compare numbers: 2.5 stages or "128" rows are refused by name
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if not (name == "bk" and value is None):
                object.__setattr__(self, name, as_int(value, name, error=GemmError, rule="type"))
        for name in ("setmaxnreg", "persistent", "streamk", "pingpong", "swap_ab", "prefetch_maps"):
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

    # The byte counts come from the boxes' validated TensorMapSpecs (about 30 us each to build), and every launch
    # reads smem_bytes: computed once per configuration (it is frozen), or the host's issue time of one GEMM launch
    # was 70 us, past the stream hold that keeps it out of the timed interval.
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
        for err in self.errors():
            raise err
        return self

    def errors(self):
        if self.dtype not in IN_DTYPES:
            yield GemmError("dtype", "dtype", self.dtype, f"use one of {', '.join(IN_DTYPES)}",
                            "the kernel multiplies 16-bit floats or fp8 (K-major)")
            return
        if self.out_dtype not in OUT_DTYPES:
            yield GemmError("out_dtype", "out_dtype", self.out_dtype, f"use one of {', '.join(OUT_DTYPES)}")
            return
        if self.mma not in ("wgmma", "mma_sync"):
            yield GemmError("mma_kind", "mma", self.mma, "use 'wgmma' or 'mma_sync' (the article's traditional-mma "
                            "baseline)")
        if self.streamk and (not self.persistent or self.cluster_size != 1):
            yield GemmError("streamk_schedule", "streamk", self.streamk,
                            "use persistent=True and cluster_m=cluster_n=1 with it",
                            "stream-K splits the last wave over one CTA per SM, without clusters")
        if self.cluster_m not in (1, 2):
            yield GemmError("cluster_size", "cluster_m", self.cluster_m, "use 1 or 2",
                            "the kernel pairs CTAs along M to share B (fast.cu measured clusters > 2 much slower)")
        if self.cluster_n not in (1, 2) or self.cluster_size > 2:
            yield GemmError("cluster_size", "cluster_n", self.cluster_n, "use 1, or 2 with cluster_m=1",
                            "the kernel pairs CTAs along M to share B, or along N to share A: not both")
        if self.swizzle not in SWIZZLES:
            yield GemmError("swizzle", "swizzle", self.swizzle, f"use one of {', '.join(SWIZZLES)}")
            return
        if self.l2_promotion not in L2_PROMOTIONS:
            yield GemmError("l2_promotion", "l2_promotion", self.l2_promotion,
                            f"use one of {', '.join(L2_PROMOTIONS)}", "the A and B maps' L2 promotion")
            return
        for name in (n for n in ("evict_a", "evict_b") if getattr(self, n) not in L2_EVICTS):
            yield GemmError("l2_evict", name, getattr(self, name), f"use one of {', '.join(L2_EVICTS)}",
                            "the L2 eviction priority of that operand's loads")
            return
        if self.consumers not in (1, 2):
            yield GemmError("consumers", "consumers", self.consumers, "use 1 or 2 consumer warpgroups")
            return
        if self.pingpong and (self.consumers != 2 or self.mma != "wgmma" or self.streamk or not self.persistent):
            yield GemmError("pingpong_schedule", "pingpong", self.pingpong,
                            "use it with consumers=2, mma='wgmma', persistent=True and streamk=False",
                            "two warpgroups take the tiles of a persistent CTA in turn")
            return
        if self.swap_ab and self.out_itemsize != 2:
            yield GemmError("swap_ab_output", "out_dtype", self.out_dtype, "use bfloat16 or float16 C with swap_ab",
                            "the swapped epilogue writes C's rows as 128-byte panels of 16-bit values")
            return
        if not (self.bm % (WGMMA_M * self.tile_wgs) == 0 and 0 < self.bm <= MAX_CTA_RANGE):
            yield GemmError("tile_m", "bm", self.bm,
                            f"use a multiple of {WGMMA_M * self.tile_wgs} up to 256 (whole m64 atoms per consumer)")
            return
        if self.swap_ab:  # the tile's columns are C's rows: whole 64-row panels, or one panel of fewer
            ns = [n for n in generated_ns(self.wgmma.name) if n % 64 == 0 or n < 64]
            why = "the swapped epilogue stores 64 of C's rows at a time, or all of a narrower tile's"
        else:
            ns = [n for n in generated_ns(self.wgmma.name) if n % self.epilogue_width == 0]
            why = f"the epilogue stores whole {self.epilogue_width}-column panels"
        if self.bn not in ns:
            yield GemmError("tile_n", "bn", self.bn, f"use one of {ns}",
                            f"one wgmma covers the tile's N (wgmma_ops.cuh wrappers), {why}")
            return
        if self.k_tile <= 0 or self.k_tile % self.panel_elems or (self.k_tile * self.itemsize) % 32:
            yield GemmError("tile_k", "bk", self.k_tile,
                            f"use a multiple of {max(self.panel_elems, 32 // self.itemsize)} (whole {self.span}-B "
                            "panels and 32-B wgmma k-steps)")
            return
        if self.mma == "mma_sync" and (self.m_atoms != 1 or self.bn % 64):
            yield GemmError("mma_sync_tile", "bm, bn", (self.bm, self.bn),
                            f"use bm = {64 * self.consumers} (64 rows per consumer) and bn 128 or 256",
                            "each mma.sync warp computes its warpgroup's 64 rows x bn / 4 columns")
        if self.mma == "mma_sync" and self.itemsize == 1:
            yield GemmError("mma_sync_dtype", "dtype", self.dtype, "use bfloat16 or float16 with mma='mma_sync'",
                            "sm_90 has no fp8 mma.sync: ptxas emulates m16n8k32 with two fp16 HMMAs and spills")
        acc = self.m_atoms * self.bn // 2
        if acc > MAX_ACC_REGS:
            yield GemmError("accumulator_registers", "bm, bn", (self.bm, self.bn),
                            f"use more consumers or a smaller tile: {acc} accumulator floats per thread > "
                            f"{MAX_ACC_REGS}", "ptxas serialises wgmma without registers to spare")
        if not 1 <= self.stages <= MAX_STAGES:
            yield GemmError("stages", "stages", self.stages, f"use 1..{MAX_STAGES}")
        if not 2 <= self.epilogue_buffers <= max(2, self.epilogue_panels):
            yield GemmError("epilogue_buffers", "epilogue_buffers", self.epilogue_buffers,
                            f"use 2..{max(2, self.epilogue_panels)} (the warpgroup tile's panels)",
                            "a panel is staged while the one before is stored; more buffers than panels are unused")
        if self.smem_bytes > SMEM_LIMIT:
            yield GemmError("smem_capacity", "stages", self.stages,
                            f"use at most {self.stages_that_fit()} stages of this tile",
                            f"{self.smem_bytes} B of shared memory > {SMEM_LIMIT} B")
        if self.setmaxnreg:
            for name in ("producer_regs", "consumer_regs"):
                v = getattr(self, name)
                if not (24 <= v <= 256 and v % 8 == 0):
                    yield GemmError("setmaxnreg_range", name, v, "use a multiple of 8 in 24..256")
            total = 128 * self.producer_regs + 128 * self.consumers * self.consumer_regs
            if total > REGISTERS_PER_SM:
                yield GemmError("register_budget", "producer_regs, consumer_regs",
                                (self.producer_regs, self.consumer_regs),
                                f"keep 128 x producer + {128 * self.consumers} x consumer <= {REGISTERS_PER_SM}",
                                f"{total} registers: setmaxnreg.inc would wait forever for them")
        if self.group_m < 1:
            yield GemmError("group_m", "group_m", self.group_m, "use 1 (row-major) or more tile rows per group")
        if self.inflight not in (0, 1):
            yield GemmError("inflight", "inflight", self.inflight, "use 0 or 1")

    def check_problem(self, m: int, n: int, k: int) -> None:
        """Shapes TMA can describe: 16-byte row strides of A, B (K) and C (N); int32 extents."""
        m, n, k = (problem_extent(name, v) for name, v in (("m", m), ("n", n), ("k", k)))
        unit = 16 // self.itemsize
        if k % unit:
            raise GemmError("k_alignment", "k", k, f"pad K to a multiple of {unit} ({math.ceil(k / unit) * unit})",
                            f"rows of A and B are {k * self.itemsize} B; TMA needs strides that are 16-B multiples")
        unit = 16 // self.out_itemsize
        if n % unit:
            raise GemmError("n_alignment", "n", n, f"pad N to a multiple of {unit} ({math.ceil(n / unit) * unit})",
                            f"rows of C are {n * self.out_itemsize} B; TMA needs strides that are 16-B multiples")

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
            "GEMM_EPI_PANELS": self.epilogue_panels,
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
        """The configuration to run this problem with, measured on the H200 (`drvtma.gemm.choice`)."""
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
                + (f", {self.epilogue_buffers} staging buffers" if self.epilogue_buffers != 2 else ""))
