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
from ..tiled.oracle import digest_mix
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
    # why the case failed with no byte differing: its region's digest differs from the oracle's over equal bytes
    # (the kernel's digest and region_digests disagree, a drvtma bug that must not pass)
    digest_disagreement: str = ""

    @property
    def ok(self) -> bool:
        return self.mismatched_bytes.size == 0 and not self.digest_disagreement


@dataclass
class StoreBatchResult:
    cases: list[CaseResult]
    before: np.ndarray  # the whole buffer as uploaded (poison, tensors)
    expected: np.ndarray | None  # None where every region's digest was the oracle's (the buffer stayed on the GPU)
    got: np.ndarray | None
    counts: dict = field(default_factory=dict)

    @property
    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.ok]

    def report(self, limit: int = 3) -> str:
        """The first failing cases with their first mismatching bytes (offset from the tensor base)."""
        lines = []
        for c in self.failures[:limit]:
            if c.digest_disagreement:
                lines.append(f"{c.digest_disagreement} for {c.case.describe()}")
                continue
            assert self.expected is not None and self.got is not None  # compared byte for byte: it failed
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


@dataclass
class StorePlan:
    """A batch's host side, all of it made before the GPU runs (`plan_store_cases`), so another process can make
    it: the buffer with every tensor in its poisoned region, the shared-memory images and jobs the probe reads, and
    (`store_oracle`) the buffer the oracle says the GPU leaves."""

    cases: list[StoreCase]
    regions: list[tuple[int, int]]  # [guard][tensor][guard] of each case, bytes into `memory`
    bases: list[int]  # each tensor's first byte
    boxes: list[np.ndarray]  # what each case stores (loaded_counts shape)
    memory: np.ndarray  # the buffer as uploaded
    images: np.ndarray  # every case's shared-memory image, one after the other
    jobs: np.ndarray  # STORE_JOB_DTYPE, one per case
    max_image: int
    expected: np.ndarray | None = None  # store_oracle's answer
    written: list[int] | None = None  # elements each case writes (the oracle's count)
    # the regions' digests of the oracle's answer (oracle workers send these, not `expected`): the GPU digests its
    # buffer's regions and the buffer comes back only where one differs
    digests: np.ndarray | None = None


class _Laps:
    """Seconds per phase: lap(phase) gives the time since the last lap to `phase`."""

    def __init__(self):
        self.spent: dict[str, float] = dict.fromkeys(STORE_PHASES, 0.0)
        self._last = time.perf_counter()

    def __call__(self, phase: str) -> None:
        now = time.perf_counter()
        self.spent[phase] += now - self._last
        self._last = now


def plan_store_cases(cases, rng: np.random.Generator | None = None, *, check: bool = True, initial=None,
                     sources=None) -> StorePlan:
    """The host side of a batch (`run_store_cases`' arguments): checks, layout, data, poison, shared-memory images,
    jobs."""
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
    return StorePlan(cases, regions, bases, boxes, memory, image_blob, jobs,
                     max((c.spec.smem_bytes for c in cases), default=16))


def region_digests(buffer: np.ndarray, regions) -> np.ndarray:
    """(len(regions),) uint64: each region of `buffer` (regions that tile it from byte 0, at multiples of 8)
    digested as the probe's region_digests kernel digests it: word i of a region mixed with i, summed."""
    if not regions:
        return np.zeros(0, np.uint64)
    starts = np.array([lo for lo, _ in regions], np.int64)
    ends = np.array([hi for _, hi in regions], np.int64)
    if ((starts % 8).any() or (ends % 8).any() or starts[0] or ends[-1] != buffer.size
            or (starts[1:] != ends[:-1]).any()):
        raise ValueError("region_digests: the regions must tile the buffer from byte 0 at multiples of 8")
    words = np.ascontiguousarray(buffer).view("<u8")
    first = starts // 8
    index = np.arange(words.size, dtype=np.int64) - np.repeat(first, (ends - starts) // 8)
    return np.add.reduceat(digest_mix(words, index), first, dtype=np.uint64)


def store_oracle(plan: StorePlan) -> StorePlan:
    """`plan` with the oracle's answer: the buffer after every case's store, and the elements each wrote."""
    plan.expected = plan.memory.copy()
    plan.written = [apply_store(plan.expected, plan.bases[i], c.spec, c.coords, plan.boxes[i], c.op).count
                    if min(c.coords, default=0) >= 0 else 0 for i, c in enumerate(plan.cases)]
    return plan


def run_store_cases(cases, rng: np.random.Generator | None = None, *, check: bool = True,
                    initial=None, sources=None, scratch: driver.ScratchBuffers | None = None,
                    timing: dict | None = None, into=None) -> StoreBatchResult:
    """Run every case in one launch (one CTA each, its own tensor, maps in global memory) and compare the whole
    buffer, guards included, with the oracle. `initial[i]` / `sources[i]` override the random tensor contents /
    box of case i. `check=False` skips drvtma's refusals (for fault tests in a child process). `scratch`: device
    buffers kept from batch to batch (a fuzz session's), else the batch allocates and frees its own. The oracle
    runs while the GPU does. `timing` (a fuzz session's): seconds added per part, under STORE_PHASES' names; `into`:
    as run_store_plan's."""
    laps = _Laps()
    plan = plan_store_cases(cases, rng, check=check, initial=initial, sources=sources)
    laps("prepare")
    return run_store_plan(plan, scratch=scratch, timing=timing, laps=laps, into=into)


def differing_bytes(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    """The offsets of the bytes that differ, sorted: 8 bytes at a time over the buffers, bytes only inside the
    words that differ (a whole batch's buffer is compared, and most batches differ nowhere)."""
    if expected.size % 8:
        return np.flatnonzero(expected != got)
    words = np.flatnonzero(expected.view(np.uint64) != got.view(np.uint64))
    span = (8 * words[:, None] + np.arange(8)).reshape(-1)
    return span[expected[span] != got[span]]


def run_store_plan(plan: StorePlan, *, scratch: driver.ScratchBuffers | None = None, timing: dict | None = None,
                   laps: _Laps | None = None, into=None) -> StoreBatchResult:
    """The GPU side of `run_store_cases` for a plan made already (by an oracle worker, its oracle answered too:
    else the oracle runs here while the launch does). `into`: a host scratch the buffer is downloaded into
    (runtime.host.PinnedScratch: the result's `got` is then valid until its next use)."""
    laps = laps if laps is not None else _Laps()
    cases, bases = plan.cases, plan.bases
    kernel = _probe_module().kernel("store_probe")
    maps = np.zeros((max(len(cases), 1), 128), np.uint8)
    with contextlib.ExitStack() as owned:
        def buffer(name: str, array: np.ndarray) -> driver.DeviceBuffer:
            """A device buffer holding `array` from its start: the scratch's (reused), else the batch's own."""
            buf = (scratch.get(name, array.nbytes) if scratch is not None
                   else owned.enter_context(driver.DeviceBuffer(max(array.nbytes, 1))))
            buf.upload(np.ascontiguousarray(array))
            return buf

        gmem = buffer("memory", plan.memory)
        laps("upload+launch")
        for i, case in enumerate(cases):
            # validate=False: check_case validated every case above (or the caller asked for no checks)
            tmap = encode_tiled(case.spec, gmem.ptr + bases[i], validate=False)
            maps[i] = np.frombuffer(tmap.to_bytes(), np.uint8)
        laps("encode")
        maps_buf, jobs_buf, img_buf = buffer("maps", maps), buffer("jobs", plan.jobs), buffer("images", plan.images)
        digested = plan.digests is not None and bool(cases)  # the oracle's digests came with the plan
        if digested:  # (uploaded before the launch: a copy after it would wait for the stores)
            bounds_buf = buffer("bounds", np.array([lo for lo, _ in plan.regions] + [plan.regions[-1][1]], np.int64))
            digests_buf = (scratch.get("digests", 8 * len(cases)) if scratch is not None
                           else owned.enter_context(driver.DeviceBuffer(8 * len(cases))))
        kernel.launch(maps_buf, jobs_buf, img_buf, len(cases), grid=max(len(cases), 1), block=PROBE_THREADS,
                      shared_mem=plan.max_image + _SMEM_SLACK)
        laps("upload+launch")
        differ = None
        if digested:  # the GPU digests the regions it left; the buffer comes back only where one differs
            _probe_module().kernel("region_digests").launch(gmem, bounds_buf, digests_buf, grid=len(cases),
                                                            block=PROBE_THREADS)
            laps("upload+launch")
            differ = np.flatnonzero(digests_buf.download(np.uint64, (len(cases),)) != plan.digests)
            laps("device wait+download")
        expected = got = None
        if differ is None or differ.size:  # the buffer itself, compared byte for byte
            if plan.expected is None:  # the oracle while the launch runs (the download below waits for it)
                store_oracle(plan)
                laps("oracle")
            got = gmem.download(np.uint8, (plan.memory.size,), into=into)  # synchronous: it waits for the launch
            expected = plan.expected
            laps("device wait+download")
    written = plan.written
    assert written is not None  # store_oracle ran, here or in the plan's maker
    counts = {"cases": len(cases), "stores": sum(c.op == STORE for c in cases),
              "reductions": sum(c.op != STORE for c in cases), "elements_written": int(sum(written))}
    if expected is None or got is None:  # every region's digest is the oracle's: the buffer stayed on the GPU
        results = [CaseResult(case, bases[i], np.empty(0, np.int64), plan.boxes[i]) for i, case in enumerate(cases)]
    else:
        # one pass over the whole buffer (most batches differ nowhere), then each case's offsets by its region
        differing = differing_bytes(expected, got)
        los, his = (np.searchsorted(differing, [r[j] for r in plan.regions]) for j in (0, 1))
        results = [CaseResult(case, bases[i], differing[los[i]:his[i]], plan.boxes[i])
                   for i, case in enumerate(cases)]
        for i in (differ.tolist() if differ is not None else []):
            if results[i].mismatched_bytes.size == 0:
                results[i].digest_disagreement = ("its region's digest on the GPU differs from the oracle's, but "
                                                  "every byte is the same: the probe's region_digests kernel and "
                                                  "region_digests disagree, a drvtma bug")
    laps("compare")
    if timing is not None:
        for phase, seconds in laps.spent.items():
            timing[phase] += seconds
    return StoreBatchResult(results, plan.memory, expected, got, counts)


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
