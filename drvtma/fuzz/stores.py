"""The `stores` and `reductions` fuzz targets: tensor stores and reductions on the GPU against drvtma.tma.stores.

A case is a `StoreCase` (random, or the user's map at random coordinates) and a data seed: the tensor's initial
contents and the box come from that seed, so a case replays alone exactly as it ran in its batch. Every case of a
batch runs in one launch (`run_store_cases`), each in its own poisoned region, guards compared too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import cast

import numpy as np

from ..runtime.driver import ScratchBuffers
from ..tma.stores import CHUNK_BYTES, REDUCE_DTYPES, REDUCE_OPS, STORE, StoreCase, random_store_case, random_values
from ..tma.stores.probe import (
    GUARD_BYTES,
    StorePlan,
    plan_store_cases,
    region_digests,
    run_store_cases,
    run_store_plan,
    store_oracle,
)
from ..tma.tiled.rules import round_up
from ..tma.tiled.spec import TensorMapSpec
from .choosers import ChooserGenerator
from .coverage.stores import StoresCoverage
from .targets import Outcome, Session, Target, spec_labels

DIFF_LIMIT = 16
REGION_HEX_LIMIT = 64 << 10


@dataclass
class StoreFuzzCase:
    case: StoreCase
    data_seed: int

    def data(self):
        """(initial tensor bytes, box) from the data seed, as `run_store_cases` would draw them."""
        spec, op = self.case.spec, self.case.op
        rng = np.random.default_rng(self.data_seed)
        nelem = round_up(spec.extent_bytes, CHUNK_BYTES) // spec.itemsize
        initial = random_values(spec.dtype, op, nelem, rng).view(np.uint8)
        box = random_values(spec.dtype, op, math.prod(spec.loaded_counts), rng).reshape(spec.loaded_counts)
        return initial, box


def _batch_data(cases, data) -> tuple:
    """run_store_cases' rng (the poison's: from the first case's data seed), initial tensors and boxes."""
    return np.random.default_rng(cases[0].data_seed), [d[0] for d in data], [d[1] for d in data]


class StoresSession(Session):
    """Every case of a batch in one launch (`run_store_cases`), in device buffers kept from batch to batch."""

    def __init__(self, options: dict, fake: bool = False):
        super().__init__(options, fake)
        # a batch's four buffers allocated and freed each time: eight driver calls, the frees waiting for the device
        self.scratch = self.own(ScratchBuffers(minimum=1 << 16))
        from ..runtime.host import PinnedScratch  # (at construction: a CPU test stands a fake in for it)

        self.pinned = self.own(PinnedScratch())  # the batch's buffer, downloaded at the bus's speed

    def check(self, cases, plan: StorePlan | None = None) -> list[Outcome]:
        """The batch in one launch; `plan`: its data, layout and oracle answer, made already (by oracle workers)."""
        t0 = time.perf_counter()
        if plan is None:
            data = [c.data() for c in cases]
            t1 = time.perf_counter()
            rng, initial, sources = _batch_data(cases, data)
            result = run_store_cases([c.case for c in cases], rng, initial=initial, sources=sources,
                                     scratch=self.scratch, timing=self.timing,
                                     into=self.pinned)  # its parts: prepare, encode, ...
            self.timing["data"] += t1 - t0
        else:
            result = run_store_plan(plan, scratch=self.scratch, timing=self.timing, into=self.pinned)
        t2 = time.perf_counter()
        outcomes = []
        for c in result.cases:
            if c.ok:
                outcomes.append(Outcome(True))
                continue
            if c.digest_disagreement:
                outcomes.append(Outcome(False, detail=f"{c.digest_disagreement}; {c.case.describe()}"))
                continue
            assert result.expected is not None and result.got is not None  # compared byte for byte: it failed
            lo = c.base_offset - GUARD_BYTES
            hi = c.base_offset + round_up(c.case.spec.extent_bytes, CHUNK_BYTES) + GUARD_BYTES
            small = hi - lo <= REGION_HEX_LIMIT
            diffs = [{"offset": int(o) - c.base_offset, "expected": f"0x{int(result.expected[o]):02x}",
                      "got": f"0x{int(result.got[o]):02x}",
                      "where": "guard before the tensor" if o < c.base_offset else
                      ("guard after the tensor" if o >= hi - GUARD_BYTES else "tensor")}
                     for o in c.mismatched_bytes[:DIFF_LIMIT]]
            outcomes.append(Outcome(
                False, result.expected[lo:hi].tobytes().hex() if small else None,
                result.got[lo:hi].tobytes().hex() if small else None, diffs,
                f"{c.mismatched_bytes.size} byte(s) differ (offsets from the tensor base; the hex covers "
                f"{GUARD_BYTES} guard bytes on each side) for {c.case.describe()}"))
        self.timing["compare"] += time.perf_counter() - t2  # the outcomes, after the batch's own compare
        return outcomes


class StoresTarget(Target):
    unit = "cases"
    cases_per_batch = 250
    version = 2  # 2: random_store_case draws the inner element stride and the L2 promotion
    fake_device = False  # no oracle-only session: `drvtma fuzz stores --fake-device` is refused up front
    session_class: type[Session] = StoresSession  # the kernel-* targets put their own Session here
    oracle_workers = True  # (the kernel-* targets answer with their own data: drvtma.fuzz.user)

    def __init__(self, name: str, ops: list[str], description: str):
        self.name, self.ops, self.description = name, ops, description
        self.coverage = StoresCoverage(ops)  # the kernel-stores / kernel-reductions targets inherit it

    def configure(self, spec=None) -> dict:
        if spec is not None:
            from ..tma.stores import check_store_spec

            check_store_spec(spec)
            if not any(spec.dtype in REDUCE_DTYPES.get(op, ()) or op == STORE for op in self.ops):
                raise ValueError(f"no operation of the {self.name} target takes {spec.dtype.name}")
        return {"spec": spec.to_dict() if spec is not None else None, "ops": list(self.ops)}

    def build(self, ch, options: dict) -> StoreFuzzCase:
        user = options.get("spec")
        if user:
            spec = TensorMapSpec.from_dict({k: v for k, v in user.items() if k != "base_address"})
            legal = [op for op in options["ops"] if op == STORE or spec.dtype in REDUCE_DTYPES[op]]
            unit = CHUNK_BYTES // spec.itemsize
            coords = tuple(ch.integer(0, n + 1) for n in spec.shape[:-1]) + (
                unit * ch.integer(0, -(-spec.shape[-1] // unit)),)
            case = StoreCase(spec, coords, ch.choice(legal), 128 * ch.choice([0, 0, 1, 2, 4, 7]))
        else:
            # ChooserGenerator answers the few Generator calls random_store_case makes (it is annotated Generator)
            case = random_store_case(cast(np.random.Generator, ChooserGenerator(ch)), ops=options["ops"])
        return StoreFuzzCase(case, ch.integer(0, (1 << 32) - 1))

    def expected_batch(self, cases: list, pool, base: int) -> tuple[list, object]:
        """On an oracle worker: the batch's plan (data, layout, shared-memory images, jobs) as the session would
        make it, and the oracle's answer as each region's digest (the buffer itself is made again in the campaign
        only where the GPU's digest of a region differs)."""
        rng, initial, sources = _batch_data(cases, [c.data() for c in cases])
        plan = store_oracle(plan_store_cases([c.case for c in cases], rng, initial=initial, sources=sources))
        assert plan.expected is not None  # store_oracle's
        arrays = [plan.memory, plan.images, plan.jobs, region_digests(plan.expected, plan.regions), *plan.boxes]
        return arrays, (plan.regions, plan.bases, plan.max_image, plan.written)

    def answer(self, cases: list, arrays: list, rest) -> StorePlan:
        regions, bases, max_image, written = rest
        memory, images, jobs, digests, *boxes = arrays
        return StorePlan([c.case for c in cases], regions, bases, boxes, memory, images, jobs, max_image,
                         written=written, digests=digests)

    def labels(self, c: StoreFuzzCase) -> dict:
        labels = spec_labels(c.case.spec)
        del labels["fill"]  # stores never fill
        return {**labels, "op": c.case.op}

    def case_to_json(self, c: StoreFuzzCase) -> dict:
        return {"spec": c.case.spec.to_dict(), "coordinates": list(c.case.coords), "op": c.case.op,
                "smem_offset": c.case.smem_offset, "data_seed": c.data_seed}

    def case_from_json(self, d: dict, options: dict) -> StoreFuzzCase:
        spec = TensorMapSpec.from_dict({k: v for k, v in d["spec"].items() if k != "base_address"})
        return StoreFuzzCase(StoreCase(spec, tuple(int(v) for v in d["coordinates"]), d["op"],
                                       int(d["smem_offset"])), int(d["data_seed"]))

    def describe(self, c: StoreFuzzCase) -> str:
        return f"{c.case.describe()}\ndata seed {c.data_seed}"


STORES = StoresTarget("stores", [STORE], "tensor stores (any rank, swizzle, element strides, clipping) vs the "
                      "stores oracle, guards compared")
REDUCTIONS = StoresTarget("reductions", list(REDUCE_OPS), "tensor reductions (add, min, max, inc, dec, and, or, "
                          "xor) vs the stores oracle, guards compared")
