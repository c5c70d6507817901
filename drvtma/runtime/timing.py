"""Timing launches with CUDA events: warm-ups, one event pair per run, median and p95.

A Python launch takes several microseconds to issue. Recorded on an idle GPU, the start event would complete at
once and the kernel start only after the host caught up, so every sample would carry the host's issue time.
Each run therefore starts with a short kernel that holds the stream (cu/runtime/timing.cu): the start event, the launch
and the end event all queue up behind it, and the interval measures the GPU's work alone. That holds only while the
host issues them within the hold, so each run checks it: a run whose issue took longer than its hold (a slow launch
path, the OS preempting the host) is timed again behind a hold twice as long. A host slower than the longest hold
(compute-sanitizer's instrumentation takes tens of ms a call) keeps its runs, counted as `host_bound`.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from dataclasses import dataclass

HEAD_START_NS = 100_000  # far longer than issuing one launch from Python takes
MAX_HOLD_NS = 20_000_000  # the longest hold: past it, a run is kept and counted as host-bound


def percentile(samples, p: float) -> float:
    """Linear interpolation between closest ranks (the article's percentile_of)."""
    v = sorted(float(s) for s in samples)
    if not v:
        raise ValueError("no samples")
    pos = min(max(p, 0.0), 100.0) / 100.0 * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


@dataclass(frozen=True)
class Timing:
    """Milliseconds of each timed launch; `retaken`: runs timed again because the host outlasted the hold;
    `host_bound`: runs kept although the host outlasted the longest hold (their intervals include host time)."""

    samples: tuple[float, ...]
    retaken: int = 0
    host_bound: int = 0

    @property
    def median(self) -> float:
        return percentile(self.samples, 50)

    @property
    def p95(self) -> float:
        return percentile(self.samples, 95)

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def spread(self) -> float:
        """Slowest / fastest run: how far one median can be trusted."""
        return round(max(self.samples) / min(self.samples), 3)

    @staticmethod
    def joined(parts) -> Timing:
        """One Timing of several, their samples in order, their counts summed."""
        parts = tuple(parts)  # read three times below: a generator would give its counts once
        return Timing(tuple(s for t in parts for s in t.samples), sum(t.retaken for t in parts),
                      sum(t.host_bound for t in parts))


@contextlib.contextmanager
def collector_off():
    """Host-side timing without garbage-collector pauses (as timeit does); restores the collector's state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def gb_per_s(nbytes: int, ms: float) -> float:
    """A rate in GB/s (1e9 bytes per second) from bytes moved in `ms` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9


def time_copy(nbytes: int, *, runs: int, warmups: int) -> Timing:
    """cuMemcpyDtoD of nbytes between two buffers of its own, timed like a launch: the device's copy rate, the
    yardstick of the bandwidth benchmarks (count 2 * nbytes moved: read + written)."""
    from .driver import DeviceBuffer, call, cu

    with DeviceBuffer(nbytes) as src, DeviceBuffer(nbytes) as dst:
        src.fill_u32(0x3F800000)
        return time_launches(lambda: call(cu.cuMemcpyDtoD, dst.ptr, src.ptr, nbytes), runs=runs, warmups=warmups)


def copy_rate_gbs(nbytes: int, *, runs: int, warmups: int) -> float:
    """The cuMemcpyDtoD rate of nbytes in GB/s, counting read + written bytes."""
    return gb_per_s(2 * nbytes, time_copy(nbytes, runs=runs, warmups=warmups).median)


def time_launches(launch, *, runs: int, warmups: int, flush=None, stream=None,
                  head_start_ns: int = HEAD_START_NS) -> Timing:
    """Run `launch()` warmups times, then `runs` times between two events each, behind a stream hold of
    `head_start_ns` (0: none, the host's issue time is then measured too); flush() (untimed) before each run."""
    from .driver import Event, elapsed_ms, synchronize
    from .kernel import load_module

    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    hold = load_module("runtime/timing.cu").kernel("hold_stream") if head_start_ns > 0 else None
    for _ in range(warmups):
        launch()
    synchronize()
    start, end = Event(), Event()
    samples: list[float] = []
    retaken, host_bound, hold_ns = 0, 0, head_start_ns
    try:
        while len(samples) < runs:
            if flush is not None:
                flush()
            issued = time.perf_counter_ns()
            if hold is not None:
                hold.launch(hold_ns, grid=1, block=1, stream=stream)
            start.record(stream)
            launch()
            end.record(stream)
            issued = time.perf_counter_ns() - issued
            ms = elapsed_ms(start, end)
            # The hold began on the GPU no earlier than the host's call to launch it, so an issue shorter than the
            # hold had queued both events and the launch before the hold ended: the interval is the GPU's alone.
            if hold is not None and issued >= hold_ns:
                if hold_ns < MAX_HOLD_NS:
                    retaken, hold_ns = retaken + 1, min(2 * max(hold_ns, issued), MAX_HOLD_NS)
                    continue
                host_bound += 1
            samples.append(ms)
    finally:
        start.close()
        end.close()
    return Timing(tuple(samples), retaken, host_bound)


def timing_figure(timings: dict) -> dict:
    """{name: Timing} as a figure line's fields: each side's spread, retaken and host-bound runs."""
    return {"spread": {n: t.spread for n, t in timings.items()}, "retaken": {n: t.retaken for n, t in timings.items()},
            "host_bound": {n: t.host_bound for n, t in timings.items()}}


def time_abba(launches: dict, *, runs: int, warmups: int, flush=None) -> dict:
    """Two launches ({name: launch}) timed in halves of `runs` in the order a, b, b, a, so a drift of the clock
    under power over the run hits both alike: {name: Timing} of each side's runs in the order they ran."""
    return time_abba_pairs(launches, pairs=1, runs=runs, warmups=warmups, flush=flush).joined


@dataclass(frozen=True)
class AbbaPairs:
    """Timings of `pairs` ABBA rounds: `rounds[i]` is {name: Timing} of round i."""

    rounds: tuple

    @property
    def joined(self) -> dict:
        """{name: Timing} of every round's runs, in the order they ran."""
        return {name: Timing.joined(r[name] for r in self.rounds) for name in self.rounds[0]}

    def ratios(self, over: str, under: str) -> tuple[float, ...]:
        """Each round's median of `over` / median of `under` (time of theirs / time of ours: above 1, ours won)."""
        return tuple(round(r[over].median / r[under].median, 4) for r in self.rounds)


def time_abba_pairs(launches: dict, *, pairs: int, runs: int, warmups: int, flush=None) -> AbbaPairs:
    """`pairs` rounds of time_abba, `runs` spread evenly over them (at least one run per half): a ratio per round,
    so one round's clock or neighbour cannot decide a comparison. Warm-ups before the first round's halves only;
    later rounds warm each side with one untimed run. More than two launches run as a palindrome (a, b, c, c, b,
    a): a drift over the round still hits every side alike."""
    if pairs < 1:
        raise ValueError(f"pairs must be >= 1, got {pairs}")
    if len(launches) < 2:
        raise ValueError(f"time_abba_pairs compares two launches or more, got {len(launches)}")
    names = list(launches)
    half = max(1, runs // (2 * pairs))
    rounds = []
    for i in range(pairs):
        parts: dict[str, list[Timing]] = {name: [] for name in names}
        for name in names + names[::-1]:
            parts[name].append(time_launches(launches[name], runs=half, warmups=warmups if i == 0 else 1,
                                             flush=flush))
        rounds.append({name: Timing.joined(p) for name, p in parts.items()})
    return AbbaPairs(tuple(rounds))
