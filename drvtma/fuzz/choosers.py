"""Choosers for fuzz campaigns: fast seeded draws that record what they chose, and hypothesis draws that read the
same record back, so a case found by a random campaign can be handed to hypothesis' shrinker.

Every target builds its cases through the small Chooser interface of `drvtma.testing` (integer, choice, chance).
`RecordingChooser` (a campaign) and `HypothesisChooser` (shrinking) turn each call into at most one integer
choice, the same one: a trivial call (one option, lo == hi) draws nothing in either. So `trace` of a recorded case
is the hypothesis choice sequence that rebuilds it (`tests/test_fuzz_cpu.py` checks this round trip).
"""

from __future__ import annotations

import numpy as np

CHANCE_STEPS = 100  # chance(p) is an integer 0..99: the top int(p * 100) values mean True
_WORDS = 4096
_CHUNK = 64
_PERIOD = 1 << 128


class RecordingChooser:
    """Seeded draws that keep the trace of choices. The words are those of blocks of `_WORDS` 63-bit integers from
    `numpy.random.default_rng(seed)`, each block used from its end, `_CHUNK` words at a time; a chunk is read
    straight from the PCG64 bit generator (advanced to it, its raw outputs halved: what `integers(0, 2**63)` gives
    for them), so a case that uses a few dozen words no longer draws and converts a whole block."""

    def __init__(self, seed) -> None:
        self._bits = np.random.PCG64(seed)
        self._at = 0  # the output the bit generator stands at
        self._block = -_WORDS  # the first output of the block in use (none yet)
        self._left = 0  # words of that block not yet read (its first `_left`)
        self._words: list[int] = []
        self.trace: list[int] = []

    def _refill(self) -> list[int]:
        if not self._left:
            self._block, self._left = self._block + _WORDS, _WORDS
        start = max(0, self._left - _CHUNK)
        first = self._block + start
        self._bits.advance((first - self._at) % _PERIOD)  # back or forward: PCG64's period is 2^128
        raw = self._bits.random_raw(self._left - start)
        self._at = first + self._left - start
        self._words = (raw >> np.uint64(1)).tolist()  # popped from the end: the block's order, reversed
        self._left = start
        return self._words

    def integer(self, lo: int, hi: int) -> int:
        if hi <= lo:
            return lo
        words = self._words or self._refill()
        v = lo + words.pop() % (hi - lo + 1)  # a 63-bit word: the modulo bias is below 2^-30 for these ranges
        self.trace.append(v)
        return v

    def choice(self, options):
        options = list(options)
        return options[self.integer(0, len(options) - 1)]

    def chance(self, p: float) -> bool:
        words = self._words or self._refill()
        v = words.pop() % CHANCE_STEPS
        self.trace.append(v)
        return v >= CHANCE_STEPS - int(p * CHANCE_STEPS)

    def position(self) -> int:
        """How many choices so far (targets mark where a part of a case starts, see `Target.focus`)."""
        return len(self.trace)


class HypothesisChooser:
    """The same calls drawn from hypothesis (`draw` of a composite strategy): shrinks towards small integers,
    early options and False."""

    def __init__(self, draw):
        from hypothesis import strategies as st

        self.draw, self.st = draw, st

    def integer(self, lo: int, hi: int) -> int:
        return lo if hi <= lo else self.draw(self.st.integers(lo, hi))

    def choice(self, options):
        options = list(options)
        return options[self.integer(0, len(options) - 1)]

    def chance(self, p: float) -> bool:
        return self.integer(0, CHANCE_STEPS - 1) >= CHANCE_STEPS - int(p * CHANCE_STEPS)

    def position(self) -> int | None:
        return None


class ChooserGenerator:
    """The few scalar `numpy.random.Generator` calls `drvtma.tma.stores.random_store_case` makes, answered by a
    Chooser, so that builder records and shrinks like the others (its data stays with a real Generator)."""

    _FRACTION = 1024

    def __init__(self, chooser):
        self.ch = chooser

    def integers(self, low, high=None, size=None, dtype=None):
        if size is not None:
            raise TypeError("ChooserGenerator draws scalars only")
        lo, hi = (0, int(low)) if high is None else (int(low), int(high))
        return self.ch.integer(lo, hi - 1)

    def choice(self, options):
        return self.ch.choice(list(options))

    def random(self, size=None):
        if size is not None:
            raise TypeError("ChooserGenerator draws scalars only")
        return self.ch.integer(0, self._FRACTION - 1) / self._FRACTION


def case_seed(seed: int, index: int) -> np.random.SeedSequence:
    """The seed of case `index` of a campaign: independent streams, the same whichever shard draws it."""
    return np.random.SeedSequence([int(seed) & ((1 << 64) - 1), int(index)])


def build_case(target, options: dict, seed: int, index: int):
    """Case `index` of the campaign with `seed` (built by `target`), and its recorded choices."""
    ch = RecordingChooser(case_seed(seed, index))
    return target.build(ch, options), ch.trace
