"""Stores and reductions on the GPU, bit-exact against drvtma.stores' oracle over a poisoned buffer.

Every case gets its own tensor with random poison around it (guards and row padding included in the comparison),
so a stray write anywhere shows. DRVTMA_FUZZ_STORES sets how many random cases run (default 1000).
"""

import json
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from drvtma import load_module
from drvtma import settings as drvtma_settings
from drvtma.errors import StoreStraddleWarning, TensorMapError
from drvtma.runtime.figures import record_test as record
from drvtma.testing.children import run_child
from drvtma.tma import stores as S
from drvtma.tma.dtypes import tma_dtype
from drvtma.tma.stores import probe as P
from drvtma.tma.tiled.spec import TensorMapSpec

pytestmark = pytest.mark.gpu

FUZZ_CASES = drvtma_settings.FUZZ_STORES.get()
BATCH = 250
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def probe(ctx):
    return load_module("tma/store_probe.cu")


def assert_matches_oracle(result: P.StoreBatchResult) -> None:
    if result.failures:
        by_kind = {}
        for c in result.failures:
            key = f"{c.case.op}/{c.case.spec.dtype.name}"
            by_kind[key] = by_kind.get(key, 0) + 1
        pytest.fail(f"{len(result.failures)} of {len(result.cases)} cases differ from the oracle ({by_kind}):\n"
                    + result.report())


def _fuzz(name: str, total: int, **case_options) -> None:
    totals = {"cases": 0, "stores": 0, "reductions": 0, "elements_written": 0, "launches": 0}
    started = time.perf_counter()
    batches = max(1, -(-total // BATCH))

    @settings(max_examples=batches, phases=[Phase.generate], database=None, deadline=None)  # no shrinking: seeds
    @given(seed=st.integers(0, 2**63 - 1))
    def one_batch(seed):
        rng = np.random.default_rng(seed)
        size = max(1, min(BATCH, total - totals["cases"]))
        cases = [S.random_store_case(rng, **case_options) for _ in range(size)]
        result = P.run_store_cases(cases, rng)
        assert_matches_oracle(result)
        for key, value in result.counts.items():
            totals[key] += value
        totals["launches"] += 1

    one_batch()
    record(test=name, mismatches=0, seconds=round(time.perf_counter() - started, 3), **totals)
    assert totals["cases"] >= total, f"ran {totals['cases']} of {total} cases"


@pytest.mark.timing  # records the campaign's seconds
def test_random_stores_match_the_oracle(probe):
    _fuzz("stores_fuzz", FUZZ_CASES // 2, ops=[S.STORE])


@pytest.mark.timing  # records the campaign's seconds
def test_random_reductions_match_the_oracle(probe):
    _fuzz("reductions_fuzz", FUZZ_CASES - FUZZ_CASES // 2, ops=list(S.REDUCE_OPS))


def test_store_straddle_writes_the_rest_of_the_16_byte_chunk_and_no_more(probe):
    """fp16 rows of 13 elements (26 B) in 64-byte rows; rank 1 with 13 elements: the straddle lands past the end."""
    rows = S.StoreCase(TensorMapSpec.create("float16", (3, 13), (3, 32), strides_bytes=(64, 2)), (0, 0))
    flat = S.StoreCase(TensorMapSpec.create("float16", (13,), (32,)), (0,))
    with pytest.warns(StoreStraddleWarning):
        S.check_store_spec(rows.spec)
    result = P.run_store_cases([rows, flat])
    assert_matches_oracle(result)
    for c in result.cases:
        box_bytes = np.ascontiguousarray(c.box).view(np.uint8).reshape(-1, 64)
        for r in range(box_bytes.shape[0]):
            row = c.base_offset + r * 64
            assert result.got[row:row + 32].tobytes() == box_bytes[r, :32].tobytes()  # elements 0..15
            assert result.got[row + 32:row + 64].tobytes() == result.before[row + 32:row + 64].tobytes()
    record(test="store_straddle", mismatches=0, straddle_bytes_per_row=6)


def test_reduction_straddle_follows_the_store_rule(probe):
    """u32 add, rows of 5 elements (20 B) in 32-byte rows: the oracle assumes elements 5..7 are reduced too."""
    spec = TensorMapSpec.create("uint32", (4, 5), (4, 8), strides_bytes=(32, 4))
    old = np.arange(32, dtype=np.uint32) * 1000
    src = np.arange(32, dtype=np.uint32) + 1
    result = P.run_store_cases([S.StoreCase(spec, (0, 0), "add")], initial=[old.view(np.uint8)],
                               sources=[src.reshape(4, 8)])
    c = result.cases[0]
    got = result.got[c.base_offset:c.base_offset + 128].view(np.uint32).reshape(4, 8)
    full = old.reshape(4, 8) + src.reshape(4, 8)
    if np.array_equal(got, np.where(np.arange(8) < 5, full, old.reshape(4, 8))):
        pytest.fail("reductions stop exactly at the inner edge (no straddle): drvtma.stores must not apply "
                    "inner_write_limit to reductions")
    np.testing.assert_array_equal(got, full, err_msg="reduction straddle differs from the store rule")
    assert_matches_oracle(result)
    record(test="reduction_straddle", mismatches=0)


def test_element_strides_apply_to_stores_as_to_loads(probe):
    """Element stride 3 on rows, box 8: rows c, c+3, c+6 are written; the ones between keep their poison."""
    spec = TensorMapSpec.create("uint32", (32, 64), (8, 16), element_strides=(3, 1))
    result = P.run_store_cases([S.StoreCase(spec, (5, 16))])
    c = result.cases[0]
    got = result.got[c.base_offset:c.base_offset + 32 * 256].view(np.uint32).reshape(32, 64)
    before = result.before[c.base_offset:c.base_offset + 32 * 256].view(np.uint32).reshape(32, 64)
    changed_rows = sorted({int(r) for r in np.flatnonzero(np.any(got != before, axis=1))})
    assert changed_rows == [5, 8, 11], f"rows written: {changed_rows}"
    np.testing.assert_array_equal(got[[5, 8, 11], 16:32], c.box)
    assert_matches_oracle(result)


def test_swizzled_sources_are_read_on_the_absolute_shared_address(probe):
    cases = []
    for swizzle, span in (("32B", 32), ("64B", 64), ("128B", 128)):
        for offset in (0, 128, 256, 512, 896):
            spec = TensorMapSpec.create("float16", (40, span // 2 + 8), (16, span // 2), swizzle=swizzle)
            cases.append(S.StoreCase(spec, (8, 0), S.STORE, offset))
    assert_matches_oracle(P.run_store_cases(cases))


def _edge_case(dtype, op, old_bits, src_bits):
    n = len(old_bits)
    carrier = np.dtype(f"u{np.dtype(tma_dtype(dtype).numpy).itemsize}")
    unit = 16 // carrier.itemsize
    padded = -(-n // unit) * unit
    old = np.zeros(padded, carrier)
    src = np.zeros(padded, carrier)
    old[:n], src[:n] = old_bits, src_bits
    spec = TensorMapSpec.create(dtype, (padded,), (padded,))
    return S.StoreCase(spec, (0,), op), old.view(np.uint8), src.view(tma_dtype(dtype).numpy)


F16_EDGE = [0x0001, 0x8001, 0x03FF, 0x0400, 0x8400, 0x0000, 0x8000, 0x3C00, 0xBC00, 0x7BFF, 0x7E00, 0xFC00]
BF16_EDGE = [0x0001, 0x8001, 0x007F, 0x0080, 0x8080, 0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F7F, 0x7FC0, 0xFF80]
F32_EDGE = [0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x80800000, 0x00000000, 0x80000000, 0x3F800000,
            0xBF800000, 0x7F7FFFFF, 0x7FC00000, 0xFF800000]


@pytest.mark.parametrize("dtype, values", [("float16", F16_EDGE), ("bfloat16", BF16_EDGE), ("float32", F32_EDGE)])
def test_float_reduction_edge_values(probe, dtype, values):
    """Subnormals, signed zeros, NaN and infinities: every pair, for each float reduction the map type allows."""
    pairs = [(a, b) for a in values for b in values]
    old_bits, src_bits = [a for a, _ in pairs], [b for _, b in pairs]
    ops = [op for op in ("add", "min", "max") if tma_dtype(dtype) in S.REDUCE_DTYPES[op]]
    built = [_edge_case(dtype, op, old_bits, src_bits) for op in ops]
    cases, initial, sources = zip(*built)
    # NaN-producing adds (NaN + x, inf - inf) only need to be some NaN: the NaN bits there are not pinned.
    result = P.run_store_cases(cases, initial=initial, sources=sources)
    carrier = np.dtype(f"u{tma_dtype(dtype).itemsize}")
    problems = []
    for c, op in zip(result.cases, ops):
        n = len(pairs)
        got = result.got[c.base_offset:c.base_offset + n * carrier.itemsize].view(carrier)
        want = result.expected[c.base_offset:c.base_offset + n * carrier.itemsize].view(carrier)
        for i in np.flatnonzero(got != want):
            if op == "add" and _is_nan(dtype, want[i]) and _is_nan(dtype, got[i]):
                continue
            problems.append(f"{op}: old {pairs[i][0]:#x} src {pairs[i][1]:#x} want {int(want[i]):#x} "
                            f"got {int(got[i]):#x}")
    assert not problems, f"{len(problems)} {dtype} edge results differ:\n" + "\n".join(problems[:40])
    record(test=f"reduction_edges_{dtype}", pairs=len(pairs) * len(ops), mismatches=0)


def _is_nan(dtype, bits) -> bool:
    bits = int(bits)
    if dtype == "float32":
        return (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF != 0
    if dtype == "float16":
        return (bits & 0x7C00) == 0x7C00 and bits & 0x3FF != 0
    return (bits & 0x7F80) == 0x7F80 and bits & 0x7F != 0


def test_bulk_stores_land_exactly(probe):
    rng = np.random.default_rng()
    jobs, pos = [], int(rng.integers(0, 8)) * 16
    for _ in range(96):
        n = 16 * int(rng.integers(1, 2049))  # up to 32 KiB
        jobs.append((pos, n))
        pos += n + 16 * int(rng.integers(1, 5))  # poisoned gaps between destinations
    expected, got = P.run_bulk_stores(jobs, rng)
    bad = np.flatnonzero(expected != got)
    assert bad.size == 0, f"{bad.size} bytes differ, first at {bad[:8].tolist()}"
    record(test="bulk_stores", cases=len(jobs), bytes=int(sum(n for _, n in jobs)), mismatches=0)


CHILD = r"""
import json, sys
from drvtma.runtime import driver
from drvtma.tma import stores
from drvtma.tma.stores import probe as store_probe
from drvtma.errors import CudaError
from drvtma.tma.tiled.spec import TensorMapSpec
job = json.loads(sys.argv[1])
if job.get("force_allow"):  # let the oracle model a pair drvtma refuses, so the launch itself is what is probed
    from drvtma.tma.dtypes import tma_dtype
    stores.REDUCE_DTYPES[job["op"]] += (tma_dtype(job["dtype"]),)
case = stores.StoreCase(TensorMapSpec.create(job["dtype"], tuple(job["shape"]), tuple(job["box"])),
                        tuple(job["coords"]), job["op"])
out = {}
try:
    result = store_probe.run_store_cases([case], check=False)
    out["result"] = "ok" if not result.failures else "mismatch"
except CudaError as exc:
    out["result"], out["error"] = "fault", exc.name
    try:
        driver.DeviceBuffer(16).close()
        driver.synchronize()
        out["after"] = "usable"
    except CudaError as again:
        out["after"] = again.name
print("CHILD-RESULT " + json.dumps(out))
"""


def _run_child(coords, dtype="float32", op=S.STORE, shape=(16, 64), box=(8, 32), force_allow=False) -> dict:
    job = {"coords": list(coords), "dtype": dtype, "op": op, "shape": shape, "box": box, "force_allow": force_allow}
    proc = run_child(CHILD, json.dumps(job), timeout=240)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHILD-RESULT ")]
    assert lines, f"child exited {proc.returncode} without a result:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("CHILD-RESULT "))


def test_the_fault_child_runs_clean_with_valid_coordinates(probe):
    assert _run_child((3, 32)) == {"result": "ok"}


@pytest.mark.parametrize("coords", [(-1, 0), (0, -4), (-8, -32)], ids=["outer", "inner", "both"])
def test_negative_store_coordinate_faults_the_context_in_a_child(probe, coords):
    out = _run_child(coords)
    assert out["result"] == "fault", f"a negative store coordinate did not fault: {out}"
    assert out["error"] == "CUDA_ERROR_ILLEGAL_INSTRUCTION", out  # what drvtma.stores documents [seen]
    assert out["after"] != "usable", f"the fault was not sticky: {out}"
    record(test="store_negative_coordinate_fault", coords=list(coords), error=out["error"], after=out["after"])


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_bitwise_reductions_on_int64_maps_fault_and_are_refused(probe, op):
    """Pins what the H200 did: .and/.or/.xor through an INT64 map is an illegal instruction; UINT64 works."""
    with pytest.raises(TensorMapError, match="reduce_dtype"):
        S.check_reduction(op, "int64")
    assert _run_child((0, 0), "uint64", op, (4, 8), (4, 8)) == {"result": "ok"}
    out = _run_child((0, 0), "int64", op, (4, 8), (4, 8), force_allow=True)
    assert out["result"] == "fault" and out["error"] == "CUDA_ERROR_ILLEGAL_INSTRUCTION", out
    record(test="int64_bitwise_reduction_fault", op=op, error=out["error"])


def test_the_region_digests_kernel_is_the_hosts_and_a_workers_plan_passes(ctx):
    """The digests a stores campaign with oracle workers compares: the region_digests kernel over random regions
    (8 bytes to 64 KiB) is P.region_digests, and a batch planned as a worker plans it (digests, no buffer) passes
    with only the digests downloaded."""
    from drvtma.runtime.driver import DeviceBuffer

    rng = np.random.default_rng(21)
    cuts = np.unique(rng.integers(1, (1 << 20) // 8, 200)) * 8
    bounds = np.concatenate([[0], cuts, [1 << 20]]).astype(np.int64)
    regions = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    host = rng.integers(0, 256, 1 << 20, np.uint8)
    with DeviceBuffer.from_array(host) as buf, DeviceBuffer.from_array(bounds) as bounds_buf, \
            DeviceBuffer(8 * len(regions)) as digests:
        P._probe_module().kernel("region_digests").launch(buf, bounds_buf, digests, grid=len(regions),
                                                          block=P.PROBE_THREADS)
        assert (digests.download(np.uint64, (len(regions),)) == P.region_digests(host, regions)).all()
    cases = [S.random_store_case(rng) for _ in range(40)]
    plan = P.store_oracle(P.plan_store_cases(cases, np.random.default_rng(22)))
    plan.digests, plan.expected = P.region_digests(plan.expected, plan.regions), None
    result = P.run_store_plan(plan)
    assert not result.failures and result.expected is None, result.report()
