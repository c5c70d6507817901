"""Tensor maps outside the parameter bank, on the GPU: maps in global memory (`MapSlots`), a `__constant__` map,
maps edited on the device (`ReplaceJob`, `GlobalMapRunner.replace_load`) and the rewrite probe behind the pitfalls.

Every runner returns raw shared-memory images (as drvtma.tma.tiled.probe does), so callers compare them with the
oracle; `replace_load` also returns the 128 bytes the device published, for drvtma.tma.tiled.decode. Kernels:
cu/tma/global_map.cu.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import TensorMapError
from ...runtime.driver import Resource, ScratchBuffers, call
from ...runtime.status import StatusBuffer
from ..tiled import oracle
from ..tiled.decode import map_bytes
from ..tiled.probe import IMAGE_ALIGN_SLACK, POISON
from ..tiled.spec import TENSOR_MAP_BYTES, TensorMapSpec
from .replace import Edit

SOURCE = "tma/global_map.cu"
THREADS = 128
JOB_WORDS = 48  # cu/tma/global_map.cu kJobWords
MAX_EDITS = 8
FENCES = {"none": 0, "gpu": 1, "sys": 2}
# The driver documents 64-byte alignment for a map's address (CUDA 13 headers, PTX's examples and Triton use 128).
# A map at +64 B loads right, at +32 or +16 B the load fails (docs/tensormap.md; test_tensormap_pitfalls_gpu.py).
MAP_ALIGNMENT = 64


def _map_bytes(tmap) -> np.ndarray:
    return np.frombuffer(map_bytes(tmap), dtype=np.uint8)


def check_map_address(address: int, *, alignment: int = MAP_ALIGNMENT) -> None:
    """Refuse a global map address the hardware may not take (rule ``map_alignment``)."""
    if address % alignment:
        raise TensorMapError("map_alignment", "map address", hex(address),
                             f"place the map at a multiple of {alignment} B (drvtma's MapSlots use 128)",
                             f"0x{address:x} is {address % alignment} B past a {alignment}-byte boundary")


class MapSlots(Resource):
    """`count` 128-byte tensor-map slots in global memory, each 128-byte aligned (one DeviceBuffer, owned)."""

    def __init__(self, count: int, *, offset: int = 0):
        from ...runtime.driver import DeviceBuffer

        self.count, self.offset = int(count), int(offset)
        self.buffer = DeviceBuffer(self.count * TENSOR_MAP_BYTES + 256)
        # Zeroed: a slot a CTA publishes with tensormap.cp_fenceproxy is written by a path compute-sanitizer's
        # initcheck does not track, so the TMA's later read of it would count as uninitialized.
        self.buffer.fill_u8(0)
        self.base = self.buffer.ptr + self.offset  # offset != 0 only for the misaligned-map experiment

    def address(self, i: int = 0) -> int:
        if not 0 <= i < self.count:
            raise IndexError(f"slot {i} of {self.count}")
        return self.base + i * TENSOR_MAP_BYTES

    def write(self, i: int, tmap) -> None:
        """Copy a map (TensorMap, bytes) into slot i with cuMemcpyHtoD (readers need a .sys acquire)."""
        self.buffer.upload(_map_bytes(tmap), self.offset + i * TENSOR_MAP_BYTES)

    def write_all(self, tmap) -> None:
        self.buffer.upload(np.tile(_map_bytes(tmap), self.count), self.offset)

    def read(self, i: int | None = None) -> np.ndarray:
        """The bytes of slot i, or of every slot as (count, 128)."""
        if i is None:
            return self.buffer.download(np.uint8, (self.count, TENSOR_MAP_BYTES), self.offset)
        return self.buffer.download(np.uint8, (TENSOR_MAP_BYTES,), self.offset + i * TENSOR_MAP_BYTES)

    def _parts(self) -> tuple:
        return (self.buffer,)


@dataclass
class ReplaceJob:
    """One CTA of `replace_load`: edits applied in order to a copy of the template (or to zeros), then a load."""

    edits: list[Edit]
    spec: TensorMapSpec | None = None  # what the host model says the edited map is; None: publish only
    coords: tuple[int, ...] = ()  # NumPy order
    from_zeros: bool = False

    def to_words(self) -> np.ndarray:
        if len(self.edits) > MAX_EDITS:
            raise ValueError(f"at most {MAX_EDITS} edits per job, got {len(self.edits)}")
        w = np.zeros(JOB_WORDS, dtype=np.uint32)
        w[0] = len(self.edits)
        if self.spec is not None:
            c = oracle.check_load_coordinates(self.spec, [self.coords])[0]
            w[1], w[2], w[3] = self.spec.rank, self.spec.expect_tx_bytes, 1
            w[5:5 + self.spec.rank] = c[::-1].astype(np.int64) & 0xFFFFFFFF
        w[4] = int(self.from_zeros)
        for i, e in enumerate(self.edits):
            w[16 + 4 * i:20 + 4 * i] = e.to_words()
        return w


@dataclass
class ReplaceResult:
    published: np.ndarray  # (N, 128) uint8: the maps the device published
    edit_ok: np.ndarray  # (N,) uint32, bit i: edit i had a PTX encoding
    images: np.ndarray  # (N, image_bytes) uint8 (poison where a job did not load)
    timeouts: int = 0
    extra: dict = field(default_factory=dict)


class GlobalMapRunner(Resource):
    """The kernels of cu/tma/global_map.cu with reusable scratch."""

    def __init__(self, *, defines=None):
        from ...runtime.kernel import load_module

        self.module = load_module(SOURCE, defines=defines)
        self.status = StatusBuffer()
        self.scratch = ScratchBuffers()
        self.buffer = self.scratch.get

    def _coords(self, spec: TensorMapSpec, coords) -> tuple[np.ndarray, object]:
        c = oracle.check_load_coordinates(spec, coords)
        rows = oracle.kernel_coordinates(spec, c)
        buf = self.buffer("coords", rows.nbytes)
        buf.upload(rows)
        return c, buf

    def _images(self, n: int, image_bytes: int):
        return self.buffer("images", n * image_bytes)

    def load_global(self, map_address: int, spec: TensorMapSpec, coords, *, fence: str = "sys",
                    prefetch: bool = False, box_offset: int = 0, poison: int = POISON,
                    check: bool = True) -> np.ndarray:
        """(N, image_bytes) images of loads through the map at `map_address` (global memory), one box per CTA."""
        if check:
            check_map_address(map_address)
        c, coords_buf = self._coords(spec, coords)
        image_bytes = oracle.image_bytes_for(spec, box_offset)
        images = self._images(len(c), image_bytes)
        self.status.reset()
        self.module.kernel("global_map_load").launch(
            int(map_address), FENCES[fence], int(prefetch), spec.rank, coords_buf, box_offset, image_bytes,
            spec.expect_tx_bytes, poison & 0xFFFFFFFF, images, self.status, grid=len(c), block=THREADS,
            shared_mem=image_bytes + IMAGE_ALIGN_SLACK)
        out = images.download(np.uint8, (len(c), image_bytes))
        self.status.check("global_map_load")
        return out

    def write_const_map(self, tmap) -> None:
        """Copy a map into the module's `__constant__` map (cuLibraryGetGlobal + cuMemcpyHtoD)."""
        from cuda.bindings import driver as cu

        ptr, size = call(cu.cuLibraryGetGlobal, self.module.handle, b"drvtma_const_map")
        if int(size) != TENSOR_MAP_BYTES:
            raise RuntimeError(f"drvtma_const_map is {int(size)} bytes")
        raw = np.ascontiguousarray(_map_bytes(tmap))
        call(cu.cuMemcpyHtoD, int(ptr), raw.ctypes.data, TENSOR_MAP_BYTES)

    def load_const(self, spec: TensorMapSpec, coords, *, prefetch: bool = False, box_offset: int = 0,
                   poison: int = POISON) -> np.ndarray:
        """Images of loads through the `__constant__` map (write it first with `write_const_map`)."""
        c, coords_buf = self._coords(spec, coords)
        image_bytes = oracle.image_bytes_for(spec, box_offset)
        images = self._images(len(c), image_bytes)
        self.status.reset()
        self.module.kernel("const_map_load").launch(
            int(prefetch), spec.rank, coords_buf, box_offset, image_bytes, spec.expect_tx_bytes,
            poison & 0xFFFFFFFF, images, self.status, grid=len(c), block=THREADS,
            shared_mem=image_bytes + IMAGE_ALIGN_SLACK)
        out = images.download(np.uint8, (len(c), image_bytes))
        self.status.check("const_map_load")
        return out

    def replace_load(self, template, jobs: list[ReplaceJob], *, fence: str = "gpu", image_bytes: int | None = None,
                     poison: int = POISON, raise_timeouts: bool = True) -> ReplaceResult:
        """Run one CTA per job: copy `template` (TensorMap or bytes) to shared memory, apply the job's edits,
        publish to a global slot, acquire, load. Returns what was published and the images."""
        from ...runtime.driver import DeviceBuffer

        n = len(jobs)
        if image_bytes is None:
            image_bytes = max([oracle.image_bytes_for(j.spec) for j in jobs if j.spec is not None] or [16])
        words = np.stack([j.to_words() for j in jobs])
        jobs_buf = self.buffer("jobs", words.nbytes)
        jobs_buf.upload(words)
        tmpl = self.buffer("template", 256)
        tmpl.upload(_map_bytes(template))
        with MapSlots(n) as slots, DeviceBuffer(4 * n) as ok:
            slots.buffer.fill_u8(0xEE)  # poison: a slot nothing was published to shows
            ok.fill_u32(0)
            images = self._images(n, image_bytes)
            self.status.reset()
            self.module.kernel("replace_load").launch(
                tmpl, jobs_buf, slots.base, FENCES[fence], 0, image_bytes, poison & 0xFFFFFFFF, images, ok,
                self.status, grid=n, block=THREADS, shared_mem=image_bytes + IMAGE_ALIGN_SLACK)
            result = ReplaceResult(slots.read(), ok.download(np.uint32, (n,)),
                                   images.download(np.uint8, (n, image_bytes)))
        result.timeouts = int(self.status.read()["timeouts"])
        if raise_timeouts:
            self.status.check("replace_load")
        return result

    def rewrite_probe(self, map_a, map_b, spec: TensorMapSpec, coords, *, blocks: int, in_flight: bool,
                      acquire: bool) -> np.ndarray:
        """(blocks, 2, 3) word counts per load (A, B, other): load 1 through slot = A, rewrite the slot with B on
        the device (after load 1 completed, or while it may be in flight), load 2 with or without an acquire."""
        _, coords_buf = self._coords(spec, [coords])
        b = self.buffer("map_b", 256)
        b.upload(_map_bytes(map_b))
        image_bytes = -(-spec.smem_bytes // 1024) * 1024
        counts = self.buffer("counts", blocks * 6 * 4)
        counts.fill_u32(0xFFFFFFFF)
        mode = int(in_flight) | (2 if acquire else 0) | 4
        with MapSlots(blocks) as slots:
            slots.write_all(map_a)
            self.status.reset()
            self.module.kernel("rewrite_probe").launch(
                slots.base, b, mode, spec.rank, coords_buf, image_bytes, spec.expect_tx_bytes, counts, self.status,
                grid=blocks, block=THREADS, shared_mem=2 * image_bytes + IMAGE_ALIGN_SLACK)
            out = counts.download(np.uint32, (blocks, 2, 3))
        self.status.check("rewrite_probe")
        return out

    def _parts(self) -> tuple:
        return self.scratch, self.status
