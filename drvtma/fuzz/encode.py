"""The `encode` fuzz target: drvtma's validator against the driver's cuTensorMapEncodeTiled.

Specs are valid, singly or doubly broken (`drvtma.testing.build_any_spec`); with ``--spec FILE`` they are the
user's map with one rule broken at a time, or none. The validator's verdict (`driver_should_accept`) must be the
driver's: a disagreement is a mismatch. The map's address is a real allocation with the spec's offset and
alignment, so address rules are what the driver sees.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from ..errors import CudaError, TensorMapError
from ..testing import ADDRESS_BASE, applicable_rules, break_rule, build_any_spec
from ..tma.tiled.encode import encode_unchecked
from ..tma.tiled.rules import driver_should_accept, validate_all
from ..tma.tiled.spec import TensorMapSpec
from .coverage.encode import ENCODE_COVERAGE
from .targets import Outcome, Session, Target, spec_labels

if TYPE_CHECKING:
    from ..runtime.driver import DeviceBuffer
    from ..tma.im2col.spec import Im2colSpec

ADDRESS_WINDOW = 1 << 20
BUFFER_BYTES = 2 * ADDRESS_WINDOW


class EncodeSession(Session):
    """A real allocation (unless fake) whose addresses the maps take, so address rules are what the driver sees.
    `validate`, `should_accept` and `encode` are the validator and the driver call (im2col maps swap them)."""

    # any spec of the session's kind (tiled here, im2col in Im2colEncodeSession) -> its broken rules
    validate: Callable[..., list[TensorMapError]] = staticmethod(validate_all)
    should_accept: Callable[[list[TensorMapError]], bool] = staticmethod(driver_should_accept)
    unjudged: frozenset[str] = frozenset()  # a spec breaking one of these: the driver's verdict is recorded, not judged

    @staticmethod
    def encode(spec, address: int) -> None:
        encode_unchecked(spec.tma_params(), address)

    def __init__(self, options: dict, fake: bool = False):
        super().__init__(options, fake)
        self.buffer: DeviceBuffer | None = None
        if not fake:
            from ..runtime.driver import DeviceBuffer

            self.buffer = self.own(DeviceBuffer(BUFFER_BYTES))

    def check_one(self, spec: TensorMapSpec, want=None) -> Outcome:  # (no oracle workers: want is never given)
        t0 = time.perf_counter()
        errors = self.validate(spec)
        rules = sorted({e.rule for e in errors})
        expected = self.should_accept(errors)
        t1 = time.perf_counter()
        if self.fake:
            accepted, why = expected, ""
        else:
            assert self.buffer is not None  # a session on the device owns one
            address = self.buffer.ptr + ((spec.base_address or ADDRESS_BASE) - ADDRESS_BASE) % ADDRESS_WINDOW
            try:
                self.encode(spec, address)
                accepted, why = True, ""
            except CudaError as exc:
                accepted, why = False, exc.name
        t2 = time.perf_counter()
        self.timing["validate"] += t1 - t0
        self.timing["driver encode"] += t2 - t1
        want = {"accept": expected, "rules": rules}
        got = {"accept": accepted, "error": why}
        if self.unjudged.intersection(rules):
            return Outcome(True, {"accept": "not modelled", "rules": rules}, got)
        if accepted == expected:
            return Outcome(True, want, got)
        verdict = lambda a: "accept" if a else "refuse"  # noqa: E731
        return Outcome(False, want, got, [{"offset": 0, "expected": verdict(expected), "got": verdict(accepted),
                                           "where": f"rules broken: {', '.join(rules) or 'none'}"}],
                       f"the driver {'accepted' if accepted else 'refused (' + why + ')'}, the validator expected "
                       f"it to {verdict(expected)}; rules {rules or ['valid']}")


class EncodeTarget(Target):
    name = "encode"
    description = "validator (drvtma.tma.tiled.rules) vs the driver's cuTensorMapEncodeTiled, valid and broken specs"
    unit = "specs"
    cases_per_batch = 64
    session_class = EncodeSession
    coverage = ENCODE_COVERAGE

    def configure(self, spec=None) -> dict:
        if spec is not None:
            spec.replace(base_address=ADDRESS_BASE).validate()
        return {"spec": spec.to_dict() if spec is not None else None}

    def build(self, ch, options: dict) -> TensorMapSpec | Im2colSpec:  # im2col specs: Im2colEncodeTarget
        user = options.get("spec")
        for _ in range(100):
            if user:
                spec = TensorMapSpec.from_dict(user).replace(base_address=ADDRESS_BASE + 16 * ch.integer(0, 4096))
                if ch.chance(0.8):
                    spec = break_rule(ch, spec, ch.choice(applicable_rules(spec)))
            else:
                spec = build_any_spec(ch)
            if not any(e.rule == "rank_mismatch" for e in validate_all(spec)):
                return spec  # rank mismatches cannot be expressed to the driver (it would read past a list)
        raise RuntimeError("no spec the driver can be asked about in 100 draws")

    def labels(self, spec: TensorMapSpec) -> dict:
        return spec_labels(spec)

    def case_to_json(self, spec: TensorMapSpec) -> dict:
        return {"spec": spec.to_dict()}

    def case_from_json(self, d: dict, options: dict) -> TensorMapSpec | Im2colSpec:
        return TensorMapSpec.from_dict(d["spec"])

    def describe(self, spec: TensorMapSpec) -> str:
        return spec.describe()


ENCODE = EncodeTarget()
