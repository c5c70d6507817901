"""Fuzz YOUR kernel: the targets kernel-loads, kernel-stores and kernel-reductions (`drvtma fuzz loads --kernel
file.py:run`), and `fuzz_kernel(run, direction=...)` for pytest.

drvtma draws each case (a map valid under the toolchain's own rules: `strategy` "drvtma", "triton" or "cuda.core";
coordinates inside, straddling and far outside; data never zero; poisoned guards), calls your kernel
(`drvtma.fuzz.kernel.LoadKernel` / `StoreKernel`), compares with its oracle, shrinks failures and writes
reproducers that `drvtma repro` replays (they name your kernel: options["kernel"]). The kernel decides where it
runs, so `fake` changes nothing here.
"""

from __future__ import annotations

import functools
import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..errors import ArgumentError, DrvtmaError, as_int
from ..show.failure import failure_svg
from ..testing import build_valid_spec
from ..testing.strategies import coordinate_builder
from ..tma.stores import REDUCE_OPS, STORE, apply_store
from ..tma.tiled.spec import TensorMapSpec
from . import kernel as K
from . import report
from .campaign import run_campaign
from .coverage import Universe
from .coverage.stores import StoresCoverage
from .coverage.tiled import TiledLoadsCoverage, restricted, tiled_universe
from .loads import LoadsTarget, build_boxes
from .stores import STORES, StoreFuzzCase, StoresTarget
from .targets import Outcome, Session, Target, spec_labels
from .triton import MAX_SIGNATURES

DIRECTIONS = {"loads": "kernel-loads", "stores": "kernel-stores", "reductions": "kernel-reductions"}
MAX_BOXES = 16
MAX_EXTENT_BYTES = 1 << 20


# ---------------------------------------------------------------------------------------------- strategies

class DrvtmaSpecs:
    """drvtma's own rules: every valid non-interleaved map (loads), `random_store_case` (stores)."""

    name = "drvtma"

    def load_spec(self, ch, options: dict) -> TensorMapSpec:
        return build_valid_spec(ch, interleave=False, address=False, max_dim=ch.choice([8, 40, 300]),
                                max_smem_bytes=ch.choice([2048, 16384]),
                                max_extent_bytes=options["max_extent_bytes"])

    def load_coordinates(self, spec: TensorMapSpec):
        """A function of the chooser that draws one box's coordinates for `spec` (set up once per map)."""
        return coordinate_builder(spec)

    def refuses(self, spec: TensorMapSpec) -> str | None:
        """The rule by which this toolchain cannot express `spec` (None: it can): drvtma's maps take every valid one."""
        return None

    def store_case(self, ch, options: dict) -> StoreFuzzCase:
        return STORES.build(ch, options)  # the stores target's builder (it reads nothing of the target)


STRATEGIES = {"drvtma": "drvtma.fuzz.user:DRVTMA_SPECS", "triton": "drvtma.fuzz.triton:TRITON_SPECS",
              "cuda.core": "drvtma.fuzz.cuda_core:CUDA_CORE_SPECS"}


def strategy(name: str):
    if name not in STRATEGIES:
        raise ArgumentError("fuzz_strategy", "strategy", name, f"use one of {', '.join(STRATEGIES)}")
    module, _, attr = STRATEGIES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


# ---------------------------------------------------------------------------------------------- loads

@dataclass
class KernelLoadCase:
    spec: TensorMapSpec
    coords: np.ndarray  # (boxes, rank), NumPy order
    data_seed: int
    layout: tuple | None = field(default=None, compare=False)  # trace positions, for LoadsTarget.focus


# The parts of a check of your kernel, timed (`bound_by` names the largest): making the case's data, your callable
# (its launch, device work and copies back, as one), the oracle, the comparison. A toolchain that compiles on a
# kernel's first call with new constants (Triton) gets that first call timed apart: its compile is not the pace of
# the campaign's later calls.
KERNEL_PHASE = "your kernel (the callable)"
FIRST_CALL_PHASE = "your kernel's first call per compile signature (compiling)"


def _add_times(session: Session, **parts: float) -> None:
    names = {"data": "data", "kernel": KERNEL_PHASE, "first_call": FIRST_CALL_PHASE, "oracle": "oracle",
             "compare": "compare"}
    for part, seconds in parts.items():
        session.timing[names[part]] += seconds


class _CompileSignatures:
    """Which calls of the kernel are the first of their compile signature (the strategy's `compile_signature`; a
    strategy without one compiles nothing per call)."""

    def __init__(self, options: dict):
        self.signature = getattr(strategy(options.get("strategy", "drvtma")), "compile_signature", None)
        self.seen: set = set()

    def kernel_part(self, specs) -> str:
        """"first_call" when any of `specs` brings a signature not called before, else "kernel"."""
        if self.signature is None:
            return "kernel"
        new = {self.signature(spec) for spec in specs} - self.seen
        self.seen |= new
        return "first_call" if new else "kernel"


def _call_kernel(session, calls: list) -> list:
    """Your kernel's results for `calls` (LoadCall / StoreCall): in one call of a batched kernel, else one call
    each; the time goes to the kernel's part, or to its compile part for a call with a new compile signature."""
    t = time.perf_counter()
    if K.is_batched(session.run):
        results = K.batch_results(session.run(calls), len(calls))
        _add_times(session, **{session.signatures.kernel_part(c.spec for c in calls): time.perf_counter() - t})
        return results
    results = []
    for call in calls:
        results.append(session.run(*call))
        _add_times(session, **{session.signatures.kernel_part([call.spec]): time.perf_counter() - t})
        t = time.perf_counter()
    return results


def _load_answer(case: KernelLoadCase, session: Session | None = None) -> tuple:
    """(the case's memory, the oracle's boxes): made by an oracle worker or, timed, by the session."""
    t0 = time.perf_counter()
    memory = K.load_memory(case.spec, case.data_seed)
    t1 = time.perf_counter()
    want = K.expected_boxes(case.spec, memory, case.coords)
    if session is not None:
        _add_times(session, data=t1 - t0, oracle=time.perf_counter() - t1)
    return memory, want


class KernelLoadsSession(Session):
    def __init__(self, options: dict, fake: bool = False):
        super().__init__(options, fake)
        self.run = K.load_kernel(options["kernel"])
        self.signatures = _CompileSignatures(options)

    def check(self, cases, answer=None) -> list[Outcome]:
        """`answer`: each case's (memory, oracle's boxes), made by oracle workers (else here)."""
        answers = answer if answer is not None else [_load_answer(case, self) for case in cases]
        calls = [K.LoadCall(memory.copy(), K.GUARD_BYTES, c.spec, c.coords.copy()) for c, (memory, _) in
                 zip(cases, answers)]
        results = _call_kernel(self, calls)
        return [self._compare(c, want, r) for c, (_, want), r in zip(cases, answers, results)]

    def check_one(self, case: KernelLoadCase, want=None) -> Outcome:
        return self.check([case], None if want is None else [want])[0]

    def _compare(self, case: KernelLoadCase, want: np.ndarray, result) -> Outcome:
        """The kernel's `result` for `case` against the oracle (the result's check counts as the kernel's time)."""
        n = len(case.coords)
        t1 = time.perf_counter()
        got = K.load_result_boxes(result, case.spec, n)
        t2 = time.perf_counter()
        bad = np.flatnonzero((got.reshape(n, -1) != want.reshape(n, -1)).any(axis=1)).tolist()
        _add_times(self, kernel=t2 - t1, compare=time.perf_counter() - t2)
        if not bad:
            return Outcome(True)
        first = bad[0]
        diffs = K.box_differences(case.spec, case.coords, got, want, first)
        return Outcome(False, want[first].tobytes().hex(), got[first].tobytes().hex(), diffs,
                       f"{len(bad)} of {n} boxes differ; the first, box {first} at "
                       f"{tuple(int(v) for v in case.coords[first])} "
                       f"(NumPy order): {int((got[first] != want[first]).sum())} element(s), the first "
                       f"{diffs[0]['where']}: expected {diffs[0]['expected']}, got {diffs[0]['got']}", bad)


def _options(kernel: str, strategy_name: str, spec, ops=None, signatures: int = 0, signature_seed: int = 0,
             max_boxes: int = MAX_BOXES) -> dict:
    if not isinstance(kernel, str):
        raise ArgumentError("kernel_reference", "kernel", kernel, 'give "path/to/file.py:name"')
    strategy(strategy_name)
    as_int(max_boxes, "max_boxes", rule="fuzz_max_boxes", lo=1, hi=4096,
           fix="give 1..4096 boxes per call of your kernel")
    options = {"kernel": K.absolute_reference(kernel), "strategy": strategy_name,
               "spec": spec.to_dict() if spec is not None else None,
               "max_boxes": max_boxes, "max_extent_bytes": MAX_EXTENT_BYTES}
    fix = f"give 1..{MAX_SIGNATURES} with strategy='triton' (or 0: every case draws its own)"
    if as_int(signatures, "signatures", rule="fuzz_signatures", lo=0, hi=MAX_SIGNATURES, fix=fix):
        if strategy_name != "triton":  # the triton strategy's pool of compile signatures (triton.signature_pool)
            raise ArgumentError("fuzz_signatures", "signatures", signatures, fix, "a pool of Triton's compiles")
        options.update(signatures=signatures, signature_seed=as_int(signature_seed, "seed"))
    return options if ops is None else {**options, "ops": list(ops)}


class KernelLoadsCoverage(TiledLoadsCoverage):
    """The tiled loads' classes that the campaign's strategy (drvtma, triton, cuda.core) can express."""

    def universe(self, options: dict) -> Universe:
        if options.get("spec"):
            return super().universe(options)
        return _restricted(options["strategy"])


@functools.lru_cache(maxsize=None)
def _restricted(name: str) -> Universe:
    return restricted(tiled_universe(True), strategy(name).refuses)


class KernelLoadsTarget(Target):
    name = "kernel-loads"
    description = "your kernel's tiled loads (drvtma fuzz loads --kernel file.py:run) vs the NumPy oracle"
    unit = "boxes"
    cases_per_batch = 8
    session_class = KernelLoadsSession
    coverage = KernelLoadsCoverage()
    focus = LoadsTarget.focus  # only the boxes that differed, before shrinking
    oracle_workers = True  # the data and the oracle's boxes; your kernel runs in the campaign's process

    def expected_batch(self, cases: list, pool, base: int) -> tuple[list, object]:
        return [a for case in cases for a in _load_answer(case)], None

    def answer(self, cases: list, arrays: list, rest) -> list:
        return list(zip(arrays[0::2], arrays[1::2]))

    def configure(self, spec=None, *, kernel: str = "", strategy: str = "drvtma", signatures: int = 0,
                  signature_seed: int = 0, max_boxes: int = MAX_BOXES) -> dict:
        """Options of a campaign of your kernel: `max_boxes` loads per call at most (a kernel whose call costs
        more than its boxes goes faster with more)."""
        if spec is not None:
            spec.validate()
        return _options(kernel, strategy, spec, signatures=signatures, signature_seed=signature_seed,
                        max_boxes=max_boxes)

    def build(self, ch, options: dict) -> KernelLoadCase:
        specs = strategy(options["strategy"])
        spec = (TensorMapSpec.from_dict(options["spec"]) if options.get("spec")
                else specs.load_spec(ch, options))
        data_seed = ch.integer(0, (1 << 32) - 1)
        draw = specs.load_coordinates(spec)
        coords, layout = build_boxes(ch, spec, options["max_boxes"], lambda: draw(ch))
        return KernelLoadCase(spec, coords, data_seed, layout)

    def labels(self, case: KernelLoadCase) -> dict:
        return spec_labels(case.spec)

    def size(self, case: KernelLoadCase) -> int:
        return len(case.coords)

    def case_to_json(self, case: KernelLoadCase) -> dict:
        return {"spec": case.spec.to_dict(), "coordinates": case.coords.tolist(), "data_seed": case.data_seed}

    def case_from_json(self, d: dict, options: dict) -> KernelLoadCase:
        spec = TensorMapSpec.from_dict(d["spec"])
        return KernelLoadCase(spec, np.array(d["coordinates"], dtype=np.int64).reshape(-1, spec.rank),
                              int(d["data_seed"]))

    def describe(self, case: KernelLoadCase) -> str:
        head = ", ".join(str(tuple(int(v) for v in c)) for c in case.coords[:4])
        more = f" and {len(case.coords) - 4} more" if len(case.coords) > 4 else ""
        return (f"{len(case.coords)} load(s) at {head}{more} (NumPy order), data seed {case.data_seed}\n"
                f"{case.spec.describe()}")

    def picture(self, case: KernelLoadCase, outcome: Outcome) -> str | None:
        """The first differing box, expected vs got, drawn in its shared-memory image as drvtma's own loads are
        (the kernel's boxes placed where TMA puts each element)."""
        if outcome.ok or outcome.expected is None or not outcome.bad:
            return None

        spec = case.spec
        # a load case's outcome holds the boxes' hex (KernelLoadsSession)
        return failure_svg(spec, case.coords[outcome.bad[0]], 0, K.box_image(spec, cast(str, outcome.expected)),
                           K.box_image(spec, cast(str, outcome.got)))


# ---------------------------------------------------------------------------------------------- stores

def _store_answer(c: StoreFuzzCase, session: Session | None = None) -> tuple:
    """(the case's memory, what the oracle says memory holds after the store, the box): made by an oracle worker
    or, timed, by the session."""
    t0 = time.perf_counter()
    initial, box = c.data()
    memory = K.store_memory(initial, c.data_seed)
    t1 = time.perf_counter()
    want = memory.copy()
    apply_store(want, K.GUARD_BYTES, c.case.spec, c.case.coords, box, c.case.op)
    if session is not None:
        _add_times(session, data=t1 - t0, oracle=time.perf_counter() - t1)
    return memory, want, box


class KernelStoresSession(Session):
    def __init__(self, options: dict, fake: bool = False):
        super().__init__(options, fake)
        self.run = K.load_kernel(options["kernel"])
        self.signatures = _CompileSignatures(options)

    def check(self, cases, answer=None) -> list[Outcome]:
        """`answer`: each case's (memory, oracle's memory, box), made by oracle workers (else here)."""
        answers = answer if answer is not None else [_store_answer(c, self) for c in cases]
        calls = [K.StoreCall(memory.copy(), K.GUARD_BYTES, c.case.spec, np.array(c.case.coords, dtype=np.int64),
                             box.copy(), c.case.op) for c, (memory, _, box) in zip(cases, answers)]
        results = _call_kernel(self, calls)
        return [self._compare(c, memory, want, result) for c, (memory, want, _), result in zip(cases, answers, results)]

    def check_one(self, c: StoreFuzzCase, want=None) -> Outcome:
        return self.check([c], None if want is None else [want])[0]

    def _compare(self, c: StoreFuzzCase, memory: np.ndarray, want: np.ndarray, result) -> Outcome:
        spec, op = c.case.spec, c.case.op
        t2 = time.perf_counter()
        got = K.store_result_memory(result, memory)
        t3 = time.perf_counter()
        wrong = int((got != want).sum())
        _add_times(self, kernel=t3 - t2, compare=time.perf_counter() - t3)
        if not wrong:
            return Outcome(True)
        diffs = K.memory_differences(spec, got, want)
        return Outcome(False, want.tobytes().hex(), got.tobytes().hex(), diffs,
                       f"{wrong} byte(s) differ (offsets from the tensor base; memory holds {K.GUARD_BYTES} guard "
                       f"bytes on each side); the first at {diffs[0]['offset']} ({diffs[0]['where']}): expected "
                       f"{diffs[0]['expected']}, got {diffs[0]['got']}; {op} at {c.case.coords}")


class KernelStoresCoverage(StoresCoverage):
    """The stores (or reductions) classes that the campaign's strategy can express."""

    def universe(self, options: dict) -> Universe:
        full = super().universe(options)
        if options.get("spec"):
            return full
        return restricted(full, strategy(options["strategy"]).refuses)


class KernelStoresTarget(StoresTarget):
    unit = "stores"
    cases_per_batch = 16
    fake_device = True  # the user's kernel runs either way
    session_class = KernelStoresSession
    oracle_workers = True  # the data and the oracle's memory; your kernel runs in the campaign's process

    def expected_batch(self, cases: list, pool, base: int) -> tuple[list, object]:
        return [a for c in cases for a in _store_answer(c)], None

    def answer(self, cases: list, arrays: list, rest) -> Any:  # (memory, want, box) a case, not a StorePlan
        return list(zip(arrays[0::3], arrays[1::3], arrays[2::3]))

    def configure(self, spec=None, *, kernel: str = "", strategy: str = "drvtma", signatures: int = 0,
                  signature_seed: int = 0) -> dict:
        base = super().configure(spec)
        return {**_options(kernel, strategy, spec, base["ops"], signatures, signature_seed),
                "max_extent_bytes": MAX_EXTENT_BYTES}

    def __init__(self, name: str, ops: list[str], description: str):
        super().__init__(name, ops, description)
        self.coverage = KernelStoresCoverage(ops)

    def build(self, ch, options: dict) -> StoreFuzzCase:
        return strategy(options["strategy"]).store_case(ch, options)

    def size(self, c) -> int:
        return 1


DRVTMA_SPECS = DrvtmaSpecs()
KERNEL_LOADS = KernelLoadsTarget()
KERNEL_STORES = KernelStoresTarget("kernel-stores", [STORE], "your kernel's tensor stores (drvtma fuzz stores "
                                   "--kernel file.py:run) vs the stores oracle, guards compared")
KERNEL_REDUCTIONS = KernelStoresTarget("kernel-reductions", list(REDUCE_OPS), "your kernel's tensor reductions "
                                       "(drvtma fuzz reductions --kernel file.py:run) vs the stores oracle")


# ---------------------------------------------------------------------------------------------- pytest

class KernelMismatch(DrvtmaError, AssertionError):
    """`fuzz_kernel` found cases where your kernel and drvtma's oracle differ (the message: the shrunk case, its
    first differing element, the reproducer)."""


def fuzz_kernel(run, *, direction: str = "loads", examples: int = 200, seed: int = 0, strategy: str = "drvtma",
                spec: TensorMapSpec | None = None, out=None, shrink: bool = True, max_shrinks: int = 1,
                shrink_seconds: float = 60.0, check: bool = True, signatures: int = 0, oracle_workers: int = 0):
    """Fuzz your kernel against drvtma's oracle.

    Parameters
    ----------
    run : callable
        A `LoadKernel` for "loads", a `StoreKernel` for "stores" / "reductions" (`drvtma.fuzz.kernel`).
    direction : str
        "loads", "stores" or "reductions".
    examples, seed
        The campaign: that many cases from that seed.
    strategy : str
        Who draws the maps: "drvtma", "triton" or "cuda.core" (each draws only what its toolchain can express).
    spec : TensorMapSpec, optional
        Your own map (only coordinates and data are drawn).
    out : folder, optional
        Where the reproducers (JSON and picture) go.
    signatures : int
        With strategy "triton": draw element type, block and padding from that many (chosen by `seed`), so that
        many Triton compiles serve the campaign (0: every case draws its own).
    oracle_workers : int
        That many more processes draw the cases, make their data and the oracle's answers, batches ahead, while
        this one calls your kernel and compares (0: all here; the same cases and verdicts).

    Returns
    -------
    (CampaignResult, list of Path)
        The campaign and the reproducers written.

    Raises
    ------
    KernelMismatch
        With `check` (default), a mismatch: an AssertionError holding the first shrunk failure's report.
    ArgumentError
        A wrong direction, callable or strategy (before any case).
    """
    if direction not in DIRECTIONS:
        raise ArgumentError("fuzz_target", "direction", direction, f"use one of {', '.join(DIRECTIONS)}")
    if not callable(run):
        raise ArgumentError("kernel_reference", "run", type(run).__name__, "give the callable that runs your "
                            "kernel (see drvtma.fuzz.kernel.LoadKernel / StoreKernel)")
    target = KERNEL_LOADS if direction == "loads" else KERNEL_STORES if direction == "stores" else KERNEL_REDUCTIONS
    options = target.configure(spec, kernel=K.kernel_reference(run), strategy=strategy, signatures=signatures,
                               signature_seed=seed)
    result = run_campaign(target, options, seed=seed, examples=examples, shrink=shrink, max_shrinks=max_shrinks,
                          shrink_seconds=shrink_seconds, oracle_workers=oracle_workers)
    paths = report.write_reproducers(target, result, Path(out)) if out is not None and result.failures else []
    if check and result.mismatches:
        first = result.failures[0]
        outcome = first.shrunk_outcome or first.outcome
        case = first.shrunk_case if first.shrunk_case is not None else first.case
        raise KernelMismatch(f"{report.headline(result)}\nthe smallest failing case found:\n"
                             f"{target.describe(case)}\n{report.diff_text(outcome)}"
                             + (f"\nreproducer: {paths[0]}  (drvtma repro {paths[0]})" if paths else ""))
    return result, paths
