"""What a fuzz target is, and the open registry `drvtma fuzz TARGET` looks targets up in.

A target (a `Target` subclass, one instance) provides:

- ``name``, ``description``, ``unit`` (what `size` counts: "boxes", "specs", "cases"), ``cases_per_batch``
  (cases checked together, e.g. one launch), ``needs_gpu``;
- ``configure(spec)`` -> options, a JSON-ready dict (the user's own map from ``--spec FILE`` or None, data
  seeds, sizes); options travel into every report and reproducer;
- ``build(chooser, options)`` -> case: the whole case from `drvtma.testing`-style Chooser calls (integer, choice,
  chance) only, so a recorded campaign case replays in hypothesis and shrinks (`drvtma.fuzz.choosers`);
- ``session(options, fake=False)`` -> a context manager whose ``check(cases)`` returns one `Outcome` per case
  (the probe against the oracle); ``fake=True`` puts the oracle in place of the device, for CPU tests. By default
  it opens ``session_class``, a `Session` subclass (`check_one`, `timing`, handles closed with the session);
- ``labels(case)`` (dtype, rank, swizzle, fill: the summary table's rows; `spec_labels` for a map), ``size(case)``,
  ``case_to_json(case)`` / ``case_from_json(d, options)`` (the reproducer), ``describe(case)``;
- optionally ``focus(trace, case, outcome)``: the recorded choices narrowed to the failing part (e.g. only the
  boxes that differed) before shrinking;
- ``coverage``: a `drvtma.fuzz.coverage.CoverageModel` (the classes of input the oracle answers for, and those one
  case falls into), counted by every campaign; None: the target measures none.

Register a new one with a line in BUILTIN_TARGETS ("name": "module:attribute", imported only when asked for),
with `register(target)` at run time, or with an entry point in the group ``drvtma.fuzz_targets``.
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..errors import ArgumentError, UnknownNameError
from ..runtime.driver import Resource
from ..tma.tiled.spec import SWIZZLE_SPAN_BYTES

if TYPE_CHECKING:
    from .coverage.core import CoverageModel

# Imported on first use, so a target's room (and its GPU code) loads only when that target runs.
BUILTIN_TARGETS = {
    "encode": "drvtma.fuzz.encode:ENCODE",
    "loads": "drvtma.fuzz.loads:LOADS",
    "stores": "drvtma.fuzz.stores:STORES",
    "reductions": "drvtma.fuzz.stores:REDUCTIONS",
    "kernel-loads": "drvtma.fuzz.user:KERNEL_LOADS",
    "kernel-stores": "drvtma.fuzz.user:KERNEL_STORES",
    "kernel-reductions": "drvtma.fuzz.user:KERNEL_REDUCTIONS",
    "im2col": "drvtma.fuzz.im2col:IM2COL",
    "im2col_encode": "drvtma.fuzz.im2col:IM2COL_ENCODE",
}
ENTRY_POINT_GROUP = "drvtma.fuzz_targets"

_registry: dict[str, Target] = {}


@dataclass
class Outcome:
    """One case checked: ``ok``, the bytes (or answers) the oracle expected and the device gave (JSON-ready),
    the first differences (dicts with at least ``offset``, ``expected``, ``got``), a text ``detail``, and the
    indices of the failing parts (``bad``, e.g. boxes) that `Target.focus` may use."""

    ok: bool
    expected: object = None
    got: object = None
    differences: list = field(default_factory=list)
    detail: str = ""
    bad: list = field(default_factory=list)


@dataclass
class Failure:
    """A case that failed, with its recorded choices, and (after `shrink`) the smallest failing case found."""

    index: int | None  # campaign case index; None: replayed from the example database
    case: Any  # what the target's `build` returns
    trace: list[int]
    outcome: Outcome
    shrunk_case: Any = None
    shrunk_outcome: Outcome | None = None
    shrink: dict = field(default_factory=dict)  # how shrinking went: calls, seconds, method
    shard: int = 0  # the shard that found it


def swizzle_label(swizzle) -> str:
    """A swizzle as drvtma's specs spell it ("none", "32B", "64B", "128B"); a value no member has as its int."""
    if swizzle in SWIZZLE_SPAN_BYTES:
        return f"{SWIZZLE_SPAN_BYTES[swizzle]}B" if SWIZZLE_SPAN_BYTES[swizzle] else "none"
    return str(int(swizzle))


def spec_labels(spec) -> dict:
    """A map's summary rows: dtype, rank, swizzle, fill (lower-case member names; a value no member has as its int)."""
    fill = spec.oob_fill
    return {"dtype": spec.dtype.name, "rank": str(spec.rank), "swizzle": swizzle_label(spec.swizzle),
            "fill": fill.name.lower() if hasattr(fill, "name") else str(fill)}


class Session(Resource):
    """What a target's `session` opens: `check(cases)` runs `check_one` on each (override `check` to batch them),
    `timing` adds up the seconds (and counts) of each part, `own(handle)` closes a handle with the session. On the one
    lifecycle (runtime.driver.Resource): close() closes every owned handle, the last opened first, even if one fails
    (then raises the first error); a second close does nothing; a with-block closes."""

    oracle_pool = None  # an OraclePool once start_oracle_pool ran: its workers prepare the campaign's cases

    def __init__(self, options: dict, fake: bool = False):
        self.options, self.fake = options, fake
        # a Counter (a part not timed yet reads 0) of seconds: typeshed types a Counter's values as int
        self.timing = cast("dict[str, float]", Counter())
        self._handles: list = []

    def own(self, handle):
        self._handles.append(handle)
        return handle

    def _parts(self) -> tuple:
        handles = tuple(reversed(self._handles))  # the last opened first (a probe before the buffer it reads)
        self._handles.clear()  # closed now: a second close has nothing left
        return handles

    def check(self, cases, answer=None) -> list[Outcome]:
        """Each case in turn; `answer`: one oracle answer per case, made already (by oracle workers)."""
        if answer is None:
            return [self.check_one(case) for case in cases]
        return [self.check_one(case, want) for case, want in zip(cases, answer)]

    def pool_base(self) -> int:
        """Where the session's pool of random bytes sits on the device (an oracle worker's answers use it)."""
        return 0

    def start_oracle_pool(self, workers: int) -> None:
        """Prepare the campaign's cases (built, classed, answered by the oracle) on `workers` processes (a target
        with `oracle_workers`); they rebuild the session's pool of random bytes, if it has one, from options'
        data_seed and pool_bytes."""
        import time

        from .oracle_pool import OraclePool

        t = time.perf_counter()
        self.oracle_pool = self.own(OraclePool(workers, seed=self.options.get("data_seed", 0),
                                               nbytes=self.options.get("pool_bytes", 0)))
        self.timing["setup"] += time.perf_counter() - t

    def check_one(self, case, want=None) -> Outcome:
        """One case: launch, the oracle's answer (`want`: given by a worker), compare."""
        raise NotImplementedError


class Target:
    name = ""
    description = ""
    unit = "cases"
    cases_per_batch = 1
    needs_gpu = True
    fake_device = True  # whether session(fake=True) can stand the oracle in for the GPU
    # whether workers can prepare its cases (--oracle-workers): then `expected_batch` gives a batch's oracle answer
    # on a worker, `answer` turns it into what its session's check(cases, answer) takes, and the session's
    # pool_base() says where its pool of random bytes sits
    oracle_workers = False
    version = 1  # bump when `build` changes, so stored hypothesis examples of the old builder are not mixed in
    session_class: type[Session] | None = None
    coverage: CoverageModel | None = None

    def configure(self, spec=None) -> dict:
        return {"spec": spec.to_dict() if spec is not None else None}

    def build(self, ch, options: dict):
        raise NotImplementedError

    def session(self, options: dict, *, fake: bool = False, oracle_workers: int = 0) -> Session:
        if self.session_class is None:
            raise NotImplementedError(f"the {self.name} target gives no session_class: set it or override session")
        if fake and not self.fake_device:
            raise NotImplementedError(f"the {self.name} target has no fake device: it needs a Hopper GPU")
        if oracle_workers and not self.oracle_workers:
            raise ArgumentError("oracle_workers", "oracle_workers", oracle_workers,
                                f"give 0: the {self.name} target's oracle runs in its own process",
                                "loads, im2col, stores, reductions and your kernel's (--kernel) compute their oracle "
                                "on worker processes")
        session = self.session_class(options, fake)
        if oracle_workers:
            try:
                session.start_oracle_pool(oracle_workers)
            except BaseException:
                session.close()
                raise
        return session

    def expected(self, case, pool, base: int):
        """The oracle's answer for `case` in a pool of random bytes at `base` (a target with `oracle_workers`)."""
        raise NotImplementedError(f"the {self.name} target's oracle runs in its session only")

    def expected_batch(self, cases: list, pool, base: int) -> tuple[list, object]:
        """On an oracle worker, a batch's answer: (arrays, which reach the campaign through shared files, and the
        rest, which is pickled); by default each case's `expected`."""
        return [self.expected(case, pool, base) for case in cases], None

    def answer(self, cases: list, arrays: list, rest):
        """What the session's check(cases, answer) takes, from `expected_batch`'s parts: by default the arrays."""
        return arrays

    def labels(self, case) -> dict:
        return {}

    def size(self, case) -> int:
        return 1

    def case_to_json(self, case) -> dict:
        raise NotImplementedError

    def case_from_json(self, d: dict, options: dict):
        raise NotImplementedError

    def describe(self, case) -> str:
        return str(case)

    def focus(self, trace: list[int], case, outcome: Outcome) -> list[int]:
        return trace

    def picture(self, case, outcome: Outcome) -> str | None:
        """The SVG of the case's first failing part, expected vs got (None: this target draws none)."""
        return None


def register(target: Target, *, replace: bool = False) -> Target:
    """Make `target` available to `drvtma fuzz NAME` (and `drvtma repro`) in this process."""
    if not isinstance(target, Target):
        raise ArgumentError("fuzz_target", "target", type(target).__name__, "register an instance of a Target "
                            "subclass")
    if not target.name or not isinstance(target.name, str):
        raise ArgumentError("fuzz_target", "target.name", target.name, "give the target a name (text)")
    if target.name in _registry and not replace and _registry[target.name] is not target:
        raise ArgumentError("fuzz_target", "target.name", target.name, "pick another name, or pass replace=True",
                            "a target of this name is already registered")
    _registry[target.name] = target
    return target


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    try:
        return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    except TypeError:  # Python 3.9 style metadata
        return {ep.name: ep.value for ep in entry_points().get(ENTRY_POINT_GROUP, [])}


def target_names() -> list[str]:
    return sorted(set(_registry) | set(BUILTIN_TARGETS) | set(_entry_points()))


def get_target(name: str) -> Target:
    """The target called `name`: registered, built in, or from an entry point (imported now)."""
    if not isinstance(name, str):
        raise UnknownNameError("fuzz_target", "target", name, f"give a name; known: {', '.join(target_names())}")
    if name in _registry:
        return _registry[name]
    where = BUILTIN_TARGETS.get(name) or _entry_points().get(name)
    if where is None:
        raise UnknownNameError("fuzz_target", "target", name, f"use one of the known: {', '.join(target_names())}",
                               "no fuzz target of this name")
    module, _, attr = where.partition(":")
    target = getattr(importlib.import_module(module), attr)
    return register(target, replace=True)
