"""Cases prepared on worker processes (`drvtma fuzz TARGET --oracle-workers N`): a campaign's host spends most of
its time in Python (building cases, classing them for coverage, and above all the NumPy oracle), so the workers
build each case, class it and compute the oracle's answer (`target.expected_batch`: images' digests for loads and
im2col, a batch's plan and region digests for stores, data and answers for your kernel), batches ahead, while the
campaign's own process only launches, waits for the GPU and compares.

Each worker rebuilds the session's pool of random bytes from the same seed (nothing large crosses a pipe), builds
case i from the campaign's seed and i as the campaign would (`choosers.build_case`), and writes a whole batch's
arrays into a slot: a file of a shared directory (/dev/shm where it has room, else the temporary directory) that the
campaign keeps mapped, so they reach it without a copy and without the pipe (whose reader thread in the campaign's
process moved 150 MB/s on a test machine). A batch larger than its slot gets a file of its own; only where no
directory has room do the arrays come back through the pipe. Cases, labels, coverage classes and answers are the
in-process ones, byte for byte: the same functions on the same inputs.
"""

from __future__ import annotations

import collections
import mmap
import multiprocessing
import os
import shutil
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, cast

import numpy as np

from ..errors import ArgumentError, as_int
from .choosers import build_case

SLOT_BYTES = 32 << 20  # one batch's arrays (a stores batch's plan: about 9 MB); a larger batch gets its own file
MAX_WORKERS = 64
ALIGN = 64  # each array starts on a 64-byte boundary of the slot

_pool: np.ndarray | None = None  # a worker's copy of the session's random bytes


def _start_worker(seed: int, nbytes: int) -> None:
    global _pool
    _pool = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)  # as the session draws it


def _ready(_: int) -> int:
    """A worker that has drawn its pool (its initializer ran); a short stay, so each worker takes one."""
    time.sleep(0.05)
    return os.getpid()


def _write_file(path: str, arrays: list[np.ndarray], offsets: list[int]) -> bool:
    """The arrays at their offsets of the file `path` (written, not mapped: a full directory is an error here,
    where a write through a mapping would kill the worker); False when the directory has no room."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for array, offset in zip(arrays, offsets):
                view = memoryview(cast(Any, np.ascontiguousarray(array).reshape(-1).view(np.uint8)))
                done = 0
                while done < len(view):
                    done += os.pwrite(fd, view[done:], offset + done)
        finally:
            os.close(fd)
        return True
    except OSError:
        return False


def _layout(arrays: list[np.ndarray]) -> tuple[list[int], int]:
    offsets, pos = [], 0
    for array in arrays:
        offsets.append(pos)
        pos += -(-array.nbytes // ALIGN) * ALIGN
    return offsets, pos


def _prepare_batch(target, options: dict, seed: int, first: int, last: int, base: int, slot: str | None,
                   capacity: int):
    """In a worker: cases first..last-1 of the campaign, each with its trace, labels and coverage classes, and the
    batch's oracle answer (`target.expected_batch`) -> (built, [(shape, dtype)], rest, where, offsets, busy seconds):
    the answer's arrays in `slot` where they fit, else in a file of their own beside it (where = ("slot",) /
    ("file", path)), else (no room anywhere) in the answer itself (where = ("array", arrays))."""
    assert _pool is not None  # _start_worker ran
    started = time.perf_counter()
    built = []
    for index in range(first, last):
        case, trace = build_case(target, options, seed, index)
        built.append((case, trace, {"labels": target.labels(case), "classes": target.coverage.classes(case)
                                    if target.coverage is not None else None}))
    arrays, rest = target.expected_batch([case for case, *_ in built], _pool, base)
    arrays = [np.ascontiguousarray(a) for a in arrays]
    offsets, total = _layout(arrays)
    where: tuple = ("array", arrays)
    if slot is not None:
        if total <= capacity:
            if _write_file(slot, arrays, offsets):
                where = ("slot",)
        else:
            fd, path = tempfile.mkstemp(prefix="drvtma-oracle-", dir=os.path.dirname(slot))
            os.close(fd)
            if _write_file(path, arrays, offsets):
                where = ("file", path)
            else:
                os.unlink(path)
    return built, [(a.shape, a.dtype) for a in arrays], rest, where, offsets, time.perf_counter() - started


def check_oracle_workers(workers) -> int:
    return as_int(workers, "oracle_workers", rule="oracle_workers", lo=0, hi=MAX_WORKERS)


def slot_directory(need: int) -> str | None:
    """/dev/shm where it has room for `need` bytes twice over (memory, no disk behind it), else the temporary
    directory where it has; None: neither (the arrays come through the pipe)."""
    for path in ("/dev/shm", tempfile.gettempdir()):
        try:
            if os.path.isdir(path) and os.access(path, os.W_OK) and shutil.disk_usage(path).free >= 2 * need:
                return path
        except OSError:
            continue
    return None


class _Slot:
    """A file of the slot directory, `size` bytes (sparse until written), mapped read-only by the campaign."""

    def __init__(self, directory: str, size: int):
        fd, self.path = tempfile.mkstemp(prefix="drvtma-oracle-", dir=directory)
        try:
            os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # a caller still holds arrays of it: the mapping goes with them
            pass
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _map_file(path: str) -> mmap.mmap:
    """A batch's own file, mapped and unlinked (the mapping keeps its pages until the arrays are dropped)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return mmap.mmap(fd, os.fstat(fd).st_size, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
        os.unlink(path)


class OraclePool:
    """`workers` processes holding the pool of random bytes `default_rng(seed).integers(0, 256, nbytes)`; a slot
    per batch in flight. close() stops the workers and removes every slot (a with-block closes)."""

    def __init__(self, workers: int, *, seed: int, nbytes: int, slot_bytes: int = SLOT_BYTES):
        workers = check_oracle_workers(workers)
        if workers < 1:
            raise ArgumentError("oracle_workers", "oracle_workers", workers, "give 1 or more workers (0: the "
                                "oracle in the campaign's own process, no pool)")
        self.workers, self.slot_bytes = workers, int(slot_bytes)
        self.depth = 2 * workers  # batches in flight: every worker busy while the campaign checks one
        self.directory = slot_directory((self.depth + 1) * self.slot_bytes)
        self._slots: list[_Slot] = []
        self._free: list[_Slot] = []
        self._pending: set[Future] = set()  # submitted, not collected: a batch's own file is removed at close
        self.busy = 0.0  # the workers' seconds of work on the batches taken so far
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

    def _slot(self) -> _Slot | None:
        if self.directory is None:
            return None
        if not self._free:
            try:
                self._slots.append(_Slot(self.directory, self.slot_bytes))
            except OSError:
                return None
            self._free.append(self._slots[-1])
        return self._free.pop()

    def _submit(self, target, options: dict, seed: int, first: int, last: int, base: int):
        if self._executor is None:
            raise RuntimeError("the oracle pool is closed")
        slot = self._slot()
        future = self._executor.submit(_prepare_batch, target, options, seed, first, last, base,
                                       None if slot is None else slot.path, self.slot_bytes)
        self._pending.add(future)
        return future, slot

    def _collect(self, future: Future, slot: _Slot | None) -> tuple[list, list, object]:
        """(built, arrays, rest): the arrays are views of the slot (or the batch's own file), valid until the slot
        is handed out again; a worker's exception raised here."""
        self._pending.discard(future)
        built, layout, rest, where, offsets, busy = future.result()
        self.busy += busy
        if where[0] == "array":
            return built, where[1], rest
        if where[0] == "slot":
            assert slot is not None  # a worker writes only into a slot it was given
            buffer = slot.map
        else:
            buffer = _map_file(where[1])
        return built, [np.ndarray(shape, dtype, buffer=buffer, offset=offset)
                       for (shape, dtype), offset in zip(layout, offsets)], rest

    def prepared_batches(self, target, options: dict, seed: int, batches, session, expired=None) -> PreparedBatches:
        """The campaign's `batches` ((batch, first, last) in order) with their cases prepared ahead; `expired()`
        true: the campaign's time is up, and the batches prepared ahead are dropped, not checked."""
        return PreparedBatches(self, target, options, seed, batches, session.pool_base(), expired)

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        for future in self._pending:  # batches prepared for a campaign that stopped early
            if future.done() and not future.cancelled() and future.exception() is None:
                where = future.result()[3]  # (built, layout, rest, where, offsets, busy)
                if where[0] == "file":
                    try:
                        os.unlink(where[1])
                    except FileNotFoundError:
                        pass
        self._pending.clear()
        for slot in self._slots:
            slot.close()
        self._slots.clear()
        self._free.clear()

    def __enter__(self) -> OraclePool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PreparedBatches:
    """Iterates (batch, first, last) like the campaign's own loop; `take()` gives the current batch's prepared
    cases, [(case, trace, {"labels", "classes"})], and its oracle answer (`target.answer`), while the batches after
    it are being prepared (enough to keep every worker busy). The answer's arrays are read where the worker wrote
    them: valid until the next take().
    `busy` and `capacity`: the workers' seconds of work and of life while the batches were taken."""

    def __init__(self, pool: OraclePool, target, options: dict, seed: int, batches, base: int, expired=None):
        self._pool, self._target, self._options, self._seed, self._base = pool, target, options, seed, base
        self._expired = expired
        self._batches = iter(batches)
        self._ahead: collections.deque = collections.deque()
        self._current: tuple | None = None
        self._held: _Slot | None = None  # the slot of the batch taken last (its arrays are in use)
        self._started, self._busy0 = time.perf_counter(), pool.busy
        self._fill()

    @property
    def busy(self) -> float:
        return self._pool.busy - self._busy0

    @property
    def capacity(self) -> float:
        return self._pool.workers * (time.perf_counter() - self._started)

    def _fill(self) -> None:
        while len(self._ahead) < self._pool.depth:
            nxt = next(self._batches, None)
            if nxt is None:
                return
            _, first, last = nxt
            self._ahead.append((nxt, self._pool._submit(self._target, self._options, self._seed, first, last,
                                                        self._base)))

    def __iter__(self) -> PreparedBatches:
        return self

    def __next__(self) -> tuple[int, int, int]:
        if self._ahead and self._expired is not None and self._expired():
            self._ahead.clear()  # prepared for a campaign whose time is up (close() removes their own files)
        if not self._ahead:
            self._release()
            raise StopIteration
        head, self._current = self._ahead.popleft()
        return head

    def _release(self) -> None:
        if self._held is not None:
            self._pool._free.append(self._held)
            self._held = None

    def take(self) -> tuple[list, object]:
        assert self._current is not None  # __next__ gave a batch
        (future, slot), self._current = self._current, None
        self._release()  # the last batch's answer is spent: its slot can take the next batch
        try:
            built, arrays, rest = self._pool._collect(future, slot)
        except BaseException:
            if slot is not None:
                self._pool._free.append(slot)
            raise
        self._held = slot
        self._fill()
        return built, self._target.answer([case for case, *_ in built], arrays, rest)
