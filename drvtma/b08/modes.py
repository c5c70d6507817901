"""The B-08 modes on the GPU: launch shapes, input guards, checked launches and timed launches.

A mode is a kernel (cu/b08/b08_modes.cu, cu/b08/pipelines.cu) plus the way it fills shared memory; `ModeConfig` is one
launch shape of it; `B08Runner` holds one input on the device and launches, verifies (drvtma.b08.verify) and times
any mode on it. The checks on configurations and inputs run before any driver call, so they work on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import LaunchError
from ..runtime.driver import Resource, smem_per_block_optin
from ..runtime.status import StatusBuffer, barrier_timeout
from . import ring
from .verify import SUMS_POISON, TILE_BYTES, TILE_ELEMS, Reference, TileInput, check_tile_sums

if TYPE_CHECKING:
    from ..runtime.driver import DeviceBuffer

STATIC_SMEM_RESERVE = 1024  # the ring kernels' barriers and alignment, next to the dynamic ring
MAX_STAGES = 16  # kMaxStages in cu/b08/pipelines.cu
MAX_N = 1 << 32  # the kernels mix a 32-bit element index into the checksums
TRACE_POISON = 0xFFFFFFFF

# Barrier ids and call sites the kernels write into DrvtmaStatus (b08_tile.cuh).
BARRIER_NAMES = {0: "full", 1: "empty"}
SITE_NAMES = {1: "a consumer's wait on a full barrier", 2: "the producer's wait on an empty barrier"}


def describe_wait(w) -> str:
    """A ring kernel's timed-out wait in words: `full[2] parity 1 (a consumer's wait on a full barrier)`."""
    site = SITE_NAMES.get(w.where, f"site {w.where}")
    return f"{BARRIER_NAMES.get(w.barrier, f'barrier {w.barrier}')}[{w.stage}] parity {w.parity} ({site})"


@dataclass(frozen=True)
class Mode:
    name: str
    source: str  # file under cu/
    kernel: str
    copy: str  # "loads" (ordinary loads), "bulk" (1D cp.async.bulk) or "tensor" (2D tensor map)
    tiling: str  # "linear" (tile t = 4 KiB at t * 4 KiB) or "box" (32x32 boxes of a 2D view)
    ring: bool  # takes stages, tiles_per_stage and a trace
    producer_warp: bool
    summary: str


def _article(name: str, copy: str, tiling: str, summary: str) -> Mode:
    """One of the article's four modes: kernel b08_<name> of cu/b08/b08_modes.cu, no ring."""
    return Mode(name, "b08/b08_modes.cu", f"b08_{name}", copy, tiling, False, False, summary)


def _ring(name: str, kernel: str, producer_warp: bool, summary: str) -> Mode:
    """A k-stage ring of cu/b08/pipelines.cu: 1D bulk copies of linear tiles."""
    return Mode(name, "b08/pipelines.cu", kernel, "bulk", "linear", True, producer_warp, summary)


MODES: dict[str, Mode] = {m.name: m for m in (
    _article("sync", "loads", "linear", "the whole block loads the tile with ordinary loads, then computes"),
    _article("bulk1d", "bulk", "linear", "one thread issues a 1D bulk copy of the tile; everyone waits at once"),
    _article("tensor2d", "tensor", "box", "one thread issues a 32x32 tensor-map copy; everyone waits at once"),
    _article("pipe2", "bulk", "linear",
             "two stages; a stage is refilled once the block has computed on it (the article's pipe2)"),
    _ring("pipeN", "pipe_ring", False,
          "k-stage ring; a stage is refilled as soon as every thread holds its elements in registers"),
    _ring("ws", "ws_ring", True,
          "a producer warp fills a k-stage ring (full/empty barriers); consumer warps release stages early"),
)}
ARTICLE_MODES = ("sync", "bulk1d", "tensor2d", "pipe2")
ALL_MODES = tuple(MODES)

# DRVTMA_FAULT values of cu/b08/pipelines.cu. missing_arrive: pipeN's issuer announces bytes without arriving;
# ws's first consumer warp never releases its first stage. wrong_parity: ws's producer starts on phase 0.
FAULTS = {"expect_tx_low": 1, "expect_tx_high": 2, "missing_arrive": 3, "wrong_parity": 4}
FAULTS_BY_MODE = {"pipeN": ("expect_tx_low", "expect_tx_high", "missing_arrive"), "ws": tuple(FAULTS)}
# The same faults as drvtma.b08.ring.RingSimulation names them; its model predicts which waits hang.
RING_MODEL_FAULT = {("ws", "expect_tx_low"): "expect_tx_low", ("ws", "expect_tx_high"): "expect_tx_high",
                    ("ws", "missing_arrive"): "missing_release", ("ws", "wrong_parity"): "producer_parity",
                    ("pipeN", "expect_tx_low"): "expect_tx_low", ("pipeN", "expect_tx_high"): "expect_tx_high",
                    ("pipeN", "missing_arrive"): "missing_arrive"}
# DRVTMA_RING_PART values of cu/b08/pipelines.cu: the whole ring, or one half of its work (timing probes that
# `drvtma bench floors` uses to bound a ring; their sums cannot be verified).
RING_PARTS = {"full": 0, "copy_only": 1, "compute_only": 2}


@dataclass(frozen=True)
class ModeConfig:
    """One launch shape of a mode. ``threads`` counts consumer threads (ws adds its producer warp).

    ``stages``/``tiles_per_stage`` apply to the ring modes; pipe2 has two one-tile stages, the others one tile.
    ``split`` (ring modes): "thread", every consumer thread takes elements of every tile, as the article's kernels
    do; or "warp", each consumer warp owns whole tiles of a fill (same FMAs per element, one wait, reduction and
    release per owned tile). ``fault`` builds a deliberately broken ring (tests); ``wait_timeout_ns`` bounds every
    mbarrier wait. ``part`` (ring modes): "full", or "copy_only" / "compute_only", the half-rings whose times bound
    the full ring's (drvtma.b08.floors).
    """

    mode: str
    threads: int = 256
    tiles_per_block: int = 64
    stages: int | None = None
    tiles_per_stage: int | None = None
    split: str = "thread"
    fault: str | None = None
    wait_timeout_ns: int | None = None
    part: str = "full"
    name: str | None = None  # column name in sweeps; the mode's name by default

    def __post_init__(self):
        if self.mode not in MODES:
            raise LaunchError(f"unknown mode {self.mode!r}; modes: {', '.join(MODES)}")
        spec = MODES[self.mode]
        inherent = {"pipe2": 2}.get(self.mode, 1)
        put = object.__setattr__
        if spec.ring:
            put(self, "stages", 4 if self.stages is None else int(self.stages))
            put(self, "tiles_per_stage", 1 if self.tiles_per_stage is None else int(self.tiles_per_stage))
        else:
            for what, value, want in (("stages", self.stages, inherent), ("tiles_per_stage", self.tiles_per_stage, 1)):
                if value is not None and value != want:
                    raise LaunchError(f"{self.mode} has {want} as {what}; only pipeN and ws take other values")
            put(self, "stages", inherent)
            put(self, "tiles_per_stage", 1)
        put(self, "name", self.name or self.mode)
        self._validate()

    def _validate(self) -> None:
        t = self.threads
        if t % 32 or not 32 <= t <= 1024:
            raise LaunchError(f"{self.mode}: threads = {t} must be a multiple of 32 in [32, 1024]")
        if self.block_threads > 1024:
            raise LaunchError(f"ws: {t} consumer threads + a producer warp exceed 1024 threads per block")
        if self.tiles_per_block < 1:
            raise LaunchError(f"tiles_per_block must be >= 1, got {self.tiles_per_block}")
        assert self.stages is not None and self.tiles_per_stage is not None  # __post_init__ filled them in
        if not 1 <= self.stages <= MAX_STAGES:
            raise LaunchError(f"{self.mode}: stages = {self.stages} must be in [1, {MAX_STAGES}]")
        if self.tiles_per_stage < 1:
            raise LaunchError(f"{self.mode}: tiles_per_stage must be >= 1, got {self.tiles_per_stage}")
        if self.smem_bytes + STATIC_SMEM_RESERVE > smem_per_block_optin():
            raise LaunchError(f"{self.mode}: a ring of {self.stages} x {self.tiles_per_stage} tiles needs "
                              f"{self.smem_bytes} B of shared memory; a block has {smem_per_block_optin()} B")
        if self.split not in ("thread", "warp"):
            raise LaunchError(f"split must be 'thread' or 'warp', got {self.split!r}")
        if self.split == "warp" and not self.spec.ring:
            raise LaunchError(f"{self.mode} splits every tile among all its threads; only pipeN and ws take "
                              "split='warp'")
        if self.part not in RING_PARTS:
            raise LaunchError(f"part must be one of {', '.join(RING_PARTS)}, got {self.part!r}")
        if self.part != "full" and (not self.spec.ring or self.fault is not None):
            raise LaunchError(f"{self.mode}: part={self.part!r} splits a working ring (pipeN, ws, no fault) in halves")
        if self.fault is not None:
            allowed = FAULTS_BY_MODE.get(self.mode, ())
            if self.fault not in allowed:
                raise LaunchError(f"{self.mode} has no fault {self.fault!r}; it has {', '.join(allowed) or 'none'}")

    @property
    def spec(self) -> Mode:
        return MODES[self.mode]

    @property
    def block_threads(self) -> int:
        return self.threads + (32 if self.spec.producer_warp else 0)

    @property
    def consumer_warps(self) -> int:
        return self.threads // 32

    @property
    def sum_slots(self) -> int:
        """Checksum pairs the kernel writes per tile: one per consumer warp, or one when a warp owns the tile."""
        return 1 if self.split == "warp" else self.consumer_warps

    @property
    def stage_bytes(self) -> int:
        assert self.tiles_per_stage is not None  # __post_init__ filled it in
        return self.tiles_per_stage * TILE_BYTES

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory of a launch (the ring); the article kernels use static shared memory only."""
        assert self.stages is not None  # __post_init__ filled it in
        return self.stages * self.stage_bytes if self.spec.ring else 0

    @property
    def bytes_in_flight(self) -> int:
        """Most bytes one block can have requested and not consumed."""
        assert self.stages is not None  # __post_init__ filled it in
        return {"sync": TILE_BYTES}.get(self.mode, self.stages * self.stage_bytes)

    def grid(self, num_tiles: int) -> int:
        return -(-num_tiles // self.tiles_per_block)

    def defines(self) -> dict:
        d: dict[str, int | str] = {"B08_THREADS": self.threads}
        if self.split == "warp":
            d["B08_WARP_TILES"] = 1
        if self.fault is not None:
            d["DRVTMA_FAULT"] = FAULTS[self.fault]
        if self.wait_timeout_ns is not None:
            d["DRVTMA_WAIT_TIMEOUT_NS"] = f"{int(self.wait_timeout_ns)}ull"
        if self.part != "full":
            d["DRVTMA_RING_PART"] = RING_PARTS[self.part]
        return d

    def describe(self) -> str:
        parts = [f"{self.threads} threads" + (" + producer warp" if self.spec.producer_warp else ""),
                 f"{self.tiles_per_block} tiles/block"]
        if self.spec.ring:
            parts.insert(0, f"{self.stages} stages x {self.tiles_per_stage} tile(s)")
            if self.split == "warp":
                parts.append("warp-owned tiles")
        if self.fault:
            parts.append(f"fault {self.fault}")
        if self.part != "full":
            parts.append(self.part.replace("_", " "))
        return f"{self.name}: " + ", ".join(parts)

    def with_(self, **changes) -> ModeConfig:
        return replace(self, **changes)


def predicted_timeouts(cfg: ModeConfig, num_tiles: int) -> set[tuple[int, int, int]]:
    """(barrier id, stage, parity) of every wait the ring model says hangs in a launch of a broken `cfg`.

    A BarrierTimeout from that launch must report one of them. Empty when the fault cannot show (no block laps its
    ring where the fault needs a second lap).
    """
    if cfg.fault is None:
        return set()
    assert cfg.stages is not None and cfg.tiles_per_stage is not None  # ModeConfig.__post_init__ filled them in
    out = set()
    for block in range(cfg.grid(num_tiles)):
        _, count = ring.block_tiles(block, num_tiles, cfg.tiles_per_block)
        sim = ring.RingSimulation(cfg.stages, count, cfg.tiles_per_stage, cfg.consumer_warps,
                                  fault=RING_MODEL_FAULT[(cfg.mode, cfg.fault)])
        outcome = sim.run(lambda options: options[0])  # the model hangs the same way in every interleaving
        for bar, stage, parity in outcome.stuck:
            if cfg.spec.producer_warp or bar == "full":  # pipeN's issuer never waits on an empty barrier
                out.add((ring.STUCK_BARRIER_IDS[bar], stage, parity))
    return out


# ------------------------------------------------------------------------------------------ input guards

def check_problem_size(n: int) -> int:
    """The tile count of n fp32 elements; refuses n that the kernels cannot cover exactly."""
    if n <= 0:
        raise LaunchError(f"n = {n}: the input needs at least one {TILE_ELEMS}-element tile")
    if n % TILE_ELEMS:
        lo = n // TILE_ELEMS * TILE_ELEMS
        raise LaunchError(f"n = {n} is not a multiple of the {TILE_ELEMS}-element tile (4 KiB); drvtma does not "
                          "pad: pass " + (f"{lo} or {lo + TILE_ELEMS}" if lo else f"{TILE_ELEMS}") + " elements")
    if n > MAX_N:
        raise LaunchError(f"n = {n} exceeds {MAX_N} elements (the checksums index elements with 32 bits)")
    return n // TILE_ELEMS


def check_alignment(mode: str, address: int) -> None:
    """Refuse an input address a mode cannot load from: bulk and tensor copies need 16 bytes, loads 4."""
    need = 4 if MODES[mode].copy == "loads" else 16
    if address % need:
        why = {"bulk": "cp.async.bulk needs 16-byte aligned global addresses (anything else is undefined behaviour)",
               "tensor": "a tensor map's global address must be a multiple of 16",
               "loads": "fp32 loads need 4-byte alignment"}[MODES[mode].copy]
        raise LaunchError(f"{mode}: input address 0x{address:x} is {address % need} bytes past a {need}-byte "
                          f"boundary; {why}. Copy the data to an aligned buffer (DeviceBuffer allocations are "
                          f"256-byte aligned).")


def tiles_x_for(num_tiles: int) -> int:
    """The 2D view's width in tiles, as the article picks it: the largest divisor of the tile count <= sqrt."""
    tx = max(1, math.isqrt(num_tiles))
    while num_tiles % tx:
        tx -= 1
    return tx


# ------------------------------------------------------------------------------------------ on the GPU

@dataclass
class LaunchArgs:
    """What one launch needs besides the kernel: for tests that call Kernel.launch themselves."""

    args: tuple
    grid: int
    block: int
    shared_mem: int


@dataclass
class Trace:
    """Per-wait records of a ring kernel: raw[block, role, iteration] = (stage | parity << 16, first tile)."""

    buffer: DeviceBuffer
    blocks: int
    roles: int
    capacity: int

    def download(self) -> np.ndarray:
        return self.buffer.download(np.uint32, (self.blocks, self.roles, self.capacity, 2))


@dataclass
class B08Runner(Resource):
    """One fp32 input on the device, and everything to launch, verify and time the modes on it.

    Build with `upload` (host data) or directly around a DeviceBuffer (``offset_bytes`` into it).
    """

    buffer: object
    n: int
    offset_bytes: int = 0
    reference: Reference | None = None
    num_tiles: int = field(init=False)
    address: int = field(init=False)
    tiles_x: int = field(init=False)

    def __post_init__(self):
        self.num_tiles = check_problem_size(self.n)
        self.address = int(self.buffer.ptr) + int(self.offset_bytes)
        if self.offset_bytes < 0 or self.offset_bytes + self.n * 4 > self.buffer.nbytes:
            raise LaunchError(f"{self.n} fp32 elements at offset {self.offset_bytes} do not fit the "
                              f"{self.buffer.nbytes} B buffer")
        self.tiles_x = tiles_x_for(self.num_tiles)
        self.status = StatusBuffer()
        self._sums = None
        self._tmap = None
        self._flush = None

    @classmethod
    def upload(cls, data: np.ndarray | TileInput) -> B08Runner:
        from ..runtime.driver import DeviceBuffer

        inp = data if isinstance(data, TileInput) else TileInput.from_array(data)
        check_problem_size(inp.n)
        return cls(DeviceBuffer.from_array(inp.data), inp.n, reference=Reference(inp))

    # -- resources
    def sums_buffer(self, cfg: ModeConfig):
        from ..runtime.driver import DeviceBuffer

        need = self.num_tiles * cfg.sum_slots * 8
        if self._sums is None or self._sums.nbytes < need:
            if self._sums is not None:
                self._sums.close()
            self._sums = DeviceBuffer(need)
        return self._sums

    def tensor_map(self):
        """The 2D view [rows, 32 * tiles_x] with a 32x32 box, encoded once."""
        if self._tmap is None:
            from ..tma.tiled.encode import encode_tiled
            from ..tma.tiled.spec import TensorMapSpec

            width = self.tiles_x * 32
            spec = TensorMapSpec.create("float32", (self.n // width, width), (32, 32))
            self._tmap = encode_tiled(spec, self.address)
        return self._tmap

    def kernel(self, cfg: ModeConfig):
        from ..runtime.kernel import load_module

        return load_module(cfg.spec.source, defines=cfg.defines()).kernel(cfg.spec.kernel)

    def new_trace(self, cfg: ModeConfig) -> Trace:
        from ..runtime.driver import DeviceBuffer

        if not cfg.spec.ring:
            raise LaunchError(f"{cfg.mode} records no trace; only pipeN and ws do")
        blocks = cfg.grid(self.num_tiles)
        roles = cfg.consumer_warps + (1 if cfg.spec.producer_warp else 0)
        assert cfg.tiles_per_stage is not None  # ModeConfig.__post_init__ filled it in
        capacity = -(-cfg.tiles_per_block // cfg.tiles_per_stage)
        buf = DeviceBuffer(blocks * roles * capacity * 8)
        buf.fill_u32(TRACE_POISON)
        return Trace(buf, blocks, roles, capacity)

    # -- launches
    def launch_args(self, cfg: ModeConfig, fma_iters: int, trace: Trace | None = None) -> LaunchArgs:
        check_alignment(cfg.mode, self.address)
        if fma_iters < 0 or fma_iters >= 1 << 31:
            raise LaunchError(f"fma_iters must be in [0, 2^31), got {fma_iters}")
        sums = self.sums_buffer(cfg)
        common = (sums, self.num_tiles, cfg.tiles_per_block, int(fma_iters))
        args: tuple
        if cfg.mode == "tensor2d":
            args = (self.tensor_map(), *common, self.tiles_x, self.status)
        elif cfg.spec.ring:
            tr = (trace.buffer, trace.capacity) if trace is not None else (0, 0)
            args = (self.address, *common, cfg.stages, cfg.tiles_per_stage, self.status, *tr)
        else:
            args = (self.address, *common, self.status)
        return LaunchArgs(args, cfg.grid(self.num_tiles), cfg.block_threads, cfg.smem_bytes)

    def launch(self, cfg: ModeConfig, fma_iters: int, *, stream=None, trace: Trace | None = None) -> None:
        """One asynchronous launch (no checks of the result)."""
        la = self.launch_args(cfg, fma_iters, trace)
        self.kernel(cfg).launch(*la.args, grid=la.grid, block=la.block, shared_mem=la.shared_mem, stream=stream)

    def run_checked(self, cfg: ModeConfig, fma_iters: int, *, trace: Trace | None = None,
                    verify: bool = True) -> np.ndarray:
        """Poison the sums, launch, wait; raise BarrierTimeout or ChecksumMismatch; return the raw sums."""
        from ..runtime.driver import synchronize

        sums = self.sums_buffer(cfg)
        sums.fill_u32(SUMS_POISON)
        self.status.reset()
        self.launch(cfg, fma_iters, trace=trace)
        synchronize()
        self.check_status(cfg)
        raw = sums.download(np.uint32, (self.num_tiles, cfg.sum_slots, 2))
        if verify:
            if cfg.part != "full":
                raise LaunchError(f"{cfg.describe()}: a {cfg.part} probe computes no checkable sums; pass verify=False")
            if self.reference is None:
                raise LaunchError("this runner has no reference input; build it with B08Runner.upload")
            tiling = cfg.spec.tiling
            exp_in, exp_out = self.reference.sums(fma_iters, tiling=tiling,
                                                  tiles_x=self.tiles_x if tiling == "box" else None)
            assert cfg.name is not None  # ModeConfig.__post_init__ filled it in
            check_tile_sums(cfg.name, raw, exp_in, exp_out, fma_iters=fma_iters)
        return raw

    def check_status(self, cfg: ModeConfig, when: str = "") -> None:
        """Raise BarrierTimeout (naming the kernel, its shape and which waits) if a launch since reset() timed out."""
        label = f"{cfg.spec.kernel} ({cfg.describe()}{', ' + when if when else ''})"
        e = barrier_timeout(label, self.status.read(), describe=describe_wait)
        if e is not None:
            raise e

    def flush_l2(self) -> None:
        """Evict the input from L2 by writing a buffer twice its size."""
        from ..runtime.driver import DeviceBuffer, device_properties

        if self._flush is None:
            self._flush = DeviceBuffer(2 * max(device_properties().l2_bytes, 1 << 20))
        self._flush.fill_u32(0x5A5A5A5A)

    def _parts(self) -> tuple:
        return self._sums, self._flush, self.status
