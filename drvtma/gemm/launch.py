"""Compile, load and launch the GEMM (cu/gemm/gemm_ws.cu): tensor maps for A, B and C, checked launches, a
poisoned output before every checked run, and the kernel's resources read from its cubin (no GPU needed).

    gemm = Gemm(GemmConfig())                     # rules checked here, before anything reaches the driver
    c = gemm.matmul(a, b)                         # NumPy in, NumPy out (poisoned C, status checked)
    with gemm.bind(a_buf, b_buf, c_buf, m, n, k) as op:
        op.launch()                               # timing: no sync, no check
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import GemmError
from ..runtime import cubin as cubin_records
from ..runtime.compiler import compile_cubin, warm_cache
from ..runtime.driver import Resource
from ..runtime.status import StatusBuffer, barrier_timeout
from ..tma.tiled.encode import encode_tiled
from ..tma.tiled.spec import Swizzle, TensorMapSpec
from .config import KERNEL_NAME, KERNEL_SOURCE, L2_PROMOTIONS, GemmConfig
from .reference import value_dtype

if TYPE_CHECKING:
    from .conv import ConvShape

POISON_U32 = 0x7FBA7FBA  # NaN as fp32 and in both halves as bf16 / fp16: an element nobody wrote shows
# flag: "stage" is the CTA whose slot; turn: "stage" is the ping-pong warpgroup that waits
BARRIERS = {0: "full", 1: "empty", 2: "stream-K partial-sum flag", 4: "ping-pong turn"}
SITES = {1: "consumer waits for a full stage", 2: "producer waits for an empty stage",
         3: "tile owner waits for another CTA's partial sums", 4: "consumer waits for its ping-pong turn"}
_EIATTR_FRAME_SIZE, _EIATTR_REGCOUNT = 0x11, 0x2F


@dataclass(frozen=True)
class KernelResources:
    registers: int  # per thread, as ptxas allocated for the whole kernel (setmaxnreg moves them at run time)
    frame_bytes: int  # local memory per thread: 0 means no spills and no local arrays


def kernel_resources(image: bytes, kernel: str = KERNEL_NAME) -> KernelResources:
    """Registers and local-memory frame of `kernel` from the cubin's .nv.info records (EIATTR_REGCOUNT,
    EIATTR_FRAME_SIZE), matched to the kernel through the symbol table."""
    sections = cubin_records._sections(image)
    symtab, strtab = sections[".symtab"], sections[".strtab"]
    index = None
    for i in range(len(symtab) // 24):
        name_at = struct.unpack_from("<I", symtab, 24 * i)[0]
        if strtab[name_at:strtab.index(b"\0", name_at)].decode() == kernel:
            index = i
    if index is None:
        raise KeyError(f"{kernel!r} is not in the cubin's symbol table")
    found = {}
    for attr, payload in cubin_records._attributes(sections.get(".nv.info", b"")):
        if attr in (_EIATTR_FRAME_SIZE, _EIATTR_REGCOUNT) and len(payload) >= 8:
            sym, value = struct.unpack_from("<II", payload)
            if sym == index:
                found[attr] = value
    return KernelResources(found.get(_EIATTR_REGCOUNT, -1), found.get(_EIATTR_FRAME_SIZE, 0))


def check_register_split(config: GemmConfig, resources: KernelResources) -> None:
    """setmaxnreg moves registers from the count ptxas allocated: the producer may only give back (dec to at most
    that count), the consumers may only take (inc to at least it)."""
    if not config.setmaxnreg or resources.registers < 0:
        return
    if config.producer_regs > resources.registers:
        raise GemmError("setmaxnreg_direction", "producer_regs", config.producer_regs,
                        f"use at most {resources.registers}", "setmaxnreg.dec cannot raise the allocated count")
    if config.consumer_regs < resources.registers:
        raise GemmError("setmaxnreg_direction", "consumer_regs", config.consumer_regs,
                        f"use at least {resources.registers}", "setmaxnreg.inc cannot lower the allocated count")


def compile_gemm(config: GemmConfig) -> bytes:
    """The cubin of one configuration (NVRTC, cached; CPU only)."""
    return compile_cubin(KERNEL_SOURCE, defines=config.defines())


def warm_gemm_cache(configs, *, extra_defines: dict | None = None) -> int:
    """Compile every configuration's kernel at once on the host's cores (runtime.compiler.warm_cache) before a
    benchmark builds them one by one; a configuration the rules refuse is left for its own error."""
    jobs, seen = [], set()
    for config in configs:
        try:
            defines = {**config.check().defines(), **(extra_defines or {})}
        except GemmError:
            continue
        key = tuple(sorted(defines.items()))
        if key not in seen:
            seen.add(key)
            jobs.append({"source": KERNEL_SOURCE, "defines": defines})
    return warm_cache(jobs)


def map_specs(config: GemmConfig, m: int, n: int, k: int, a_addr: int, b_addr: int, c_addr: int):
    """Tensor maps of the kernel's A and B (boxes of one K panel, the configured swizzle, zero fill past the
    edges): A [m, k] and B [n, k], or swapped B as A and A as B; and C [m, n] (64 rows x 128 B, 128B swizzle: the
    epilogue's staging layout, swapped: bn rows when fewer; stores clip at the edges)."""
    config.check_problem(m, n, k)
    t = config.wgmma.tma_dtype
    sw = config.box_spec("A").swizzle
    (km, kn), (ka, kb) = config.kernel_extents(m, n), config.kernel_operands(a_addr, b_addr)
    l2 = L2_PROMOTIONS[config.l2_promotion]
    # with a cluster each CTA loads (and multicasts) its half of the shared tile's rows: B's along M, A's along N
    a = TensorMapSpec.create(t, (km, k), (config.bm // config.cluster_n, config.panel_elems), swizzle=sw,
                             l2_promotion=l2, base_address=ka)
    b = TensorMapSpec.create(t, (kn, k), (config.bn // config.cluster_m, config.panel_elems), swizzle=sw,
                             l2_promotion=l2, base_address=kb)
    # one store per staging panel: 64 rows by 128 B of C; swapped, epilogue_width of C's rows by 128 B
    rows, cols = (config.epilogue_width, 64) if config.swap_ab else (64, config.epilogue_width)
    c = TensorMapSpec.create(config.out_dtype, (m, n), (rows, cols), swizzle=Swizzle.B128, base_address=c_addr)
    return a, b, c


def describe_wait(w) -> str:
    return f"{BARRIERS.get(w.barrier, w.barrier)} barrier, stage {w.stage}, parity {w.parity} " \
           f"({SITES.get(w.where, w.where)})"


class Gemm:
    """The TMA-fed, warp-specialized wgmma GEMM in one configuration.

    Parameters
    ----------
    config : GemmConfig, optional
        Tile, stages, cluster, dtype and the other claims' switches; checked at construction.

    `bind(a, b, c, m, n, k)` gives a launchable `BoundGemm` on device buffers; the module is compiled and loaded on
    first use.

    Raises
    ------
    GemmError
        A configuration the kernel cannot build, named with the fix.
    """

    def __init__(self, config: GemmConfig | None = None, *, extra_defines: dict | None = None,
                 conv: ConvShape | None = None):
        """`extra_defines` go on top of the configuration's (tests: a short wait timeout, a broken protocol);
        `conv` (a drvtma.gemm.conv.ConvShape): A is that convolution's input through an im2col map."""
        self.config = (config or GemmConfig()).check()
        self.conv = conv.check(self.config) if conv is not None else None
        conv_defines = self.conv.defines(self.config) if self.conv is not None else {}
        self.defines = {**self.config.defines(), **conv_defines, **(extra_defines or {})}
        self._kernel = None

    @property
    def kernel(self):
        if self._kernel is None:
            from ..runtime.compiler import compile_cubin
            from ..runtime.kernel import load_module

            check_register_split(self.config, kernel_resources(compile_cubin(KERNEL_SOURCE, defines=self.defines)))
            self._kernel = load_module(KERNEL_SOURCE, defines=self.defines).kernel(KERNEL_NAME)
        return self._kernel

    def bind(self, a, b, c, m: int, n: int, k: int, *, alpha: float = 1.0) -> BoundGemm:
        """A launchable problem on device buffers a [m, k], b [n, k], c [m, n] (maps encoded once)."""
        return BoundGemm(self, a, b, c, m, n, k, alpha)

    def matmul(self, a: np.ndarray, b: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
        """alpha * a . b^T on the GPU, C poisoned first and every wait checked; returns C in the output type."""
        from ..runtime.driver import DeviceBuffer

        cfg = self.config
        m, k = a.shape
        n = b.shape[0]
        if b.shape[1] != k:
            raise ValueError(f"a is {a.shape} and b is {b.shape}: both need K = {k} columns")
        want = value_dtype(cfg.dtype)
        if a.dtype != want or b.dtype != want:
            raise ValueError(f"operands must be {want} for this configuration, got {a.dtype} and {b.dtype}")
        out = value_dtype(cfg.out_dtype)
        with DeviceBuffer.from_array(np.ascontiguousarray(a)) as da, \
                DeviceBuffer.from_array(np.ascontiguousarray(b)) as db, \
                DeviceBuffer(m * n * out.itemsize) as dc, self.bind(da, db, dc, m, n, k, alpha=alpha) as op:
            op.run_checked()
            return dc.download(out, (m, n))


class BoundGemm(Resource):
    """A GEMM bound to its operands: `launch()` for timing, `run_checked()` poisons C, launches and checks."""

    def __init__(self, gemm: Gemm, a, b, c, m, n, k, alpha):
        from ..runtime.driver import device_properties

        cfg = gemm.config
        self.gemm, self.c, self.m, self.n, self.k, self.alpha = gemm, c, m, n, k, float(alpha)
        sa, sb, sc = map_specs(cfg, m, n, k, a.ptr, b.ptr, c.ptr)
        a, b = cfg.kernel_operands(a, b)  # the buffers behind the kernel's A and B maps
        if gemm.conv is not None:  # A: the convolution's input [N, H, W, C] through its im2col map
            from ..tma.im2col.encode import encode_im2col

            map_a = encode_im2col(gemm.conv.a_spec(cfg, a.ptr), a)
        else:
            map_a = encode_tiled(sa, a)
        self.maps = (map_a, encode_tiled(sb, b), encode_tiled(sc, c))
        self.status = StatusBuffer()
        self.kernel_mn = cfg.kernel_extents(m, n)
        self.grid = cfg.grid(*self.kernel_mn, device_properties().sm_count)
        # the launch shape as the same objects every launch: Kernel.launch's fast path compares them by identity
        self._block, self._smem = cfg.threads, cfg.smem_bytes
        self.kernel = gemm.kernel
        self.profile = None  # grid x 8 u64 counters of a GEMM_PROFILE=1 build: attach_profile
        self.cluster = cfg.cluster
        # the launch's arguments, kept while they do not change (Kernel.launch's fast path)
        self._args: tuple | None = None
        # stream-K: one fp32 tile of partial sums per CTA, a flag per CTA that holds the epoch its slot was written
        # in (a fresh epoch each launch: no reset, and a launch cut short leaves nothing the next one could trust)
        self.workspace = self.flags = None
        self.epoch = 0
        if cfg.streamk:
            from ..runtime.driver import DeviceBuffer

            self.workspace = DeviceBuffer(self.grid * cfg.bm * cfg.bn * 4)
            self.flags = DeviceBuffer(self.grid * 4)
            self.flags.fill_u32(0)

    def attach_profile(self, counters) -> None:
        """The DeviceBuffer a GEMM_PROFILE=1 build writes its per-CTA counters into (drvtma.gemm.profile)."""
        self.profile, self._args = counters, None

    def launch(self, stream=None) -> None:
        if self.flags is not None:  # stream-K: a new epoch each launch, so its arguments change each launch
            self.epoch = self.epoch % 0xFFFFFFFF + 1  # never 0, the flags' initial value
            self._args = None
        if self._args is None:
            optional = tuple(0 if b is None else b for b in (self.profile, self.workspace, self.flags))
            self._args = (*self.maps, *self.kernel_mn, self.k, self.alpha, self.status, *optional,
                          np.uint32(self.epoch))
        self.kernel.launch(*self._args, grid=self.grid, block=self._block, shared_mem=self._smem, stream=stream,
                           cluster=self.cluster)

    def run_checked(self, stream=None) -> None:
        """Poison C, launch, synchronise, raise BarrierTimeout if a wait ran out."""
        self.c.fill_u32(POISON_U32)
        self.status.reset()
        self.launch(stream)
        error = barrier_timeout(KERNEL_NAME, self.status.read(), describe_wait)
        if error is not None:
            raise error

    def _parts(self) -> tuple:
        return self.status, self.workspace, self.flags
