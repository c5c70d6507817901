"""Cases prepared on worker processes (`drvtma fuzz loads|im2col --oracle-workers N`): a campaign's host spends
most of its time in Python (building cases, classing them for coverage, and above all the NumPy oracle), so the
workers build each case, class it and compute the oracle's images of it, batches ahead, while the campaign's own
process only launches, waits for the GPU and compares.

Each worker rebuilds the session's pool of random bytes from the same seed (nothing large crosses a pipe), builds
case i from the campaign's seed and i as the campaign would (`choosers.build_case`), and writes the images into a
shared-memory slot the campaign reads; an answer larger than a slot comes back through the pipe. Cases, labels,
coverage classes and images are the in-process ones, byte for byte: the same functions on the same inputs.
"""

from __future__ import annotations

import collections
import multiprocessing
import shutil
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import shared_memory

import numpy as np

from ..errors import ArgumentError, as_int
from .choosers import build_case

SLOT_BYTES = 8 << 20  # one case's images; larger ones come back through the pipe
MAX_WORKERS = 64

_pool: np.ndarray | None = None  # a worker's copy of the session's random bytes
_attached: dict[str, shared_memory.SharedMemory] = {}


def _start_worker(seed: int, nbytes: int) -> None:
    global _pool
    _pool = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)  # as the session draws it


def _ready(_: int) -> int:
    """A worker that has drawn its pool (its initializer ran); a short stay, so each worker takes one."""
    import os
    import time

    time.sleep(0.05)
    return os.getpid()


def _prepare(target, options: dict, seed: int, index: int, base: int, slot: str | None, capacity: int):
    """In a worker: case `index` of the campaign, its trace, its labels and coverage classes, and its expected
    images, into `slot` where they fit -> (case, trace, extra, ("slot", shape, dtype) or ("array", images))."""
    assert _pool is not None  # _start_worker ran
    case, trace = build_case(target, options, seed, index)
    extra = {"labels": target.labels(case),
             "classes": target.coverage.classes(case) if target.coverage is not None else None}
    images = target.expected(case, _pool, base)
    if slot is None or images.nbytes > capacity:
        return case, trace, extra, ("array", images)
    shm = _attached.get(slot)
    if shm is None:
        shm = _attached[slot] = shared_memory.SharedMemory(name=slot)
    np.ndarray(images.shape, images.dtype, buffer=shm.buf)[...] = images
    return case, trace, extra, ("slot", images.shape, images.dtype.str)


def check_oracle_workers(workers) -> int:
    return as_int(workers, "oracle_workers", rule="oracle_workers", lo=0, hi=MAX_WORKERS)


class OraclePool:
    """`workers` processes holding the pool of random bytes `default_rng(seed).integers(0, 256, nbytes)`; a
    shared-memory slot per case in flight. close() stops the workers and frees every slot (a with-block closes)."""

    def __init__(self, workers: int, *, seed: int, nbytes: int, slot_bytes: int = SLOT_BYTES):
        workers = check_oracle_workers(workers)
        if workers < 1:
            raise ArgumentError("oracle_workers", "oracle_workers", workers, "give 1 or more workers (0: the "
                                "oracle in the campaign's own process, no pool)")
        self.workers, self.slot_bytes = workers, int(slot_bytes)
        self._slots: list[shared_memory.SharedMemory] = []
        self._free: list[shared_memory.SharedMemory] = []
        # spawn: the campaign holds a CUDA context, which a forked child must not inherit
        self._executor: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
            initargs=(int(seed), int(nbytes)))
        try:  # every worker started and its pool drawn now, not inside the first batch's time
            list(self._executor.map(_ready, range(workers)))
        except BrokenProcessPool:
            self.close()
            raise ArgumentError("oracle_workers", "oracle_workers", workers, "start the campaign under `if __name__ "
                                "== '__main__':` in your script, or give 0", "the worker processes died starting: "
                                "spawned processes import the main script, and yours started them again") from None
        except BaseException:
            self.close()
            raise

    def _slot(self) -> shared_memory.SharedMemory | None:
        """A free slot, a new one while shared memory has room for it twice over, else None (the pipe): a slot
        is a sparse file until written, and a write past a full /dev/shm would kill the worker (SIGBUS)."""
        if not self._free:
            try:
                room = shutil.disk_usage("/dev/shm").free
            except OSError:
                room = 0
            if room < 2 * self.slot_bytes:
                return None
            slot = shared_memory.SharedMemory(create=True, size=self.slot_bytes)
            self._slots.append(slot)
            self._free.append(slot)
        return self._free.pop()

    def _submit(self, target, options: dict, seed: int, index: int, base: int):
        if self._executor is None:
            raise RuntimeError("the oracle pool is closed")
        slot = self._slot()
        return self._executor.submit(_prepare, target, options, seed, index, base,
                                     None if slot is None else slot.name, self.slot_bytes), slot

    def _collect(self, future: Future, slot: shared_memory.SharedMemory | None):
        """(case, trace, extra, images): the images copied out, the slot back in the pool; a worker's exception
        raised here."""
        try:
            case, trace, extra, answer = future.result()
            if answer[0] == "array":
                return case, trace, extra, answer[1]
            assert slot is not None  # a worker writes only into a slot it was given
            _, shape, dtype = answer
            return case, trace, extra, np.ndarray(shape, np.dtype(dtype), buffer=slot.buf).copy()
        finally:
            if slot is not None:
                self._free.append(slot)

    def prepared_batches(self, target, options: dict, seed: int, batches, session) -> PreparedBatches:
        """The campaign's `batches` ((batch, first, last) in order) with their cases prepared ahead."""
        return PreparedBatches(self, target, options, seed, batches, session.pool_base())

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        for slot in self._slots:
            slot.close()
            slot.unlink()
        self._slots.clear()
        self._free.clear()

    def __enter__(self) -> OraclePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PreparedBatches:
    """Iterates (batch, first, last) like the campaign's own loop; `take()` gives the current batch's prepared
    cases, [(case, trace, {"labels", "classes"}, images)], while the batches after it are being prepared (enough to
    keep every worker busy)."""

    def __init__(self, pool: OraclePool, target, options: dict, seed: int, batches, base: int):
        self._pool, self._target, self._options, self._seed, self._base = pool, target, options, seed, base
        self._batches = iter(batches)
        self._ahead: collections.deque = collections.deque()
        self._current: list | None = None
        self._depth = max(2, -(-2 * pool.workers // max(1, target.cases_per_batch)))
        self._fill()

    def _fill(self) -> None:
        while len(self._ahead) < self._depth:
            nxt = next(self._batches, None)
            if nxt is None:
                return
            batch, first, last = nxt
            jobs = [self._pool._submit(self._target, self._options, self._seed, i, self._base)
                    for i in range(first, last)]
            self._ahead.append((nxt, jobs))

    def __iter__(self) -> PreparedBatches:
        return self

    def __next__(self) -> tuple[int, int, int]:
        if not self._ahead:
            raise StopIteration
        head, self._current = self._ahead.popleft()
        return head

    def take(self) -> list:
        assert self._current is not None  # __next__ gave a batch
        jobs, self._current = self._current, None
        out, error = [], None
        for future, slot in jobs:  # every slot back, even after a worker's error
            try:
                out.append(self._pool._collect(future, slot))
            except BaseException as exc:  # noqa: BLE001 (raised below, once every slot is free)
                error = error or exc
        if error is not None:
            raise error
        self._fill()
        return out
