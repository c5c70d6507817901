"""time_launches' stream-hold check, on a fake driver and a fake host clock: a run whose issue outlasted its hold is
timed again behind a longer hold; past the longest hold it is kept and counted as host-bound."""

import pytest

from drvtma.runtime import driver, kernel, timing


@pytest.fixture
def fake(monkeypatch):
    state = {"now": 0, "holds": [], "host_ns": []}

    class FakeEvent:
        def record(self, stream=None):
            pass

        def close(self):
            pass

    class FakeHold:
        def launch(self, ns, **_):
            state["holds"].append(ns)

    def launch():  # the host spends the next scripted cost issuing this launch
        state["now"] += state["host_ns"].pop(0) if state["host_ns"] else 1_000

    monkeypatch.setattr(driver, "Event", FakeEvent)
    monkeypatch.setattr(driver, "elapsed_ms", lambda start, end: 0.5)
    monkeypatch.setattr(driver, "synchronize", lambda: None)
    monkeypatch.setattr(kernel, "load_module", lambda name: type("M", (), {"kernel": lambda self, n: FakeHold()})())
    monkeypatch.setattr(timing.time, "perf_counter_ns", lambda: state["now"])
    state["launch"] = launch
    return state


def test_a_run_the_host_issued_within_its_hold_is_kept(fake):
    t = timing.time_launches(fake["launch"], runs=3, warmups=0)
    assert t.samples == (0.5,) * 3 and t.retaken == 0 and t.host_bound == 0
    assert fake["holds"] == [timing.HEAD_START_NS] * 3


def test_a_run_the_host_issued_past_its_hold_is_retaken_behind_a_longer_hold(fake):
    fake["host_ns"] = [1_000, 250_000, 1_000, 1_000]  # the second run's issue took 250 us behind a 100 us hold
    t = timing.time_launches(fake["launch"], runs=3, warmups=0)
    assert t.samples == (0.5,) * 3 and t.retaken == 1 and t.host_bound == 0
    assert fake["holds"] == [100_000, 100_000, 500_000, 500_000]  # twice the issue time, kept for the rest


def test_past_the_longest_hold_a_run_is_kept_and_counted_host_bound(fake):
    fake["host_ns"] = [30_000_000] * 8  # a host slower than any hold (compute-sanitizer's)
    t = timing.time_launches(fake["launch"], runs=2, warmups=0)
    assert len(t.samples) == 2 and t.host_bound == 2 and t.retaken == 1
    assert fake["holds"] == [100_000, timing.MAX_HOLD_NS, timing.MAX_HOLD_NS]


def test_no_hold_no_check(fake):
    fake["host_ns"] = [30_000_000] * 3
    t = timing.time_launches(fake["launch"], runs=3, warmups=0, head_start_ns=0)
    assert t.samples == (0.5,) * 3 and t.retaken == 0 and t.host_bound == 0 and fake["holds"] == []


def test_abba_times_each_side_in_two_halves_a_b_b_a_and_joins_them(fake, monkeypatch):
    order = []

    def fake_time_launches(launch, *, runs, warmups, flush=None):
        order.append(launch)
        return timing.Timing((1.0,) * (runs - 1) + (2.0 if launch == "a" else 1.0,), retaken=1, host_bound=0)

    monkeypatch.setattr(timing, "time_launches", fake_time_launches)
    got = timing.time_abba({"ours": "a", "theirs": "b"}, runs=6, warmups=0)
    assert order == ["a", "b", "b", "a"]
    assert got["ours"].samples == (1.0, 1.0, 2.0, 1.0, 1.0, 2.0) and got["ours"].retaken == 2
    assert got["ours"].spread == 2.0 and got["theirs"].spread == 1.0 and got["theirs"].median == 1.0


def test_abba_pairs_give_a_ratio_per_pair_and_the_median_of_them(monkeypatch):
    """Three pairs; in the second, cuBLAS's clock dips: that pair's ratio alone moves, the median does not."""
    order, slow = [], iter([False] * 4 + [False, True, True, False] + [False] * 4)

    def fake_time_launches(launch, *, runs, warmups, flush=None):
        order.append((launch, runs, warmups))
        theirs_slow = next(slow)
        return timing.Timing(((2.0 if launch == "b" and theirs_slow else 1.0) * (1.0 if launch == "b" else 0.8),)
                             * runs)

    monkeypatch.setattr(timing, "time_launches", fake_time_launches)
    got = timing.time_abba_pairs({"ours": "a", "theirs": "b"}, pairs=3, runs=12, warmups=3)
    assert [o[0] for o in order] == ["a", "b", "b", "a"] * 3 and {o[1] for o in order} == {2}
    assert [o[2] for o in order] == [3] * 4 + [1] * 8  # warm-ups before the first pair only
    assert got.ratios("theirs", "ours") == (1.25, 2.5, 1.25)  # the dip moves one pair's ratio, not the median
    assert len(got.joined["ours"].samples) == 12 and got.joined["theirs"].median == 1.0
    with pytest.raises(ValueError, match="pairs"):
        timing.time_abba_pairs({"ours": "a", "theirs": "b"}, pairs=0, runs=4, warmups=0)


def test_three_launches_run_as_a_palindrome_each_in_two_halves(monkeypatch):
    """A variant beside ours and theirs: a, v, b, b, v, a each round, so a linear drift over the round hits every
    side alike; each side's ratio against any other per round."""
    order = []
    clock = iter(range(1, 100))

    def fake_time_launches(launch, *, runs, warmups, flush=None):
        order.append(launch)
        now = next(clock)  # the GPU slows a little with every half: a drift
        return timing.Timing(tuple({"a": 1.0, "v": 0.5, "b": 2.0}[launch] * (1 + 0.01 * now) for _ in range(runs)))

    monkeypatch.setattr(timing, "time_launches", fake_time_launches)
    got = timing.time_abba_pairs({"ours": "a", "variant": "v", "theirs": "b"}, pairs=2, runs=8, warmups=0)
    assert order == ["a", "v", "b", "b", "v", "a"] * 2
    assert all(len(got.joined[n].samples) == 8 for n in ("ours", "variant", "theirs"))  # `runs` per side
    # each side's two halves straddle the round's middle: the drift cancels in the medians' ratios
    assert got.ratios("ours", "variant") == (2.0, 2.0) and got.ratios("theirs", "ours") == (2.0, 2.0)
    with pytest.raises(ValueError, match="two launches or more"):
        timing.time_abba_pairs({"ours": "a"}, pairs=1, runs=2, warmups=0)


def test_timing_figure_and_the_conv_figure_carry_each_sides_spread_retaken_and_host_bound():
    from drvtma.gemm.conv import ConvShape
    from drvtma.gemm.conv_bench import ConvRow

    timings = {"drvtma": timing.Timing((1.0, 1.5), retaken=1), "cudnn": timing.Timing((2.0, 2.0), host_bound=2)}
    want = {"spread": {"drvtma": 1.5, "cudnn": 1.0}, "retaken": {"drvtma": 1, "cudnn": 0},
            "host_bound": {"drvtma": 0, "cudnn": 2}}
    assert timing.timing_figure(timings) == want
    row = ConvRow(ConvShape(n=2, h=9, w=11, c=64, k=128, r=3, s=3, pad=1), 1.25, 2.0, 0.1, timings)
    assert {k: row.figure()[k] for k in want} == want and row.figure()["ratio"] == 1.6
