"""Clusters and TMA multicast on the H200: launch checks against the driver, cluster identity and distributed shared
memory, the ctaMask bit, every receiving CTA's image byte for byte over fuzzed masks and shapes (1..16 CTAs), and
the hazards, each in a child process, pinned with what the H200 did.

DRVTMA_FUZZ_MULTICAST sets how many multicasts the fuzz runs (default 3000).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from drvtma import settings
from drvtma.cluster import multicast as M
from drvtma.cluster import probe as P
from drvtma.errors import ClusterError, CudaError
from drvtma.fuzz.coverage import Coverage
from drvtma.fuzz.coverage.multicast import MODEL as MULTICAST_COVERAGE
from drvtma.runtime import cluster_launch
from drvtma.runtime.figures import record_figure
from drvtma.runtime.figures import record_test as record
from drvtma.testing.children import run_child
from drvtma.testing.multicast import fuzz_batches, min_batches
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.spec import TensorMapSpec

pytestmark = pytest.mark.gpu

FUZZ_CASES = settings.FUZZ_MULTICAST.get()
COVERAGE_BUDGET = 12000  # gpu-check's: from here on every coverage class must be hit
SEED = settings.FUZZ_SEED.get()
POOL_BYTES = 16 << 20
ROOT = Path(__file__).resolve().parents[1]
# Every size 1, 2, 4, 8 and 16 over x, y and z (16 needs the non-portable attribute).
SHAPES = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (4, 1, 1), (2, 2, 1), (1, 1, 4), (8, 1, 1), (4, 2, 1), (2, 2, 2),
          (1, 8, 1), (16, 1, 1), (4, 4, 1), (2, 4, 2), (8, 2, 1)]



@pytest.fixture(scope="module")
def probe(ctx):
    with P.MulticastProbe() as p:
        yield p


# ---------------------------------------------------------------------------------------------- launch checks

def test_occupancy_decides_which_cluster_shapes_drvtma_launches(ctx):
    """cuOccupancyMaxActiveClusters for sizes 1..16 x dynamic smem: drvtma refuses exactly the shapes it says 0
    for (rule cluster_schedulable), and every shape it accepts launches (the identities themselves are checked by
    the identity tests below)."""
    from drvtma.runtime.kernel import Module

    module = Module.load(P.IDENTITY_SOURCE)
    kernel = module.kernel("cluster_identity")
    cluster_launch.allow_non_portable(kernel)
    static = kernel.static_shared_bytes
    limit = ctx.properties.smem_per_block_optin - static
    table, wrong = {}, []
    for size in (1, 2, 3, 4, 8, 12, 16):
        for smem in (0, 100 << 10, limit):
            try:
                n = cluster_launch.occupancy(kernel, (size, 1, 1), block=P.THREADS, shared_mem=smem)
                table[f"{size}x{smem >> 10}KiB"] = n
            except CudaError as exc:  # the driver's verdict on the shape itself
                n, table[f"{size}x{smem >> 10}KiB"] = 0, exc.name
            try:
                ids, received, _ = _identity(kernel, (size, 1, 1), 2, shared_mem=smem)
                launched = True
            except ClusterError as exc:
                launched = False
                if exc.rule != "cluster_schedulable":
                    wrong.append(f"size {size} smem {smem}: refused with {exc.rule}")
            if launched != (n > 0):
                wrong.append(f"size {size} smem {smem}: occupancy {n} but launched={launched}")
    record("cluster_occupancy", max_active_clusters=table, static_smem=static)
    assert not wrong, "\n".join(wrong)
    assert table["16x0KiB"] > 0 and table["1x0KiB"] >= ctx.properties.sm_count
    module.close()


def _identity(kernel, cluster, clusters, shared_mem=0):
    from drvtma.runtime.driver import DeviceBuffer
    from drvtma.runtime.status import StatusBuffer

    total = P.cluster_size(cluster) * clusters
    with DeviceBuffer(total * 32) as ids, DeviceBuffer(total * 1024) as rec, DeviceBuffer(total * 1024) as lod, \
            StatusBuffer() as status:
        kernel.launch(ids, rec, lod, status, grid=(cluster[0] * clusters, cluster[1], cluster[2]), block=P.THREADS,
                      shared_mem=shared_mem, cluster=cluster)
        status.check(kernel.name)
        n = P.cluster_size(cluster)
        return ids.download(np.uint32, (clusters, n, 8)), rec.download(np.uint32, (clusters, n, 256)), None


def test_portable_limit_grid_and_cluster_dims_are_checked_before_the_driver(ctx):
    from drvtma.runtime.driver import DeviceBuffer
    from drvtma.runtime.kernel import Module

    module = Module.load(P.IDENTITY_SOURCE)  # a fresh handle: non-portable sizes not allowed on it
    kernel = module.kernel("cluster_identity")
    with pytest.raises(ClusterError) as info:
        _identity(kernel, (16, 1, 1), 1)
    assert info.value.rule == "cluster_size_portable"
    with pytest.raises(ClusterError) as info:
        kernel.launch(0, 0, 0, 0, grid=6, block=32, cluster=4)
    assert info.value.rule == "cluster_grid_multiple"
    fixed = module.kernel("cluster_dims_2")
    assert cluster_launch.required_cluster_dims(fixed) == (2, 1, 1)
    assert cluster_launch.required_cluster_dims(kernel) is None
    with DeviceBuffer(8 * 4) as ranks:
        for cluster in (None, 2):
            ranks.fill_u32(0xDEADBEEF)
            fixed.launch(ranks, grid=8, block=32, cluster=cluster)
            got = ranks.download(np.uint32, (8,))
            assert got.tolist() == [r | (2 << 8) for r in (0, 1) * 4], (cluster, got)
        with pytest.raises(ClusterError) as info:
            fixed.launch(ranks, grid=8, block=32, cluster=4)
        assert info.value.rule == "cluster_required_dims"
        with pytest.raises(ClusterError) as info:
            fixed.launch(ranks, grid=3, block=32)
        assert info.value.rule == "cluster_grid_multiple"
    module.close()


DRIVER_CHILD = r"""
import json
from drvtma.runtime import driver
from drvtma.runtime.driver import DeviceBuffer, cu
from drvtma.runtime.kernel import Module
module = Module.load("cluster/cluster_identity.cu")
kernel, fixed = module.kernel("cluster_identity"), module.kernel("cluster_dims_2")
buf = DeviceBuffer(1 << 20)
out = {}
def raw(name, k, args, grid, cluster):
    # Straight to cuLaunchKernelEx, past drvtma's checks: what does the driver itself say?
    lc = cu.CUlaunchConfig()
    lc.gridDimX, lc.gridDimY, lc.gridDimZ = grid
    lc.blockDimX, lc.blockDimY, lc.blockDimZ = 32, 1, 1
    lc.sharedMemBytes, lc.hStream = 0, 0
    attrs = []
    if cluster is not None:
        a = cu.CUlaunchAttribute()
        a.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = cluster
        attrs.append(a)
    lc.attrs, lc.numAttrs = attrs, len(attrs)
    code = cu.cuLaunchKernelEx(lc, k.function, k.packer.pack(args), 0)[0]
    sync = cu.cuCtxSynchronize()[0]
    out[name] = {"launch": code.name, "sync": sync.name}
args = (buf, buf, buf, 0)
raw("size16_without_attribute", kernel, args, (16, 1, 1), (16, 1, 1))
raw("size3", kernel, args, (6, 1, 1), (3, 1, 1))
raw("grid_not_multiple", kernel, args, (6, 1, 1), (4, 1, 1))
raw("cluster_dims_mismatch", fixed, (buf,), (8, 1, 1), (4, 1, 1))
raw("size32", kernel, args, (32, 1, 1), (32, 1, 1))
print("CHILD-RESULT " + json.dumps(out))
"""


def _child(script: str, *argv, timeout=40) -> dict:
    try:
        proc = run_child(script, *argv, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"result": f"hang (killed after {timeout} s)"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHILD-RESULT ")]
    assert lines, f"child exited {proc.returncode} without a result:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("CHILD-RESULT "))


def test_what_the_driver_says_to_the_shapes_drvtma_refuses(ctx):
    out = _child(DRIVER_CHILD)
    record("cluster_driver_errors", **out)
    # Seen on the H200 (driver 580): every shape drvtma refuses is CUDA_ERROR_INVALID_CLUSTER_SIZE at the launch,
    # not sticky (the context synchronises clean afterwards); a 3-CTA cluster is legal.
    for name in ("size16_without_attribute", "grid_not_multiple", "cluster_dims_mismatch", "size32"):
        assert out[name] == {"launch": "CUDA_ERROR_INVALID_CLUSTER_SIZE", "sync": "CUDA_SUCCESS"}, (name, out)
    assert out["size3"] == {"launch": "CUDA_SUCCESS", "sync": "CUDA_SUCCESS"}, out


# ---------------------------------------------------------------------------------------------- identity, DSMEM

@pytest.mark.parametrize("cluster", SHAPES, ids=lambda c: "x".join(map(str, c)))
def test_rank_distributed_stores_loads_and_remote_arrives(ctx, cluster):
    clusters = 3
    ids, received, loaded = P.run_identity(cluster, clusters, non_portable=P.cluster_size(cluster) > 8)
    n = P.cluster_size(cluster)
    for k in range(clusters):
        for r in range(n):
            assert ids[k, r, 6] == r and ids[k, r, 7] == n and M.cta_rank(ids[k, r, 3:6], cluster) == r, ids[k, r]
            np.testing.assert_array_equal(received[k, r], P.identity_words(k, (r - 1) % n))
            np.testing.assert_array_equal(loaded[k, r], P.identity_words(k, (r - 2) % n))
    if cluster == SHAPES[-1]:
        record("cluster_identity", shapes=[list(c) for c in SHAPES], rank="x + nx * (y + ny * z)", mismatches=0)


# ---------------------------------------------------------------------------------------------- multicast

def test_ctamask_bit_r_is_the_cta_of_cluster_rank_r(probe, pool):
    """4x2 cluster: op j (issued by rank (j + 3) % 8) carries mask 1 << j and its own coordinates."""
    buf, host = pool
    spec = TensorMapSpec.create("uint32", (64, 64), (8, 32), base_address=buf.ptr)
    ops = [M.Multicast((j + 3) % 8, 1 << j, 0, (8 * j, 0 if j % 2 else 32)) for j in range(8)]
    batch = P.Batch((4, 2, 1), [ops, ops[::-1]], 1, M.slot_bytes_for(spec, 0), spec=spec)
    result = probe.run(batch, tmap=encode_tiled(spec))
    check = P.check_batch(batch, result, host)
    assert check.mismatches == 0, "\n\n".join(check.reports)
    record("multicast_mask_bit_is_rank", cluster=[4, 2, 1], ops=len(ops), mismatches=0)


@pytest.mark.timing  # records the campaign's seconds
def test_multicast_fuzz_every_receiving_cta_byte_for_byte(probe, pool):
    rng = np.random.default_rng(SEED + 13)
    totals = Counter()
    sizes, failures, started = set(), [], time.perf_counter()
    cov = Coverage("multicast_fuzz", MULTICAST_COVERAGE.universe())
    i = 0
    for batch, run_args, global_bytes in fuzz_batches(rng, *pool):
        if totals["cases"] >= FUZZ_CASES and i >= min_batches():
            break
        if batch.flags & P.HAZARD_FLAGS["late_expect"]:  # the bytes land before the receivers arm (tx < 0)
            totals["late_expect_batches"] += 1
        cov.add(MULTICAST_COVERAGE.classes(batch))
        result = probe.run(batch, **run_args)
        check = P.check_batch(batch, result, global_bytes)
        totals["cases"] += check.ops
        totals["ctas_checked"] += check.receiving_checked
        totals["images_checked"] += check.images_checked
        totals["bulk_cases" if batch.spec is None else "tiled_cases"] += check.ops
        totals["launches"] += 1
        if batch.spec is not None:
            totals[f"swizzle{batch.spec.swizzle_span_bytes}"] += 1
        sizes.add(batch.ctas)
        if check.mismatches:
            failures.append(f"{check.mismatches} clusters of batch {i} differ:\n" + "\n\n".join(check.reports))
        i += 1
    totals["mismatches"] = sum(int(f.split()[0]) for f in failures)
    record("multicast_fuzz", cluster_sizes=sorted(sizes), seconds=round(time.perf_counter() - started, 2),
           **dict(totals))
    record_figure(cov.figure())
    assert not failures, "\n\n".join(failures[:3])
    assert totals["cases"] >= FUZZ_CASES and sorted(sizes) == list(range(1, M.MASK_BITS + 1))
    if FUZZ_CASES >= COVERAGE_BUDGET:  # smaller runs record the coverage figure without asserting it
        assert not cov.unhit(), f"the multicast fuzz never reached these classes:\n{cov.summary()}"


def test_receivers_may_arm_after_the_bytes_landed(probe, pool):
    """The issuer multicasts first and every CTA arms its barrier 20 us later: tx-count goes negative, then the
    armed phase completes with exactly the box's bytes (DeepGEMM relies on this)."""
    buf, host = pool
    spec = TensorMapSpec.create("float32", (128, 256), (32, 32), swizzle="128B", base_address=buf.ptr)
    ops = [M.Multicast(0, 0b1110, 0, (16, 64)), M.Multicast(3, 0b0001, 0, (-8, 0))]
    batch = P.Batch((4, 1, 1), [ops] * 4, 1, M.slot_bytes_for(spec, 0), spec=spec,
                    flags=P.HAZARD_FLAGS["late_expect"])
    check = P.check_batch(batch, probe.run(batch, tmap=encode_tiled(spec)), host)
    assert check.mismatches == 0, "\n\n".join(check.reports)
    record("multicast_late_expect", clusters=4, mismatches=0)


# ---------------------------------------------------------------------------------------------- hazards

HAZARD_CHILD = r"""
import json, sys
from dataclasses import replace
import numpy as np
from drvtma.runtime import driver
from drvtma.runtime.driver import DeviceBuffer
from drvtma.cluster import multicast as M, probe as P
from drvtma.errors import CudaError
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.spec import TensorMapSpec
job = json.loads(sys.argv[1])
out = {}
host = np.random.default_rng(5).integers(0, 256, 1 << 20, dtype=np.uint8)
try:
    probe = P.MulticastProbe(defines={"DRVTMA_WAIT_TIMEOUT_NS": "20000000ull"})  # 20 ms bounded waits
    buf = DeviceBuffer.from_array(host)
    spec = TensorMapSpec.create("uint32", (256, 256), (16, 64), base_address=buf.ptr)
    tmap = encode_tiled(spec)
    poison = 0x5A5A5A5A
    if job["kind"] == "batch":
        ops = [M.Multicast(i, m, s, tuple(c)) for i, m, s, c in job["ops"]]
        cluster = tuple(job["cluster"])
        batch = P.Batch(cluster, [ops] * job.get("clusters", 4), job.get("slots", 1), M.slot_bytes_for(spec, 0),
                        spec=spec, poison=poison, flags=sum(P.HAZARD_FLAGS[f] for f in job.get("flags", [])))
        bad = timeouts = 0
        ranks = set()
        landed = set()
        for _ in range(job.get("repeat", 1)):
            res = probe.run(batch, tmap=tmap, check_rules=False, raise_timeout=False)
            if res.timeout is not None:
                timeouts += 1
                ranks |= {(w.cta_rank, w.cluster_ctas) for w in res.timeout.waits}
                out["timeout_message"] = str(res.timeout)[:300]
            real = [replace(o, mask=o.mask & ((1 << batch.ctas) - 1)) for o in ops]  # bits that name a CTA
            want = M.expected_images([o for o in real if o.mask], batch.ctas, batch.slots, batch.slot_bytes,
                                     spec=spec, global_bytes=host, poison=poison)
            poisoned = np.full(batch.slot_bytes // 4, poison, np.uint32).view(np.uint8)
            for k in range(len(batch.op_lists)):
                for r in range(batch.ctas):
                    for s in range(batch.slots):
                        if not np.array_equal(res.images[k, r, s], poisoned):
                            landed.add(r)
                if not np.array_equal(res.images[k], want) or (res.state[k] != 3).any():
                    bad += 1
            out["state"] = res.state[0].tolist()
        out.update(result="timeout" if timeouts else ("mismatch" if bad else "ok"), timeouts=timeouts,
                   mismatched_clusters=bad, timeout_ranks=sorted(ranks), ranks_written=sorted(landed),
                   launches=job.get("repeat", 1))
    elif job["kind"] == "reuse":
        rounds, cluster, clusters = 16, job["cluster"], 8
        coords = [(16 * (i % 16), 64 * (i % 4)) for i in range(rounds)]
        got, timeout = probe.run_reuse(tmap, coords, cluster=cluster, clusters=clusters, tile_bytes=spec.smem_bytes,
                                       consume_ns=job["consume_ns"], safe=job["safe"], raise_timeout=False)
        want = oracle.load_images(spec, host, coords)
        bad = (got != want[None, None]).any(axis=-1)  # (clusters, ranks, rounds)
        out.update(result="corrupted" if bad.any() else "ok", corrupted_rounds=int(bad.sum()),
                   rounds=int(bad.size), corrupted_on_rank0=int(bad[:, 0].sum()),
                   timeouts=0 if timeout is None else timeout.count)
        if timeout is not None:
            out["timeout_message"] = str(timeout)[:300]
    driver.synchronize()
except CudaError as exc:  # the driver's code and words (its enum name would read as a failed step in reports)
    out["result"], out["error"], out["error_code"] = "fault", exc.description, exc.code
    try:
        DeviceBuffer(16).close()
        driver.synchronize()
        out["after"] = "usable"
    except CudaError as again:
        out["after"], out["after_code"] = again.description, again.code
print("CHILD-RESULT " + json.dumps(out))
"""

HAZARDS = {
    # name: job. Coordinates are (row, col) of the 256 x 256 uint32 tensor; slot 0 unless said.
    "mask_bit_above_cluster_size": {"kind": "batch", "cluster": [2, 1, 1], "ops": [[0, 0b111, 0, [0, 0]]]},
    "empty_mask": {"kind": "batch", "cluster": [2, 1, 1], "ops": [[0, 0, 0, [0, 0]]]},
    "receiver_never_expects": {"kind": "batch", "cluster": [2, 1, 1], "ops": [[0, 0b11, 0, [16, 64]]],
                               "flags": ["no_expect"]},
    "init_without_cluster_fence": {"kind": "batch", "cluster": [4, 1, 1], "repeat": 50, "clusters": 32,
                                   "ops": [[1, 0b1111, 0, [32, 0]]], "flags": ["no_init_fence"]},
    "init_without_fence_or_cluster_barrier": {"kind": "batch", "cluster": [4, 1, 1], "repeat": 20, "clusters": 32,
                                              "ops": [[1, 0b1111, 0, [32, 0]]], "flags": ["no_init_sync"]},
    "receiver_exits_while_multicast_pending": {"kind": "batch", "cluster": [2, 1, 1], "clusters": 16,
                                               "ops": [[0, 0b11, 0, [48, 128]]], "flags": ["exit_early"]},
    "smem_reused_before_peers_landed": {"kind": "reuse", "cluster": 2, "safe": False, "consume_ns": 20000},
    "smem_reuse_control_with_remote_release": {"kind": "reuse", "cluster": 2, "safe": True, "consume_ns": 20000},
}


# Outcomes that depend on timing: 20 ms bounded waits that must not expire, or a race between a slow peer and a
# reuse. Another process's kernels time-slicing the GPU could change them, so gpu-check runs these alone.
TIMED_HAZARDS = {"init_without_cluster_fence", "init_without_fence_or_cluster_barrier",
                 "smem_reused_before_peers_landed", "smem_reuse_control_with_remote_release"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.timing) if n in TIMED_HAZARDS else n
                                  for n in HAZARDS])
def test_hazard_in_a_child_process(ctx, name):
    out = _child(HAZARD_CHILD, json.dumps(HAZARDS[name]))
    record("multicast_hazard", hazard=name, **{k: v for k, v in out.items() if k != "state"})
    assert "hang" not in out["result"], out
    assert SEEN[name](out), f"{name}: the H200 did something else before ({SEEN_TEXT[name]}): {out}"


# What the H200 did (driver 580, 2026-12-01), one line each; docs/results/multicast.md has the readings.
SEEN_TEXT = {
    "mask_bit_above_cluster_size": "sticky CUDA_ERROR_LAUNCH_FAILED: the context is lost",
    "empty_mask": "nothing lands anywhere, barriers armed for 0 bytes complete, no fault",
    "receiver_never_expects": "BarrierTimeout in every receiving CTA, naming ranks 0 and 1 of 2",
    "init_without_cluster_fence": "no failure in 50 launches x 32 clusters (absence proves nothing)",
    "init_without_fence_or_cluster_barrier": "no failure in 20 launches x 32 clusters (absence proves nothing)",
    "receiver_exits_while_multicast_pending": "sticky CUDA_ERROR_LAUNCH_FAILED: the context is lost",
    "smem_reused_before_peers_landed": "128 of 256 rounds corrupted on the slow peer (gpu-check at 16cc5a6)",
    "smem_reuse_control_with_remote_release": "every CTA copies every round exactly",
}


def _sticky_launch_failure(out) -> bool:
    from cuda.bindings import driver as cu

    return (out["result"] == "fault" and out["error_code"] == int(cu.CUresult.CUDA_ERROR_LAUNCH_FAILED)
            and out["after"] != "usable")


SEEN = {
    "mask_bit_above_cluster_size": _sticky_launch_failure,
    "empty_mask": lambda out: out["result"] == "ok" and out["ranks_written"] == [],
    # Bytes nobody armed for leave the tx-count negative: the phase never completes; the wait is bounded.
    "receiver_never_expects": lambda out: out["result"] == "timeout" and [0, 2] in out["timeout_ranks"]
    and [1, 2] in out["timeout_ranks"],
    "init_without_cluster_fence": lambda out: out["result"] == "ok",
    "init_without_fence_or_cluster_barrier": lambda out: out["result"] == "ok",
    "receiver_exits_while_multicast_pending": _sticky_launch_failure,
    "smem_reused_before_peers_landed": lambda out: out["result"] == "corrupted" and out["corrupted_rounds"] > 0,
    "smem_reuse_control_with_remote_release": lambda out: out["result"] == "ok" and out["timeouts"] == 0,
}
