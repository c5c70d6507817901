"""A fuzz campaign: cases from seeded choosers, checked in batches, counted by label, failures shrunk.

Case i of a campaign with seed S is built from `case_seed(S, i)` alone, and batch b holds cases
[b * B, (b + 1) * B) for the target's B = cases_per_batch. A shard k of n runs batches k, k + n, k + 2n, ...: no
two shards draw the same case, and with ``examples`` fixed the merged result equals one process's. With
``seconds`` each shard walks its own batches of the one case stream for that long.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ..errors import ArgumentError, as_int
from . import shrink as shrinking
from .choosers import build_case  # noqa: F401 (importable here too)
from .coverage import Coverage, coverage_of
from .targets import Failure, Outcome, Target  # Failure: importable here too

LABEL_ORDER = ("dtype", "rank", "swizzle", "fill")
WORKERS_PHASE = "oracle workers (generate, classify, oracle)"  # --oracle-workers: the wait for their cases
WORKERS_BUSY = "oracle workers' own time"  # not phases: the workers' seconds of work and of life, summed over
WORKERS_CAPACITY = "oracle workers' capacity"  # the workers (their ratio: how busy they were)
NOT_PHASES = ("setup", "image_bytes", WORKERS_BUSY, WORKERS_CAPACITY)


@dataclass
class CampaignResult:
    target: str
    options: dict
    seed: int
    cases: int = 0
    size: int = 0  # in the target's unit (boxes, specs, cases)
    mismatches: int = 0
    seconds: float = 0.0
    by_label: dict = field(default_factory=dict)  # "dtype=float16" -> [cases, size, mismatches]
    failures: list[Failure] = field(default_factory=list)
    timing: dict = field(default_factory=dict)  # seconds in each part of the check, "generate" included
    batches: list[int] = field(default_factory=list)  # batch indices run (sharding bookkeeping)
    known_failures: int = 0  # replayed from the database and still failing
    shards: int = 1
    devices: list = field(default_factory=list)
    shard: int | None = 0  # this shard's index k (None: a merge of several)
    budget: dict = field(default_factory=dict)  # {"examples": ..., "seconds": ...}: the campaign a seed defines
    per_shard: list = field(default_factory=list)  # a merge's rows: shard, cases, size, mismatches, seconds, devices
    coverage: Coverage | None = None  # hits per class of the target's coverage model (None: it has none)

    def add(self, target: Target, case, outcome: Outcome, *, labels: dict | None = None, classes=None) -> None:
        """Count a checked case; `labels` and `classes` (its coverage classes): as computed elsewhere (a worker)."""
        size = target.size(case)
        if self.coverage is not None:
            assert target.coverage is not None  # self.coverage is coverage_of(target): it has a model
            self.coverage.add(target.coverage.classes(case) if classes is None else classes)
        self.cases += 1
        self.size += size
        self.mismatches += not outcome.ok
        for key, value in (target.labels(case) if labels is None else labels).items():
            row = self.by_label.setdefault(f"{key}={value}", [0, 0, 0])
            row[0] += 1
            row[1] += size
            row[2] += not outcome.ok

    @property
    def per_second(self) -> float:
        return self.cases / self.seconds if self.seconds > 0 else 0.0

    @property
    def size_per_second(self) -> float:
        return self.size / self.seconds if self.seconds > 0 else 0.0


class Progress:
    """A one-line progress bar on stderr (redrawn on a terminal, a line every few seconds otherwise)."""

    def __init__(self, enabled: bool, total_cases: int | None, seconds: float | None, unit: str, stream=None):
        self.stream = stream or sys.stderr
        self.enabled, self.total, self.seconds, self.unit = enabled, total_cases, seconds, unit
        self.tty = self.enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = self.last = time.perf_counter()

    def update(self, result: CampaignResult, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        elapsed = now - self.start
        if self.total:
            done = min(1.0, result.cases / self.total)
        elif self.seconds:
            done = min(1.0, elapsed / self.seconds)
        else:
            done = 0.0
        bar = "#" * int(done * 30)
        rate = result.size / elapsed if elapsed > 0 else 0
        line = (f"[{bar:<30}] {done * 100:5.1f}% {result.cases:,} cases, {result.size:,} {self.unit} "
                f"({rate:,.0f}/s), {result.mismatches} mismatch{'es' if result.mismatches != 1 else ''}")
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def done(self, result: CampaignResult) -> None:
        self.update(result, force=True)
        if self.enabled and self.tty:
            self.stream.write("\n")


def run_campaign(target: Target, options: dict, *, seed: int = 0, examples: int | None = None,
                 seconds: float | None = None, shard: tuple[int, int] = (0, 1), fake: bool = False,
                 database=None, shrink: bool = True, max_shrinks: int = 5, shrink_seconds: float = 60.0,
                 progress: bool = False, session=None, oracle_workers: int = 0) -> CampaignResult:
    """Run a fuzz campaign: cases built from `seed`, checked on the target's session, failures shrunk.

    Parameters
    ----------
    target : Target
        `drvtma.fuzz.get_target(name)`; `options` is its `configure(...)`.
    seed, examples, seconds
        The campaign the seed defines: `examples` cases (all shards together) or `seconds` (each shard).
    shard : (k, n)
        Run shard k of n (batches k, k + n, ...).
    database
        A hypothesis example database (`drvtma.fuzz.shrink.open_database`): its known failures replay first and
        every shrunk failure is saved there.
    shrink, max_shrinks, shrink_seconds
        Shrink the first `max_shrinks` failures, each for at most `shrink_seconds`.
    session
        An open target session to reuse (else one is opened and closed).
    oracle_workers
        Processes that build, class and answer the cases beside this one (loads, im2col, stores, reductions and
        your kernel's; 0: all here). The same cases and verdicts; only where the time goes changes. They are spawned and import your main
        script: start the campaign under ``if __name__ == "__main__":``.

    Returns
    -------
    CampaignResult
        Counts by label, failures (shrunk), coverage, timing per part (`bound_by`).

    Raises
    ------
    ArgumentError
        A wrong target, options, budget or shard (before any case).
    NoGpuError
        The target needs a GPU and there is none (use `fake=True` where the target has an oracle-only session).
    """
    if examples is None and seconds is None:
        examples = 1000
    seed, examples, seconds, k, n = check_campaign(target, options, seed, examples, seconds, shard)
    result = CampaignResult(target.name, options, int(seed), shards=n, shard=k,
                            budget={"examples": examples, "seconds": seconds}, coverage=coverage_of(target, options))
    own_session = session is None
    session = target.session(options, fake=fake, oracle_workers=oracle_workers) if own_session else session
    bar = Progress(progress, examples, seconds, target.unit)
    timing = cast("dict[str, float]", Counter())  # seconds per part, as Session.timing
    try:
        if database is not None:  # every shard replays it (outside the counts); a merge keeps each case once
            for failure in shrinking.replay_known(target, options, session, database):
                failure.shard = k
                result.failures.append(failure)
                result.known_failures += 1
        started = time.perf_counter()
        per = target.cases_per_batch

        def expired() -> bool:
            return seconds is not None and time.perf_counter() - started >= seconds

        def batches():  # (batch, first, last) of this shard while the budget lasts
            batch = k
            while not (examples is not None and batch * per >= examples):
                if expired():
                    return
                first = batch * per
                yield batch, first, first + per if examples is None else min(first + per, examples)
                batch += n

        pool = getattr(session, "oracle_pool", None)
        prepared = (pool.prepared_batches(target, options, seed, batches(), session, expired) if pool is not None
                    else None)
        for batch, first, last in (batches() if prepared is None else prepared):
            t = time.perf_counter()
            if prepared is None:
                built = [(*build_case(target, options, seed, i), None) for i in range(first, last)]
                timing["generate"] += time.perf_counter() - t
            else:  # built, classified and answered by the workers: here, the wait for them
                built, answer = prepared.take()
                timing[WORKERS_PHASE] += time.perf_counter() - t
            cases = [case for case, *_ in built]
            outcomes = session.check(cases) if prepared is None else session.check(cases, answer)
            t = time.perf_counter()
            for i, ((case, trace, extra), outcome) in enumerate(zip(built, outcomes)):
                result.add(target, case, outcome, **(extra or {}))
                if not outcome.ok:
                    result.failures.append(Failure(first + i, case, trace, outcome, shard=k))
            timing["count+coverage"] += time.perf_counter() - t
            result.batches.append(batch)
            bar.update(result)
        result.seconds = time.perf_counter() - started
        if prepared is not None:  # how busy the workers were while the campaign waited for them (bound_by)
            timing[WORKERS_BUSY] += prepared.busy
            timing[WORKERS_CAPACITY] += prepared.capacity
        bar.done(result)
        for key, value in getattr(session, "timing", {}).items():
            timing[key] += value
        result.timing = {key: round(value, 4) for key, value in sorted(timing.items())}
        if shrink:
            shrinking.shrink_failures(target, options, session, result.failures[:max_shrinks], database,
                                      seconds=shrink_seconds)
    finally:
        if own_session:
            session.close()
    return result


def check_campaign(target, options, seed, examples, seconds, shard) -> tuple:
    """(seed, examples, seconds, k, n) of a campaign, or an ArgumentError naming the wrong one (before any case)."""
    if not isinstance(target, Target):
        raise ArgumentError("fuzz_target", "target", type(target).__name__,
                            "give a Target: drvtma.fuzz.get_target(name)")
    if not isinstance(options, dict):
        raise ArgumentError("fuzz_options", "options", type(options).__name__, "give target.configure(...)'s dict")
    seed = as_int(seed, "seed", rule="fuzz_seed")
    if examples is not None:
        examples = as_int(examples, "examples", rule="fuzz_budget", lo=1, fix="run at least 1 example")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.integer, np.floating)) \
                or not seconds > 0 or seconds == float("inf"):
            raise ArgumentError("fuzz_budget", "seconds", seconds, "give a positive, finite number of seconds")
        seconds = float(seconds)
    if not (isinstance(shard, (tuple, list)) and len(shard) == 2):
        raise ArgumentError("fuzz_shard", "shard", shard, "give (k, n): shard k of n, 0 <= k < n")
    n = as_int(shard[1], "shard", rule="fuzz_shard", lo=1, fix="give (k, n): shard k of n, 0 <= k < n")
    k = as_int(shard[0], "shard", rule="fuzz_shard", lo=0, hi=n - 1, fix="give (k, n): shard k of n, 0 <= k < n")
    return seed, examples, seconds, k, n


def merge_results(parts: list[CampaignResult], case_key=None) -> CampaignResult:
    """One result from the shards' results (counts summed, failures in case order, seconds of the slowest).
    A failure replayed from the database by several shards is kept once (`case_key(case)` tells cases apart)."""
    if not parts:
        raise ArgumentError("fuzz_shard", "parts", parts, "give the shards' CampaignResults (at least one)")
    first = parts[0]
    merged = CampaignResult(first.target, first.options, first.seed, shards=len(parts), shard=None,
                            budget=first.budget)
    covered = [p.coverage for p in parts if p.coverage is not None]
    if covered:
        merged.coverage = Coverage(covered[0].target, covered[0].universe)
        for c in covered:
            merged.coverage.merge(c)
    timing = cast("dict[str, float]", Counter())
    known = set()
    for part in sorted(parts, key=lambda p: p.shard or 0):
        merged.cases += part.cases
        merged.size += part.size
        merged.mismatches += part.mismatches
        merged.per_shard.append({"shard": part.shard, "cases": part.cases, "size": part.size,
                                 "mismatches": part.mismatches, "seconds": round(part.seconds, 3),
                                 "per_second": round(part.per_second, 1), "devices": part.devices})
        merged.seconds = max(merged.seconds, part.seconds)
        merged.batches += part.batches
        for failure in part.failures:
            if failure.index is None:
                key = case_key(failure.case) if case_key else id(failure)
                if key in known:
                    continue
                known.add(key)
                merged.known_failures += 1
            merged.failures.append(failure)
        merged.devices += part.devices
        for key, row in part.by_label.items():
            total = merged.by_label.setdefault(key, [0, 0, 0])
            for j in range(3):
                total[j] += row[j]
        for key, value in part.timing.items():
            timing[key] += value
    merged.batches.sort()
    merged.failures.sort(key=lambda f: (-1 if f.index is None else f.index))
    merged.timing = {key: round(value, 4) for key, value in sorted(timing.items())}
    return merged


def bound_by(timing: dict) -> str:
    """The part of the check that took the most time (what bounds the campaign's rate)."""
    parts = {k: v for k, v in timing.items() if k not in NOT_PHASES and isinstance(v, (int, float))}
    if not parts:
        return "unknown"
    total = sum(parts.values())
    name, value = max(parts.items(), key=lambda kv: kv[1])
    if total <= 0:
        return name
    busy = ""
    if name == WORKERS_PHASE and timing.get(WORKERS_CAPACITY, 0) > 0:  # busy: more workers help; idle: the handoff
        busy = f"; the workers busy {timing.get(WORKERS_BUSY, 0) / timing[WORKERS_CAPACITY] * 100:.0f}% of their time"
    return f"{name} ({value / total * 100:.0f}% of the measured time{busy})"
