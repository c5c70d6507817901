"""The oracle on worker processes (`drvtma fuzz loads|im2col --oracle-workers N`): a campaign's host spends most
of its time in the NumPy oracle, so its cases' expected images are computed on other cores while the campaign's
own process generates, launches, waits and compares.

Each worker rebuilds the session's pool of random bytes from the same seed (nothing large crosses a pipe), runs
the oracle function it is named (a module-level function: `oracle(spec, pool window, *args, **kwargs)`), and writes
the images into a shared-memory slot the campaign reads in place; an answer larger than a slot comes back through
the pipe. The answers are the in-process oracle's, byte for byte: the same function on the same bytes.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

from ..errors import ArgumentError, as_int

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


def _answer(fn, spec, offset: int, extent: int, args: tuple, kwargs: dict, slot: str, capacity: int):
    """In a worker: the oracle's images into `slot` -> ("slot", shape, dtype), or ("array", images)."""
    assert _pool is not None  # _start_worker ran
    images = fn(spec, _pool[offset:offset + extent], *args, **kwargs)
    if images.nbytes > capacity:
        return "array", images
    shm = _attached.get(slot)
    if shm is None:
        shm = _attached[slot] = shared_memory.SharedMemory(name=slot)
    np.ndarray(images.shape, images.dtype, buffer=shm.buf)[...] = images
    return "slot", images.shape, images.dtype.str


@dataclass
class Ticket:
    """A submitted oracle call: `OraclePool.result(ticket)` waits for it."""

    future: Future
    slot: shared_memory.SharedMemory


def check_oracle_workers(workers) -> int:
    return as_int(workers, "oracle_workers", rule="oracle_workers", lo=0, hi=MAX_WORKERS)


class OraclePool:
    """`workers` processes computing `fn(spec, pool[offset:offset + extent], ...)` on the pool of random bytes
    `default_rng(seed).integers(0, 256, nbytes)`; a slot per call in flight. close() stops the workers and frees
    every slot (a with-block closes)."""

    def __init__(self, workers: int, *, seed: int, nbytes: int, slot_bytes: int = SLOT_BYTES):
        workers = check_oracle_workers(workers)
        if workers < 1:
            raise ArgumentError("oracle_workers", "oracle_workers", workers, "give 1 or more workers (0: the "
                                "oracle in the campaign's own process, no pool)")
        self.workers, self.slot_bytes = workers, int(slot_bytes)
        self._free: list[shared_memory.SharedMemory] = []
        self._slots: list[shared_memory.SharedMemory] = []
        # spawn: the campaign holds a CUDA context, which a forked child must not inherit
        self._executor: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
            initargs=(int(seed), int(nbytes)))
        try:  # every worker started and its pool drawn now, not inside the first batch's oracle time
            list(self._executor.map(_ready, range(workers)))
        except BaseException:
            self.close()
            raise

    def submit(self, fn, spec, offset: int, extent: int, *args, **kwargs) -> Ticket:
        """Start `fn(spec, window, *args, **kwargs)` on a worker; its slot stays taken until `result`."""
        if self._executor is None:
            raise RuntimeError("the oracle pool is closed")
        if not self._free:
            slot = shared_memory.SharedMemory(create=True, size=self.slot_bytes)
            self._slots.append(slot)
            self._free.append(slot)
        slot = self._free.pop()
        future = self._executor.submit(_answer, fn, spec, int(offset), int(extent), args, kwargs, slot.name,
                                       self.slot_bytes)
        return Ticket(future, slot)

    def result(self, ticket: Ticket) -> np.ndarray:
        """The images (a copy: the slot goes back to the pool); the oracle's own exception, raised here."""
        try:
            answer = ticket.future.result()
            if answer[0] == "array":
                return answer[1]
            _, shape, dtype = answer
            return np.ndarray(shape, np.dtype(dtype), buffer=ticket.slot.buf).copy()
        finally:
            self._free.append(ticket.slot)

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
