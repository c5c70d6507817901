"""The batched GPU runner of tensor stores, reductions and bulk stores (cu/tma/store_probe.cu, one box per CTA),
compared byte for byte, guards included, with the stores `oracle`."""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ...errors import ArgumentError
from ...runtime import driver
from ..tiled.encode import encode_tiled
from ..tiled.rules import round_up
from .cases import StoreCase, check_case, random_values
from .oracle import apply_store, smem_from_box
from .rules import CHUNK_BYTES, OP_CODES, STORE, SWIZZLE_PERIOD, check_bulk_store

# Mirrors struct StoreJob / BulkStoreJob in cu/tma/store_probe.cu.
STORE_JOB_DTYPE = np.dtype([("image_offset", "<i8"), ("image_bytes", "<u4"), ("smem_offset", "<u4"),
                            ("rank", "<i4"), ("op", "<i4"), ("coords", "<i4", (5,)), ("pad", "<i4")])
BULK_JOB_DTYPE = np.dtype([("src_offset", "<i8"), ("dst_offset", "<i8"), ("bytes", "<u4"), ("pad", "<u4")])
GUARD_BYTES = 512  # poison before and after every tensor, to catch stray writes
PROBE_THREADS = 128
_SMEM_SLACK = 2 * SWIZZLE_PERIOD  # worst-case realignment to 1024 plus a source offset below 1024


@dataclass
class CaseResult:
    case: StoreCase
    base_offset: int  # tensor base, bytes into the batch buffer
    mismatched_bytes: np.ndarray  # offsets (into the batch buffer) of bytes that differ from the oracle
    box: np.ndarray  # the box the store wrote (loaded_counts shape, dtype carrier)

    @property
    def ok(self) -> bool:
        return self.mismatched_bytes.size == 0


@dataclass
class StoreBatchResult:
    cases: list[CaseResult]
    before: np.ndarray  # the whole buffer as uploaded (poison, tensors)
    expected: np.ndarray
    got: np.ndarray
    counts: dict = field(default_factory=dict)

    @property
    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.ok]

    def report(self, limit: int = 3) -> str:
        """The first failing cases with their first mismatching bytes (offset from the tensor base)."""
        lines = []
        for c in self.failures[:limit]:
            rel = c.mismatched_bytes[:8]
            detail = ", ".join(f"{int(o) - c.base_offset:+d}: want {self.expected[o]:#04x} got {self.got[o]:#04x}"
                               for o in rel)
            lines.append(f"{c.mismatched_bytes.size} byte(s) differ for {c.case.describe()}\n  {detail}")
        return "\n".join(lines) or "no mismatches"


# The parts of `run_store_cases`, in order, as a fuzz session's timing names them.
STORE_PHASES = ("prepare", "encode", "upload+launch", "oracle", "device wait+download", "compare")


def _probe_module():
    from ...runtime.kernel import load_module

    return load_module("tma/store_probe.cu")


def run_store_cases(cases, rng: np.random.Generator | None = None, *, check: bool = True,
                    initial=None, sources=None, scratch: driver.ScratchBuffers | None = None,
                    timing: dict | None = None) -> StoreBatchResult:
    """Run every case in one launch (one CTA each, its own tensor, maps in global memory) and compare the whole
    buffer, guards included, with the oracle. `initial[i]` / `sources[i]` override the random tensor contents /
    box of case i. `check=False` skips drvtma's refusals (for fault tests in a child process). `scratch`: device
    buffers kept from batch to batch (a fuzz session's), else the batch allocates and frees its own. The oracle
    runs while the GPU does. `timing` (a fuzz session's): seconds added per part, under STORE_PHASES' names."""
    spent: dict[str, float] = dict.fromkeys(STORE_PHASES, 0.0)
    last = [time.perf_counter()]

    def lap(phase: str) -> None:  # the time since the last lap goes to `phase`
        now = time.perf_counter()
        spent[phase] += now - last[0]
        last[0] = now

    rng = rng if rng is not None else np.random.default_rng()
    cases = list(cases)
    if check:
        for case in cases:
            check_case(case)
    # Layout: [guard][tensor, extent rounded to 16][guard] per case, each region 1024-aligned.
    regions, bases, pos = [], [], 0
    for case in cases:
        start = pos
        base = start + GUARD_BYTES
        end = round_up(base + round_up(case.spec.extent_bytes, CHUNK_BYTES) + GUARD_BYTES, SWIZZLE_PERIOD)
        regions.append((start, end))
        bases.append(base)
        pos = end
    memory = np.empty(max(pos, 16), np.uint8)  # every byte set below: the regions tile [0, pos)
    if not cases:
        memory[:] = rng.integers(0, 256, memory.size, dtype=np.uint8)
    images, boxes, image_offsets, ipos = [], [], [], 0
    for i, case in enumerate(cases):
        spec = case.spec
        if initial is not None and initial[i] is not None:
            init = np.asarray(initial[i], dtype=np.uint8).reshape(-1)
            if init.size > round_up(spec.extent_bytes, CHUNK_BYTES):
                raise ArgumentError("store_initial", f"initial[{i}]", f"{init.size} bytes",
                                    f"give at most the tensor's {round_up(spec.extent_bytes, CHUNK_BYTES)} bytes",
                                    "the bytes after it are the guard that catches stray writes")
        else:
            nelem = round_up(spec.extent_bytes, CHUNK_BYTES) // spec.itemsize
            init = random_values(spec.dtype, case.op, nelem, rng).view(np.uint8)
        # random poison around the tensor (its guards and the alignment gap), the tensor's own bytes inside
        start, end = regions[i]
        memory[start:bases[i]] = rng.integers(0, 256, bases[i] - start, dtype=np.uint8)
        memory[bases[i]:bases[i] + init.size] = init
        memory[bases[i] + init.size:end] = rng.integers(0, 256, end - bases[i] - init.size, dtype=np.uint8)
        n = math.prod(spec.loaded_counts)
        box = (np.asarray(sources[i], dtype=spec.dtype.numpy).reshape(spec.loaded_counts)
               if sources is not None and sources[i] is not None
               else random_values(spec.dtype, case.op, n, rng).reshape(spec.loaded_counts))
        boxes.append(box)
        pad = rng.integers(0, 256, spec.smem_bytes, dtype=np.uint8)  # row padding is random: reading it shows
        images.append(smem_from_box(spec, box, case.smem_offset, pad))
        image_offsets.append(ipos)
        ipos += spec.smem_bytes
    jobs = np.zeros(len(cases), STORE_JOB_DTYPE)
    if cases:  # column by column: a structured array's element-wise assignment costs microseconds a field
        jobs["image_offset"] = image_offsets
        jobs["image_bytes"] = [c.spec.smem_bytes for c in cases]
        jobs["smem_offset"] = [c.smem_offset for c in cases]
        jobs["rank"] = [c.spec.rank for c in cases]
        jobs["op"] = [OP_CODES[c.op] for c in cases]
        jobs["coords"] = [c.spec.tma_coordinates(c.coords) + (0,) * (5 - c.spec.rank) for c in cases]
    image_blob = np.concatenate(images) if images else np.zeros(16, np.uint8)
    max_image = max((c.spec.smem_bytes for c in cases), default=16)
    kernel = _probe_module().kernel("store_probe")
    maps = np.zeros((max(len(cases), 1), 128), np.uint8)
    lap("prepare")  # checks, layout, data, poison, shared-memory images, jobs
    with contextlib.ExitStack() as owned:
        def buffer(name: str, array: np.ndarray) -> driver.DeviceBuffer:
            """A device buffer holding `array` from its start: the scratch's (reused), else the batch's own."""
            buf = (scratch.get(name, array.nbytes) if scratch is not None
                   else owned.enter_context(driver.DeviceBuffer(max(array.nbytes, 1))))
            buf.upload(np.ascontiguousarray(array))
            return buf

        gmem = buffer("memory", memory)
        lap("upload+launch")
        for i, case in enumerate(cases):
            # validate=False: check_case validated every case above (or the caller asked for no checks)
            tmap = encode_tiled(case.spec, gmem.ptr + bases[i], validate=False)
            maps[i] = np.frombuffer(tmap.to_bytes(), np.uint8)
        lap("encode")
        maps_buf, jobs_buf, img_buf = buffer("maps", maps), buffer("jobs", jobs), buffer("images", image_blob)
        kernel.launch(maps_buf, jobs_buf, img_buf, len(cases), grid=max(len(cases), 1), block=PROBE_THREADS,
                      shared_mem=max_image + _SMEM_SLACK)
        lap("upload+launch")
        # the oracle while the launch runs (it is asynchronous; the download below waits for it)
        expected = memory.copy()
        written = [apply_store(expected, bases[i], c.spec, c.coords, boxes[i], c.op).count
                   if min(c.coords, default=0) >= 0 else 0 for i, c in enumerate(cases)]
        lap("oracle")
        got = gmem.download(np.uint8, (memory.size,))  # a synchronous copy: it waits for the launch
        lap("device wait+download")
    results = []
    for i, case in enumerate(cases):
        lo, hi = regions[i]
        diff = np.flatnonzero(expected[lo:hi] != got[lo:hi]) + lo
        results.append(CaseResult(case, bases[i], diff, boxes[i]))
    counts = {"cases": len(cases), "stores": sum(c.op == STORE for c in cases),
              "reductions": sum(c.op != STORE for c in cases), "elements_written": int(sum(written))}
    lap("compare")
    if timing is not None:
        for phase, seconds in spent.items():
            timing[phase] += seconds
    return StoreBatchResult(results, memory, expected, got, counts)


def run_bulk_stores(jobs_spec, rng: np.random.Generator | None = None):
    """1D bulk stores, one per CTA: `jobs_spec` is [(dst_offset, nbytes)], non-overlapping. Returns (expected, got)
    over a poisoned destination buffer."""
    rng = rng if rng is not None else np.random.default_rng()
    jobs_spec = [(int(o), int(n)) for o, n in jobs_spec]
    for o, n in jobs_spec:
        check_bulk_store(o, n)
    ends = sorted((o, o + n) for o, n in jobs_spec)
    if any(b[0] < a[1] for a, b in zip(ends, ends[1:])):
        raise ValueError("bulk store destinations overlap; one CTA per destination range")
    size = max(e for _, e in ends) + GUARD_BYTES if ends else 16
    dst = rng.integers(0, 256, size, dtype=np.uint8)
    src_total = sum(n for _, n in jobs_spec)
    src = rng.integers(0, 256, max(src_total, 16), dtype=np.uint8)
    jobs = np.zeros(len(jobs_spec), BULK_JOB_DTYPE)
    expected, spos = dst.copy(), 0
    for i, (o, n) in enumerate(jobs_spec):
        jobs[i]["src_offset"], jobs[i]["dst_offset"], jobs[i]["bytes"] = spos, o, n
        expected[o:o + n] = src[spos:spos + n]
        spos += n
    kernel = _probe_module().kernel("bulk_store_probe")
    with driver.DeviceBuffer.from_array(dst) as dbuf, driver.DeviceBuffer.from_array(src) as sbuf, \
            driver.DeviceBuffer.from_array(jobs) as jbuf:
        kernel.launch(jbuf, sbuf, dbuf, len(jobs_spec), grid=max(len(jobs_spec), 1), block=PROBE_THREADS,
                      shared_mem=max((n for _, n in jobs_spec), default=16))
        got = dbuf.download(np.uint8, (size,))  # a synchronous copy: it waits for the launch
    return expected, got
