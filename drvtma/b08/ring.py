"""CPU model of a k-stage mbarrier ring: which stage and parity each wait uses, and a step-by-step simulation.

Iteration i (one stage fill) uses stage i % k. Consumers wait on the "full" barrier of that stage for the phase
with parity (i // k) & 1; the producer waits on the "empty" barrier for the opposite parity, so it starts on
phase 1, which a freshly initialised barrier reports complete: the first lap of the ring never waits.
`RingSimulation` replays one interleaving of producer, copy engine and consumers against modelled mbarriers, so
tests can show the formulas are right (every interleaving finishes, in order, with whole data) and that each
deliberately broken protocol ends in a hang (which the kernels turn into a BarrierTimeout) or a stale read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DrvtmaError

COPY_GRANULE = 16  # bulk copies complete transaction bytes in multiples of 16 (sizes are multiples of 16)


@dataclass(frozen=True)
class Wait:
    iteration: int
    stage: int
    parity: int


def full_wait(i: int, stages: int) -> Wait:
    """The consumers' wait at iteration i."""
    _check(i, stages)
    return Wait(i, i % stages, (i // stages) & 1)


def empty_wait(i: int, stages: int) -> Wait:
    """The producer's wait before filling iteration i: phase 1 first."""
    _check(i, stages)
    return Wait(i, i % stages, ((i // stages) & 1) ^ 1)


def _check(i: int, stages: int) -> None:
    if stages < 1:
        raise ValueError(f"a ring needs at least one stage, got {stages}")
    if i < 0:
        raise ValueError(f"iteration must be >= 0, got {i}")


def iterations(tile_count: int, tiles_per_stage: int) -> int:
    """Stage fills needed for tile_count tiles (the last fill may hold fewer tiles)."""
    return -(-tile_count // tiles_per_stage)


def fill_tiles(i: int, tile_count: int, tiles_per_stage: int) -> int:
    return min(tiles_per_stage, tile_count - i * tiles_per_stage)


def block_tiles(block: int, num_tiles: int, tiles_per_block: int) -> tuple[int, int]:
    """(first tile, tile count) of a block, as the kernels split the tiles."""
    first = block * tiles_per_block
    return first, max(0, min(tiles_per_block, num_tiles - first))


@dataclass(frozen=True)
class TraceRecord:
    """One recorded wait: stage, parity and the first tile of the fill it guards."""

    stage: int
    parity: int
    tile: int


def expected_trace(role: str, first_tile: int, tile_count: int, stages: int, tiles_per_stage: int
                   ) -> list[TraceRecord]:
    """What a kernel's trace must hold for one block and one role ("consumer" or "producer")."""
    wait = {"consumer": full_wait, "producer": empty_wait}[role]
    out = []
    for i in range(iterations(tile_count, tiles_per_stage)):
        w = wait(i, stages)
        out.append(TraceRecord(w.stage, w.parity, first_tile + i * tiles_per_stage))
    return out


# ------------------------------------------------------------------------------------------ mbarrier model

@dataclass
class MBarrier:
    """PTX mbarrier semantics: a phase completes when its pending arrivals and transaction bytes both reach 0."""

    count: int
    phase: int = 0
    pending: int = field(init=False)
    tx: int = 0

    def __post_init__(self):
        self.pending = self.count

    def try_wait(self, parity: int) -> bool:
        """True once the phase with this parity completed: i.e. the current (incomplete) phase has the other one."""
        return (self.phase & 1) != parity

    def arrive(self) -> None:
        self.pending -= 1
        self._maybe_complete()

    def expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes

    def arrive_expect_tx(self, nbytes: int) -> None:
        self.expect_tx(nbytes)
        self.arrive()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count


# ------------------------------------------------------------------------------------------ ring simulation

# The kernels' DRVTMA_FAULT variants, plus the consumer-side parity mistake (a stale read, not a hang):
# missing_release: consumer 0 never releases its first stage (ws_ring); missing_arrive: the producer announces the
# bytes of its first fill without arriving (pipe_ring); producer_parity: the producer starts on phase 0.
FAULTS = ("none", "expect_tx_low", "expect_tx_high", "missing_release", "missing_arrive", "producer_parity",
          "consumer_parity")


@dataclass
class Outcome:
    status: str  # "ok", "deadlock" (the GPU would time out), or "hazard" (a stale, partial or overwritten read)
    detail: str
    consumed: list[list[int]]  # per consumer: first tile of each fill it read, in order
    consumer_trace: list[list[TraceRecord]]
    producer_trace: list[TraceRecord]
    stuck: tuple[tuple[str, int, int], ...] = ()  # on a deadlock: (barrier "full"/"empty", stage, parity) awaited


STUCK_BARRIER_IDS = {"full": 0, "empty": 1}  # as the kernels report them in DrvtmaStatus


class RingSimulation:
    """Producer, copy engine and consumers of a ws ring, advanced one step at a time by a chooser.

    `choose(options)` picks the next actor among those that can move (hypothesis draws, or random choice);
    copies complete in granules the chooser also picks, as a real copy may complete in several pieces.
    """

    def __init__(self, stages: int, tile_count: int, tiles_per_stage: int = 1, consumers: int = 1,
                 tile_bytes: int = 4096, fault: str = "none", first_tile: int = 0):
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
        if stages < 1 or tiles_per_stage < 1 or consumers < 1 or tile_count < 0:
            raise ValueError("stages, tiles_per_stage and consumers must be >= 1, tile_count >= 0")
        self.stages, self.count, self.per_stage = stages, tile_count, tiles_per_stage
        self.consumers, self.tile_bytes, self.fault, self.first = consumers, tile_bytes, fault, first_tile
        self.iters = iterations(tile_count, tiles_per_stage)
        self.full = [MBarrier(1) for _ in range(stages)]
        self.empty = [MBarrier(consumers) for _ in range(stages)]
        # What each stage's shared memory holds: (first tile of the fill, bytes landed, bytes of the fill)
        self.stage_data: list[tuple[int, int, int] | None] = [None] * stages
        self.in_flight: list[list[int]] = []  # [stage, tile, bytes left]
        self.producer_i = 0
        self.consumer_i = [0] * consumers
        self.holding: list[int | None] = [None] * consumers  # stage a consumer waited on and has not released yet
        self.consumed: list[list[int]] = [[] for _ in range(consumers)]
        self.consumer_trace: list[list[TraceRecord]] = [[] for _ in range(consumers)]
        self.producer_trace: list[TraceRecord] = []
        self.problem: str | None = None

    # -- the actors
    def _producer_parity(self, i: int) -> int:
        w = empty_wait(i, self.stages)
        return w.parity ^ 1 if self.fault == "producer_parity" else w.parity

    def _consumer_parity(self, i: int) -> int:
        w = full_wait(i, self.stages)
        return w.parity ^ 1 if self.fault == "consumer_parity" else w.parity

    def _producer_ready(self) -> bool:
        i = self.producer_i
        return i < self.iters and self.empty[i % self.stages].try_wait(self._producer_parity(i))

    def _producer_step(self) -> None:
        i = self.producer_i
        s = i % self.stages
        tile = self.first + i * self.per_stage
        nbytes = fill_tiles(i, self.count, self.per_stage) * self.tile_bytes
        self.producer_trace.append(TraceRecord(s, self._producer_parity(i), tile))
        if any(h == s for h in self.holding):
            self.problem = f"producer refilled stage {s} (iteration {i}) while a consumer still reads it"
        announced = {"expect_tx_low": nbytes - 8, "expect_tx_high": nbytes + 8}.get(self.fault, nbytes)
        if self.fault == "missing_arrive" and i == 0:
            self.full[s].expect_tx(announced)  # the producer forgets its arrive on the first fill
        else:
            self.full[s].arrive_expect_tx(announced)
        self.stage_data[s] = (tile, 0, nbytes)
        self.in_flight.append([s, tile, nbytes])
        self.producer_i += 1

    def _copy_step(self, k: int, granules: int) -> None:
        s, tile, left = self.in_flight[k]
        nbytes = min(left, granules * COPY_GRANULE)
        cur = self.stage_data[s]
        if cur is not None and cur[0] == tile:
            self.stage_data[s] = (tile, cur[1] + nbytes, cur[2])
        self.in_flight[k][2] -= nbytes
        if self.in_flight[k][2] == 0:
            del self.in_flight[k]
        self.full[s].complete_tx(nbytes)

    def _consumer_ready(self, c: int) -> bool:
        if self.holding[c] is not None:
            return True  # the read-and-release step
        i = self.consumer_i[c]
        return i < self.iters and self.full[i % self.stages].try_wait(self._consumer_parity(i))

    def _consumer_step(self, c: int) -> None:
        i = self.consumer_i[c]
        s = i % self.stages
        if self.holding[c] is None:  # the wait succeeded: the stage is this consumer's until it releases it
            self.consumer_trace[c].append(TraceRecord(s, self._consumer_parity(i), self.first + i * self.per_stage))
            self.holding[c] = s
            return
        want = self.first + i * self.per_stage
        data = self.stage_data[s]
        if data is None or data[0] != want or data[1] != data[2]:
            self.problem = (f"consumer {c} read stage {s} at iteration {i} expecting tile {want} and found "
                            f"{'nothing' if data is None else f'tile {data[0]} with {data[1]} of {data[2]} bytes'}")
        self.consumed[c].append(data[0] if data is not None else -1)
        self.holding[c] = None
        self.consumer_i[c] += 1
        if not (self.fault == "missing_release" and c == 0 and i == 0):
            self.empty[s].arrive()

    # -- the driver loop
    def run(self, choose, max_steps: int = 100_000) -> Outcome:
        """Advance until done, a deadlock or a hazard; `choose(list_of_labels) -> label`."""
        for _ in range(max_steps):
            options: list[tuple[str] | tuple[str, int]] = []
            if self._producer_ready():
                options.append(("producer",))
            for k in range(len(self.in_flight)):
                options.append(("copy", k))
            for c in range(self.consumers):
                if self._consumer_ready(c):
                    options.append(("consumer", c))
            done = self.producer_i == self.iters and all(i == self.iters for i in self.consumer_i)
            if done and not self.in_flight:
                return self._outcome("ok", "all fills produced and consumed")
            if not options:
                return self._outcome("deadlock", self._who_waits())
            pick = choose(options)
            if pick[0] == "producer":
                self._producer_step()
            elif pick[0] == "copy":
                left = self.in_flight[pick[1]][2] // COPY_GRANULE
                self._copy_step(pick[1], choose(list(range(1, left + 1))) if left > 1 else 1)
            else:
                self._consumer_step(pick[1])
            if self.problem:
                return self._outcome("hazard", self.problem)
        raise RuntimeError(f"simulation did not finish in {max_steps} steps")

    def _stuck(self) -> list[tuple[str, str, int, int, int]]:
        """(who, barrier, stage, parity, iteration) of every unfinished actor."""
        out = []
        if self.producer_i < self.iters:
            i = self.producer_i
            out.append(("producer", "empty", i % self.stages, self._producer_parity(i), i))
        for c, i in enumerate(self.consumer_i):
            if i < self.iters:
                out.append((f"consumer {c}", "full", i % self.stages, self._consumer_parity(i), i))
        return out

    def _who_waits(self) -> str:
        return "nothing can move: " + "; ".join(f"{who} on {bar}[{s}] parity {p} (iteration {i})"
                                                 for who, bar, s, p, i in self._stuck())

    def _outcome(self, status: str, detail: str) -> Outcome:
        stuck = tuple(sorted({(bar, s, p) for _, bar, s, p, _ in self._stuck()})) if status == "deadlock" else ()
        return Outcome(status, detail, self.consumed, self.consumer_trace, self.producer_trace, stuck)


# ------------------------------------------------------------------------------------------ kernel traces

class TraceMismatch(DrvtmaError):
    """A kernel's recorded waits differ from the model (wrong stage or parity, a tile skipped, repeated or late)."""


def decode_record(word0: int, word1: int) -> TraceRecord:
    return TraceRecord(int(word0) & 0xFFFF, int(word0) >> 16, int(word1))


def check_trace(raw, *, stages: int, tiles_per_stage: int, num_tiles: int, tiles_per_block: int,
                consumer_roles: int, producer: bool, show: int = 5) -> None:
    """Compare raw[block, role, iteration, 2] (uint32, unwritten records all ones) with `expected_trace`.

    Roles 0..consumer_roles-1 are consumer warps, then the producer when there is one. Every role must have
    recorded exactly the model's waits, in order, and nothing after them.
    """
    import numpy as np

    raw = np.asarray(raw, dtype=np.uint32)
    roles = consumer_roles + (1 if producer else 0)
    if raw.ndim != 4 or raw.shape[1] != roles or raw.shape[3] != 2:
        raise ValueError(f"trace must have shape [blocks, {roles}, capacity, 2], got {raw.shape}")
    problems = []
    for block in range(raw.shape[0]):
        first, count = block_tiles(block, num_tiles, tiles_per_block)
        for role in range(roles):
            kind = "producer" if producer and role == consumer_roles else "consumer"
            want = expected_trace(kind, first, count, stages, tiles_per_stage)
            rows = raw[block, role]
            got = [decode_record(w0, w1) for w0, w1 in rows[:len(want)]]
            for i, (g, w) in enumerate(zip(got, want)):
                if g != w:
                    seen = "nothing" if rows[i, 0] == 0xFFFFFFFF else f"{g}"
                    problems.append(f"block {block} {kind} {role} iteration {i}: expected {w}, recorded {seen}")
                    break
            extra = np.flatnonzero(rows[len(want):, 0] != 0xFFFFFFFF)
            if extra.size:
                problems.append(f"block {block} {kind} {role}: {extra.size} wait(s) recorded after its "
                                f"{len(want)} iterations")
    if problems:
        head = f"{len(problems)} trace mismatch(es) against the ring model (stages={stages}, " \
               f"tiles_per_stage={tiles_per_stage}); first:"
        raise TraceMismatch("\n  ".join([head, *problems[:show]]))
