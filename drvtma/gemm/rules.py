"""The GEMM's named rules as data, in the form of `tma.tiled.rules.RULES` (`drvtma.errors.Rule`: the names, the quick test,
the check that yields a GemmError naming the argument, its value and the fix), and the vocabularies and limits they
read. `GEMM_RULES` judges a configuration, `PROBLEM_RULES` the shape it runs, `CONV_RULES` a convolution on it;
`GemmConfig.errors()`, `check_problem`, `ConvShape.check` and `drvtma check gemm` / `conv` all run these tables.

A rule reads a `GemmConfig`'s fields and derived sizes (duck-typed: this module sits below `config`).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import GemmError, Rule
from ..runtime.capabilities import HOPPER
from ..runtime.compiler import include_dir
from ..tma.tiled.spec import L2Promotion, Swizzle
from ..wgmma.dtypes import M as WGMMA_M
from .choice import MAX_CTA_RANGE, MAX_EXTENT, problem_extent

if TYPE_CHECKING:
    from .config import GemmConfig
    from .conv import ConvShape

SMEM_LIMIT = HOPPER.smem_per_block_optin  # the kernel is sm_90a only; a launch checks the device's own figure
REGISTERS_PER_SM = 65_536
MAX_STAGES = 16  # the deepest ring: a small tile's stages are small, and a skinny GEMM streams B at the depth it has
MAX_ACC_REGS = 128  # accumulator floats per consumer thread that fit beside the rest (fast.cu: more serialise)

IN_DTYPES = {"bfloat16": "bf16", "float16": "f16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
OUT_DTYPES = {"bfloat16": (0, 2), "float16": (1, 2), "float32": (2, 4)}  # name -> (GEMM_OUT, bytes)
SWIZZLES = {"none": Swizzle.NONE, "32B": Swizzle.B32, "64B": Swizzle.B64, "128B": Swizzle.B128}
# how far the L2 widens an A or B load's requests from memory (CU_TENSOR_MAP_L2_PROMOTION_*)
L2_PROMOTIONS = {"none": L2Promotion.NONE, "64B": L2Promotion.B64, "128B": L2Promotion.B128, "256B": L2Promotion.B256}
L2_EVICTS = {"normal": 0, "first": 1, "last": 2}  # an operand's L2 priority -> GEMM_EVICT_* (kEvict* in copy.cuh)
MMA_KINDS = ("wgmma", "mma_sync")

CONV_DTYPES = ("bfloat16", "float16")  # 16-bit operands: BK = 64 channels, one 128-byte swizzle panel per k-block
MAX_OFFSET = 255  # im2col offsets of a rank-4 map: 0..255 (the filter tap times the dilation)
CORNER_RANGE = (-128, 127)  # a rank-4 map's corners
MAX_CONV_STRIDE = 8  # the map's traversal stride


@lru_cache(maxsize=None)
def generated_ns(type_name: str) -> tuple[int, ...]:
    """The N values wgmma_ops.cuh has an SS wrapper for (it is generated for a subset of the legal N)."""
    text = (include_dir() / "drvtma" / "wgmma_ops.cuh").read_text()
    return tuple(sorted({int(n) for n in re.findall(rf"wgmma_ss_{type_name}_n(\d+)\(", text)}))


def _one(rule: str, argument: str, value, fix, why=""):
    """The check of a rule that breaks one way: `value`, `fix` and `why` are text or functions of the subject."""
    def broken(*subject):
        yield GemmError(rule, argument, *(v(*subject) if callable(v) else v for v in (value, fix, why)))
    return broken


def _field(name: str):
    return lambda c: getattr(c, name)


def _names(table) -> str:
    return ", ".join(table)


# ---------------------------------------------------------------------------------------------- configuration

def _cluster_holds(c: GemmConfig) -> bool:
    return c.cluster_m in (1, 2) and c.cluster_n in (1, 2) and c.cluster_size <= 2


def _cluster_broken(c: GemmConfig):
    if c.cluster_m not in (1, 2):
        yield GemmError("cluster_size", "cluster_m", c.cluster_m, "use 1 or 2",
                        "the kernel pairs CTAs along M to share B (fast.cu measured clusters > 2 much slower)")
    if c.cluster_n not in (1, 2) or c.cluster_size > 2:
        yield GemmError("cluster_size", "cluster_n", c.cluster_n, "use 1, or 2 with cluster_m=1",
                        "the kernel pairs CTAs along M to share B, or along N to share A: not both")


def _evict_holds(c: GemmConfig) -> bool:
    return c.evict_a in L2_EVICTS and c.evict_b in L2_EVICTS


def _evict_broken(c: GemmConfig):
    name = "evict_a" if c.evict_a not in L2_EVICTS else "evict_b"  # the first one: the kernel stops there
    yield GemmError("l2_evict", name, getattr(c, name), f"use one of {_names(L2_EVICTS)}",
                    "the L2 eviction priority of that operand's loads")


def _pingpong_holds(c: GemmConfig) -> bool:
    return not c.pingpong or (c.consumers == 2 and c.mma == "wgmma" and not c.streamk and c.persistent)


def _tile_ns(c: GemmConfig) -> tuple[list[int], str]:
    """The tile N values the kernel takes for this configuration, and why those."""
    if c.swap_ab:  # the tile's columns are C's rows: whole 64-row panels, or one panel of fewer
        return ([n for n in generated_ns(c.wgmma.name) if n % 64 == 0 or n < 64],
                "the swapped epilogue stores 64 of C's rows at a time, or all of a narrower tile's")
    return ([n for n in generated_ns(c.wgmma.name) if n % c.epilogue_width == 0],
            f"the epilogue stores whole {c.epilogue_width}-column panels")


def _tile_n_broken(c: GemmConfig):
    ns, why = _tile_ns(c)
    yield GemmError("tile_n", "bn", c.bn, f"use one of {ns}", f"one wgmma covers the tile's N (wgmma_ops.cuh "
                    f"wrappers), {why}")


def _tile_k_holds(c: GemmConfig) -> bool:
    return c.k_tile > 0 and c.k_tile % c.panel_elems == 0 and (c.k_tile * c.itemsize) % 32 == 0


def _acc(c: GemmConfig) -> int:
    """Accumulator floats per consumer thread."""
    return c.m_atoms * c.bn // 2


def _epilogue_holds(c: GemmConfig) -> bool:
    return 2 <= c.epilogue_buffers <= max(2, c.epilogue_panels)


def _setmaxnreg_holds(c: GemmConfig) -> bool:
    return not c.setmaxnreg or all(24 <= v <= 256 and v % 8 == 0 for v in (c.producer_regs, c.consumer_regs))


def _setmaxnreg_broken(c: GemmConfig):
    for name in ("producer_regs", "consumer_regs"):
        v = getattr(c, name)
        if not (24 <= v <= 256 and v % 8 == 0):
            yield GemmError("setmaxnreg_range", name, v, "use a multiple of 8 in 24..256")


def _registers(c: GemmConfig) -> int:
    return 128 * c.producer_regs + 128 * c.consumers * c.consumer_regs


# A gate's breaking makes every later rule meaningless (they read the dtype's size, the swizzle's span, the tile's
# atoms ...), and the derived sizes too: nothing after it is checked. `_gated` makes that each later rule's `after`.
GATES = frozenset({"dtype", "out_dtype", "swizzle", "l2_promotion", "l2_evict", "consumers", "pingpong_schedule",
                    "swap_ab_output", "tile_m", "tile_n", "tile_k"})


def _gated(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    out: list[Rule] = []
    gates: frozenset[str] = frozenset()
    for rule in rules:
        out.append(rule._replace(after=rule.after | gates))
        gates |= GATES & set(rule.rules)
    return tuple(out)


# Every configuration rule, in the order GemmConfig.errors() reports them.
GEMM_RULES = _gated((
    Rule(("dtype",), lambda c: c.dtype in IN_DTYPES,
         _one("dtype", "dtype", _field("dtype"), f"use one of {_names(IN_DTYPES)}",
              "the kernel multiplies 16-bit floats or fp8 (K-major)")),
    Rule(("out_dtype",), lambda c: c.out_dtype in OUT_DTYPES,
         _one("out_dtype", "out_dtype", _field("out_dtype"), f"use one of {_names(OUT_DTYPES)}")),
    Rule(("mma_kind",), lambda c: c.mma in MMA_KINDS,
         _one("mma_kind", "mma", _field("mma"), "use 'wgmma' or 'mma_sync' (the article's traditional-mma baseline)")),
    Rule(("streamk_schedule",), lambda c: not c.streamk or (c.persistent and c.cluster_size == 1),
         _one("streamk_schedule", "streamk", _field("streamk"), "use persistent=True and cluster_m=cluster_n=1 with it",
              "stream-K splits the last wave over one CTA per SM, without clusters")),
    Rule(("cluster_size",), _cluster_holds, _cluster_broken),
    Rule(("swizzle",), lambda c: c.swizzle in SWIZZLES,
         _one("swizzle", "swizzle", _field("swizzle"), f"use one of {_names(SWIZZLES)}")),
    Rule(("l2_promotion",), lambda c: c.l2_promotion in L2_PROMOTIONS,
         _one("l2_promotion", "l2_promotion", _field("l2_promotion"), f"use one of {_names(L2_PROMOTIONS)}",
              "the A and B maps' L2 promotion")),
    Rule(("l2_evict",), _evict_holds, _evict_broken),
    Rule(("consumers",), lambda c: c.consumers in (1, 2),
         _one("consumers", "consumers", _field("consumers"), "use 1 or 2 consumer warpgroups")),
    Rule(("pingpong_schedule",), _pingpong_holds,
         _one("pingpong_schedule", "pingpong", _field("pingpong"),
              "use it with consumers=2, mma='wgmma', persistent=True and streamk=False",
              "two warpgroups take the tiles of a persistent CTA in turn")),
    Rule(("swap_ab_output",), lambda c: not c.swap_ab or c.out_itemsize == 2,
         _one("swap_ab_output", "out_dtype", _field("out_dtype"), "use bfloat16 or float16 C with swap_ab",
              "the swapped epilogue writes C's rows as 128-byte panels of 16-bit values")),
    Rule(("tile_m",), lambda c: c.bm % (WGMMA_M * c.tile_wgs) == 0 and 0 < c.bm <= MAX_CTA_RANGE,
         _one("tile_m", "bm", _field("bm"), lambda c: f"use a multiple of {WGMMA_M * c.tile_wgs} up to "
              f"{MAX_CTA_RANGE} (whole m64 atoms per consumer)")),
    Rule(("tile_n",), lambda c: c.bn in _tile_ns(c)[0], _tile_n_broken),
    Rule(("tile_k",), _tile_k_holds,
         _one("tile_k", "bk", _field("k_tile"), lambda c: f"use a multiple of {max(c.panel_elems, 32 // c.itemsize)} "
              f"(whole {c.span}-B panels and 32-B wgmma k-steps)")),
    Rule(("stmatrix_epilogue",), lambda c: not c.stmatrix or (c.out_itemsize == 2 and c.bn % 16 == 0),
         _one("stmatrix_epilogue", "stmatrix", _field("stmatrix"),
              "use it with a bfloat16 or float16 C and a bn that is a multiple of 16",
              "stmatrix stores 8x8 matrices of 16-bit values, four at a time (16 columns of the tile)")),
    Rule(("mma_sync_tile",), lambda c: c.mma != "mma_sync" or (c.m_atoms == 1 and c.bn % 64 == 0),
         _one("mma_sync_tile", "bm, bn", lambda c: (c.bm, c.bn),
              lambda c: f"use bm = {64 * c.consumers} (64 rows per consumer) and bn 128 or 256",
              "each mma.sync warp computes its warpgroup's 64 rows x bn / 4 columns")),
    Rule(("mma_sync_dtype",), lambda c: c.mma != "mma_sync" or c.itemsize != 1,
         _one("mma_sync_dtype", "dtype", _field("dtype"), "use bfloat16 or float16 with mma='mma_sync'",
              "sm_90 has no fp8 mma.sync: ptxas emulates m16n8k32 with two fp16 HMMAs and spills")),
    Rule(("accumulator_registers",), lambda c: _acc(c) <= MAX_ACC_REGS,
         _one("accumulator_registers", "bm, bn", lambda c: (c.bm, c.bn),
              lambda c: f"use more consumers or a smaller tile: {_acc(c)} accumulator floats per thread > "
              f"{MAX_ACC_REGS}", "ptxas serialises wgmma without registers to spare")),
    Rule(("stages",), lambda c: 1 <= c.stages <= MAX_STAGES,
         _one("stages", "stages", _field("stages"), f"use 1..{MAX_STAGES}")),
    Rule(("epilogue_buffers",), _epilogue_holds,
         _one("epilogue_buffers", "epilogue_buffers", _field("epilogue_buffers"),
              lambda c: f"use 2..{max(2, c.epilogue_panels)} (the warpgroup tile's panels)",
              "a panel is staged while the one before is stored; more buffers than panels are unused")),
    Rule(("smem_capacity",), lambda c: c.smem_bytes <= SMEM_LIMIT,
         _one("smem_capacity", "stages", _field("stages"), lambda c: f"use at most {c.stages_that_fit()} stages "
              "of this tile", lambda c: f"{c.smem_bytes} B of shared memory > {SMEM_LIMIT} B")),
    Rule(("setmaxnreg_range",), _setmaxnreg_holds, _setmaxnreg_broken),
    Rule(("register_budget",), lambda c: not c.setmaxnreg or _registers(c) <= REGISTERS_PER_SM,
         _one("register_budget", "producer_regs, consumer_regs", lambda c: (c.producer_regs, c.consumer_regs),
              lambda c: f"keep 128 x producer + {128 * c.consumers} x consumer <= {REGISTERS_PER_SM}",
              lambda c: f"{_registers(c)} registers: setmaxnreg.inc would wait forever for them")),
    Rule(("group_m",), lambda c: c.group_m >= 1,
         _one("group_m", "group_m", _field("group_m"), "use 1 (row-major) or more tile rows per group")),
    Rule(("inflight",), lambda c: c.inflight in (0, 1), _one("inflight", "inflight", _field("inflight"), "use 0 or 1")),
))


# ---------------------------------------------------------------------------------------------- problem shape
# Subject: (config, m, n, k), integers.

def _unit(nbytes: int) -> int:
    return 16 // nbytes


def _pad(v: int, unit: int) -> int:
    return math.ceil(v / unit) * unit


def _extents_broken(c: GemmConfig, m: int, n: int, k: int):
    for name, v in zip("mnk", (m, n, k)):
        try:
            problem_extent(name, v)
        except GemmError as err:
            yield err


# The alignments read the element sizes: meaningless after the configuration's dtype or out_dtype broke (explain
# walks the tables in turn). A convolution without output has no implicit GEMM to judge.
_RANGE = frozenset({"shape_range", "dtype", "out_dtype", "conv_shape"})

PROBLEM_RULES = (
    Rule(("shape_range",), lambda c, m, n, k: all(1 <= v <= MAX_EXTENT for v in (m, n, k)), _extents_broken,
         after=frozenset({"conv_shape"})),
    Rule(("k_alignment",), lambda c, m, n, k: k % _unit(c.itemsize) == 0,
         _one("k_alignment", "k", lambda c, m, n, k: k,
              lambda c, m, n, k: f"pad K to a multiple of {_unit(c.itemsize)} ({_pad(k, _unit(c.itemsize))})",
              lambda c, m, n, k: f"rows of A and B are {k * c.itemsize} B; TMA needs strides that are 16-B "
              "multiples"), after=_RANGE),
    Rule(("n_alignment",), lambda c, m, n, k: n % _unit(c.out_itemsize) == 0,
         _one("n_alignment", "n", lambda c, m, n, k: n,
              lambda c, m, n, k: f"pad N to a multiple of {_unit(c.out_itemsize)} "
              f"({_pad(n, _unit(c.out_itemsize))})",
              lambda c, m, n, k: f"rows of C are {n * c.out_itemsize} B; TMA needs strides that are 16-B multiples"),
         after=_RANGE),
)


# ---------------------------------------------------------------------------------------------- convolution
# Subject: (shape, config). What the im2col map or the kernel's k-blocks cannot express; ConvShape.check raises the
# first, then the implicit GEMM's PROBLEM_RULES.

def _conv_config_holds(s: ConvShape, c: GemmConfig) -> bool:
    return c.mma == "wgmma" and c.cluster_size == 1 and not c.swap_ab and c.evict_a == "normal"


def _conv_config_broken(s: ConvShape, c: GemmConfig):
    if c.mma != "wgmma" or c.cluster_size != 1 or c.swap_ab:
        yield GemmError("conv_config", "config", c.label(), "use the wgmma path without a cluster or swapped operands",
                        "the convolution is built on the persistent wgmma GEMM only")
    if c.evict_a != "normal":
        yield GemmError("conv_config", "evict_a", c.evict_a, "leave evict_a='normal' (evict_b still applies to the "
                        "filter's loads)", "the input comes through im2col loads, which take no L2 hint here")


def _conv_channels_holds(s: ConvShape, c: GemmConfig) -> bool:
    # a K tile of no channels is the configuration's own rule (tile_k), not one of the convolution's
    return c.k_tile <= 0 or s.c % c.k_tile == 0


def _corners_hold(s: ConvShape, c: GemmConfig) -> bool:
    lower, upper = s.corners
    return all(CORNER_RANGE[0] <= v <= CORNER_RANGE[1] for v in lower + upper)


CONV_RULES = (
    Rule(("conv_dtype",), lambda s, c: c.dtype in CONV_DTYPES,
         _one("conv_dtype", "dtype", lambda s, c: c.dtype, f"use {' or '.join(CONV_DTYPES)}",
              "the convolution's k-blocks are 64 channels of a 16-bit type")),
    # the label and the K tile below read the dtype's size: meaningless for another type
    Rule(("conv_config",), _conv_config_holds, _conv_config_broken, after=frozenset({"conv_dtype"})),
    Rule(("conv_channels",), _conv_channels_holds,
         _one("conv_channels", "c", lambda s, c: s.c, lambda s, c: f"use a multiple of {c.k_tile} input channels",
              "a k-block must not straddle two filter taps"), after=frozenset({"conv_dtype"})),
    Rule(("conv_shape",), lambda s, c: s.p >= 1 and s.q >= 1,
         _one("conv_shape", "r, s", lambda s, c: (s.r, s.s), "use a filter no larger than the padded input",
              lambda s, c: f"the output would be {s.p} x {s.q}")),
    Rule(("conv_offsets",), lambda s, c: max(s.r - 1, s.s - 1) * s.dilation <= MAX_OFFSET,
         _one("conv_offsets", "dilation", lambda s, c: s.dilation, f"keep (filter - 1) x dilation <= {MAX_OFFSET}",
              "im2col offsets of a 2D map are 8-bit")),
    Rule(("conv_stride",), lambda s, c: s.stride <= MAX_CONV_STRIDE,
         _one("conv_stride", "stride", lambda s, c: s.stride, f"use a stride of 1..{MAX_CONV_STRIDE}",
              f"the map's traversal stride is 1..{MAX_CONV_STRIDE}")),
    Rule(("conv_corners",), _corners_hold,
         _one("conv_corners", "pad", lambda s, c: s.pad, "keep pad and pad - (filter - 1) x dilation within "
              f"{CORNER_RANGE[0]}..{CORNER_RANGE[1]}", "a 2D im2col map's corners are 8-bit")),
)


def rule_names(table) -> tuple[str, ...]:
    """Every rule name of a table, in its order."""
    return tuple(name for rule in table for name in rule.rules)
