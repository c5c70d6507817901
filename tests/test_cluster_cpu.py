"""Clusters and multicast without a GPU: launch rules, multicast rules, the multicast oracle, kernels compiling to
the instructions they claim, the probe's struct layout, the bench's checksum model and the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drvtma.cluster import multicast as M
from drvtma.cluster import probe as P
from drvtma.cluster.bench import ROW_WORDS, expected_checksums
from drvtma.errors import BarrierTimeout, ClusterError, LaunchError, TimedOutWait
from drvtma.runtime import compiler, sass
from drvtma.runtime.cluster_launch import check_cluster_shape
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.spec import TensorMapSpec

from support.struct_layout import compile_layout_check

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------- launch rules

@pytest.mark.parametrize("grid, cluster, options, rule", [
    ((6, 1, 1), (4, 1, 1), {}, "cluster_grid_multiple"),
    ((8, 3, 1), (2, 2, 1), {}, "cluster_grid_multiple"),
    ((16, 1, 1), (16, 1, 1), {}, "cluster_size_portable"),
    ((32, 4, 1), (4, 4, 1), {}, "cluster_size_portable"),
    ((32, 1, 1), (32, 1, 1), {"non_portable": True}, "cluster_size_limit"),
    ((8, 1, 1), (4, 1, 1), {"required": (2, 1, 1)}, "cluster_required_dims"),
    ((3, 1, 1), None, {"required": (2, 1, 1)}, "cluster_grid_multiple"),
    ((4, 1, 1), (0, 1, 1), {}, "cluster_dims"),
])
def test_cluster_shapes_are_refused_with_the_rule(grid, cluster, options, rule):
    with pytest.raises(ClusterError) as info:
        check_cluster_shape(grid, cluster, **options)
    assert info.value.rule == rule
    assert isinstance(info.value, LaunchError) and "fix:" in str(info.value)


def test_cluster_shapes_that_are_accepted():
    assert check_cluster_shape((8, 1, 1), None) is None
    assert check_cluster_shape((8, 2, 1), (8, 1, 1)) == (8, 1, 1)  # 8: the portable limit
    assert check_cluster_shape((6, 1, 1), (3, 1, 1)) == (3, 1, 1)  # not a power of two: the driver decides
    assert check_cluster_shape((32, 1, 1), (16, 1, 1), non_portable=True) == (16, 1, 1)
    assert check_cluster_shape((16, 4, 1), (4, 4, 1), non_portable=True) == (4, 4, 1)
    assert check_cluster_shape((8, 1, 1), None, required=(2, 1, 1)) == (2, 1, 1)  # __cluster_dims__ applies
    assert check_cluster_shape((8, 1, 1), (2, 1, 1), required=(2, 1, 1)) == (2, 1, 1)


def test_grid_fix_names_a_multiple():
    with pytest.raises(ClusterError, match=r"use grid \(8, 1, 1\)"):
        check_cluster_shape((6, 1, 1), (4, 1, 1))


# ---------------------------------------------------------------------------------------------- multicast rules

@pytest.mark.parametrize("op, ctas, slots, rule", [
    (M.Multicast(0, 0, 0, (0,)), 2, 1, "multicast_mask_empty"),
    (M.Multicast(0, 0b100, 0, (0,)), 2, 1, "multicast_mask_range"),
    (M.Multicast(0, 1 << 16, 0, (0,)), 16, 1, "multicast_mask_range"),
    (M.Multicast(2, 0b1, 0, (0,)), 2, 1, "multicast_issuer"),
    (M.Multicast(0, 0b1, 1, (0,)), 2, 1, "multicast_slot"),
    (M.Multicast(0, 0b1, 0), 2, 1, "multicast_kind"),
    (M.Multicast(0, 0b1, 0, bulk=(8, 32)), 2, 1, "bulk_alignment"),
    (M.Multicast(0, 0b1, 0, (0,)), 17, 1, "multicast_cluster_size"),
])
def test_multicasts_are_refused_with_the_rule(op, ctas, slots, rule):
    with pytest.raises(ClusterError) as info:
        M.check_multicast(op, ctas, slots)
    assert info.value.rule == rule


def test_two_ops_into_one_slot_of_one_cta_are_refused():
    ops = [M.Multicast(0, 0b011, 0, (0,)), M.Multicast(1, 0b110, 0, (16,))]
    with pytest.raises(ClusterError, match="slot 0 of rank 1") as info:
        M.check_cluster_ops(ops, 3)
    assert info.value.rule == "multicast_overlap"
    M.check_cluster_ops([ops[0], M.Multicast(1, 0b100, 0, (16,))], 3)  # disjoint masks share a slot
    M.check_cluster_ops([ops[0], M.Multicast(1, 0b110, 1, (16,))], 3, slots=2)  # or use another slot


def test_rank_is_x_fastest():
    assert [M.cta_rank((x, y, z), (2, 2, 2)) for z in range(2) for y in range(2) for x in range(2)] == list(range(8))
    assert M.cta_rank((3, 1, 0), (4, 2, 1)) == 7 and M.cta_rank((0, 1, 0), (4, 2, 1)) == 4


# ---------------------------------------------------------------------------------------------- oracle

def _bytes(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_every_receiver_gets_the_same_image_and_others_keep_poison():
    spec = TensorMapSpec.create("float32", (40, 64), (8, 32), swizzle="128B")
    data = _bytes(spec.extent_bytes)
    ops = [M.Multicast(issuer=0, mask=0b1010, slot=0, coords=(-3, 16))]  # the issuer is not a receiver
    slot_bytes = M.slot_bytes_for(spec, 256)
    imgs = M.expected_images(ops, 4, 1, slot_bytes, spec=spec, global_bytes=data, box_offset=256, poison=0x01020304)
    want = oracle.load_image(spec, data, (-3, 16), box_offset=256, image_bytes=slot_bytes, poison=0x01020304)
    for r in (1, 3):
        np.testing.assert_array_equal(imgs[r, 0], want)
    poison = np.full(slot_bytes // 4, 0x01020304, np.uint32).view(np.uint8)
    for r in (0, 2):
        np.testing.assert_array_equal(imgs[r, 0], poison)
    assert not np.array_equal(want, poison)


def test_a_cta_receiving_from_several_issuers_gets_each_in_its_slot():
    spec = TensorMapSpec.create("uint8", (4, 32), (1, 16))
    data = np.arange(128, dtype=np.uint8)
    ops = [M.Multicast(0, 0b11, 0, (1, 0)), M.Multicast(1, 0b01, 1, (2, 16)), M.Multicast(1, 0b10, 1, (3, 0))]
    imgs = M.expected_images(ops, 2, 2, 1024, spec=spec, global_bytes=data, poison=0)
    np.testing.assert_array_equal(imgs[0, 0, :16], data[32:48])
    np.testing.assert_array_equal(imgs[1, 0, :16], data[32:48])
    np.testing.assert_array_equal(imgs[0, 1, :16], data[80:96])
    np.testing.assert_array_equal(imgs[1, 1, :16], data[96:112])
    assert not imgs[:, :, 16:].any()
    np.testing.assert_array_equal(M.expected_tx(ops, 2, 2, spec), [[16, 16], [16, 16]])


def test_expected_tx_counts_the_full_box_even_out_of_bounds():
    spec = TensorMapSpec.create("float16", (10, 24), (16, 16))  # the box passes the tensor's end: still 512 B
    ops = [M.Multicast(2, 0b0111, 0, (-8, 16)), M.Multicast(3, 0b1000, 0, (0, 0))]
    np.testing.assert_array_equal(M.expected_tx(ops, 4, 1, spec)[:, 0], [512, 512, 512, 512])
    assert M.expected_tx(ops[:1], 4, 1, spec)[3, 0] == 0


def test_bulk_multicast_copies_the_bytes_to_every_receiver():
    data = _bytes(4096, 3)
    ops = [M.Multicast(1, 0b101, 0, bulk=(256, 96)), M.Multicast(0, 0b010, 0, bulk=(1024, 32))]
    imgs = M.expected_images(ops, 3, 1, 1024, global_bytes=data, box_offset=48, poison=0)
    for r in (0, 2):
        np.testing.assert_array_equal(imgs[r, 0, 48:144], data[256:352])
    np.testing.assert_array_equal(imgs[1, 0, 48:80], data[1024:1056])
    assert not imgs[1, 0, 80:].any() and not imgs[0, 0, :48].any()
    np.testing.assert_array_equal(M.expected_tx(ops, 3, 1)[:, 0], [96, 32, 96])


def test_random_cluster_ops_are_legal_and_cover_the_patterns():
    rng = np.random.default_rng(7)
    seen = {"issuer_outside": 0, "shared_slot": 0, "several_sources": 0}
    for _ in range(300):
        ctas = int(rng.choice([1, 2, 4, 8, 16]))
        slots = int(rng.integers(1, 5))
        ops = M.random_cluster_ops(rng, ctas, slots, lambda r: ((0, 0), None))
        M.check_cluster_ops(ops, ctas, slots)
        seen["issuer_outside"] += sum(not op.mask >> op.issuer & 1 for op in ops)
        per_slot = [sum(op.slot == s for op in ops) for s in range(slots)]
        seen["shared_slot"] += sum(n > 1 for n in per_slot)
        for r in range(ctas):
            if len({op.issuer for op in ops if op.mask >> r & 1}) > 1:
                seen["several_sources"] += 1
    assert all(v > 20 for v in seen.values()), seen


def test_probe_ops_mirror_the_cuda_struct():
    source = (compiler.cu_dir() / P.PROBE_SOURCE).read_text()
    compile_layout_check(source, {"McastOp": P.OP_DTYPE}, "mcast_op_layout.cu")


def test_pack_ops_puts_dim_0_first_and_marks_unused_entries():
    spec = TensorMapSpec.create("uint8", (4, 8, 32), (1, 1, 16))
    packed, per = P.pack_ops([[M.Multicast(1, 3, 0, (1, 2, 16))], []], spec)
    assert per == 1 and packed["c"][0, 0].tolist()[:3] == [16, 2, 1] and packed["issuer"][1, 0] == P.NO_OP
    bulk, _ = P.pack_ops([[M.Multicast(0, 1, 0, bulk=(4096, 48))]], None)
    assert bulk["c"][0, 0].tolist()[:2] == [256, 48]


# ---------------------------------------------------------------------------------------------- timeouts

def test_barrier_timeout_names_the_cluster_rank():
    wait = TimedOutWait(block=5, thread=0, barrier=0, stage=1, parity=0, where=0, since_ns=10, cta_rank=1,
                        cluster_ctas=4)
    e = BarrierTimeout("multicast_probe", [wait], 1)
    assert "block 5 (cluster rank 1 of 4) thread 0" in str(e) and e.cta_rank == 1 and e.cluster_ctas == 4
    plain = BarrierTimeout("k", [TimedOutWait(5, 0, 0, 0, 0, 0, 10)], 1)
    assert "block 5 thread 0" in str(plain) and "cluster" not in str(plain)


# ---------------------------------------------------------------------------------------------- kernels

def _ops(source, kernel):
    return sass.instructions(compiler.compile_cubin(source), kernel)


def test_multicast_probe_compiles_to_multicast_copies_and_cluster_barriers():
    ops = _ops(P.PROBE_SOURCE, "multicast_probe")
    for op in ["UTMALDG.1D.MULTICAST", "UTMALDG.2D.MULTICAST", "UTMALDG.3D.MULTICAST", "UTMALDG.4D.MULTICAST",
               "UTMALDG.5D.MULTICAST", "UBLKCP.S.G.MULTICAST", "UCGABAR_ARV", "UCGABAR_WAIT",
               "SYNCS.PHASECHK.TRANS64.TRYWAIT"]:
        assert ops[op] >= 1, f"{op} missing: {sorted(ops)}"
    assert "UTMALDG.2D" not in ops and "UBLKCP.S.G" not in ops, "a plain (non-multicast) copy crept in"


def test_reuse_kernel_releases_with_a_remote_arrive():
    ops = _ops(P.PROBE_SOURCE, "multicast_reuse")
    assert ops["UTMALDG.2D.MULTICAST"] >= 1 and ops["SYNCS.ARRIVE.TRANS64.RED.A1T0"] >= 1, sorted(ops)


def test_identity_kernel_uses_cluster_barriers_and_remote_arrives():
    ops = _ops(P.IDENTITY_SOURCE, "cluster_identity")
    assert ops["UCGABAR_ARV"] >= 1 and ops["SYNCS.ARRIVE.TRANS64.RED.A1T0"] >= 1, sorted(ops)


@pytest.mark.parametrize("stages", [2, 4, 8])
def test_bench_kernel_has_both_load_kinds(stages):
    cubin = compiler.compile_cubin("cluster/multicast_bench.cu", defines={"DRVTMA_MC_STAGES": stages})
    ops = sass.instructions(cubin, "multicast_bench")
    assert ops["UTMALDG.2D.MULTICAST"] >= 1 and ops["UTMALDG.2D"] >= 1, sorted(ops)
    # the per-stage remote arrive is CTA-scope: the only GPU-scope fences are the cluster barriers' own
    assert ops.get("MEMBAR.ALL.GPU", 0) == ops["UCGABAR_ARV"], sorted(ops)


def test_hazard_build_compiles():
    cubin = compiler.compile_cubin(P.PROBE_SOURCE, defines={"DRVTMA_WAIT_TIMEOUT_NS": "20000000ull"})
    assert cubin[:4] == b"\x7fELF"


# ---------------------------------------------------------------------------------------------- bench, CLI

def test_bench_checksums_model_the_kernel_loop():
    rng = np.random.default_rng(1)
    tile_rows, tiles, k, clusters = 4, 5, 2, 3
    data = rng.integers(0, 1 << 32, 16 * tile_rows * ROW_WORDS, dtype=np.uint32)
    got = expected_checksums(data, clusters, k, tiles, tile_rows)
    n_tiles = 16
    for c in range(clusters):
        want = 0
        for i in range(tiles):
            t = (c * tiles + i) % n_tiles
            want = (want + int(data[t * tile_rows * ROW_WORDS:(t + 1) * tile_rows * ROW_WORDS].astype(np.uint64).sum())) \
                & 0xFFFFFFFF
        assert got[c * k] == got[c * k + 1] == want


def test_cli_lists_the_multicast_bench():
    out = subprocess.run([sys.executable, "-m", "drvtma", "bench", "--help"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0 and "multicast" in out.stdout


# ---------------------------------------------------------------------------------------------- prepare()

class _FakeKernel:
    """What cluster_launch.prepare reads from a Kernel, with the driver's answers supplied by the test."""

    def __init__(self, required=None, non_portable=False):
        self._required_cluster, self._cluster_non_portable, self._configs = required, non_portable, {}


@pytest.mark.parametrize("answer", [0, "CUDA_ERROR_INVALID_CLUSTER_SIZE"])
def test_an_unschedulable_shape_is_refused_naming_the_occupancy_query(monkeypatch, answer):
    from drvtma.errors import CudaError
    from drvtma.runtime import cluster_launch as CL
    from drvtma.runtime.driver import cu
    from drvtma.runtime.kernel import LaunchConfig

    def occupancy(kernel, lc):
        assert lc.numAttrs == 1  # the query sees the cluster dims
        if isinstance(answer, str):
            raise CudaError("cuOccupancyMaxActiveClusters", 912, answer, "cluster misconfiguration")
        return answer

    monkeypatch.setattr(CL, "max_active_clusters", occupancy)
    cfg = LaunchConfig.make((16, 1, 1), 1024, 200 << 10, (8, 1, 1))
    with pytest.raises(ClusterError, match="cuOccupancyMaxActiveClusters") as info:
        CL.prepare(_FakeKernel(), cfg, cu.CUlaunchConfig())
    assert info.value.rule == "cluster_schedulable" and "204800 B of dynamic shared memory" in str(info.value)


def test_prepare_sets_the_attribute_and_leaves_compiled_dims_to_the_kernel(monkeypatch):
    from drvtma.runtime import cluster_launch as CL
    from drvtma.runtime.driver import cu
    from drvtma.runtime.kernel import LaunchConfig

    monkeypatch.setattr(CL, "max_active_clusters", lambda kernel, lc: 3)
    lc = cu.CUlaunchConfig()
    assert CL.prepare(_FakeKernel(), LaunchConfig.make((8, 2, 1), 32, 0, (4, 2, 1)), lc) == (4, 2, 1)
    assert lc.numAttrs == 1 and (lc.attrs[0].value.clusterDim.x, lc.attrs[0].value.clusterDim.y) == (4, 2)
    lc = cu.CUlaunchConfig()
    assert CL.prepare(_FakeKernel(required=(2, 1, 1)), LaunchConfig.make(8, 32), lc) == (2, 1, 1)
    assert lc.numAttrs == 0  # __cluster_dims__: the launch names none
    lc = cu.CUlaunchConfig()
    assert CL.prepare(_FakeKernel(), LaunchConfig.make(8, 32), lc) is None and lc.numAttrs == 0
    with pytest.raises(ClusterError, match="cluster_size_portable"):
        CL.prepare(_FakeKernel(), LaunchConfig.make(16, 32, 0, 16), cu.CUlaunchConfig())
    assert CL.prepare(_FakeKernel(non_portable=True), LaunchConfig.make(16, 32, 0, 16), cu.CUlaunchConfig()) \
        == (16, 1, 1)


def test_launch_config_refuses_a_grid_that_is_not_a_multiple_by_rule():
    from drvtma.runtime.kernel import LaunchConfig

    with pytest.raises(ClusterError, match="not a multiple of cluster") as info:
        LaunchConfig.make((6, 1, 1), 32, 0, (4, 1, 1))
    assert info.value.rule == "cluster_grid_multiple"
