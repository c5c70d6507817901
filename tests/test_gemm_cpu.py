"""The GEMM on the CPU: every configuration compiles with NVRTC and its SASS holds what it claims (HGMMA/QGMMA,
UTMALDG per panel, UTMASTG, USETMAXREG where enabled) with no local memory; the named rules refuse what the kernel
cannot take; the reference is exact on integer data; the kernel's descriptors and epilogue addresses, run through
the TMA and wgmma oracles, read and write exactly the right elements."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drvtma.errors import GemmError
from drvtma.gemm import model
from drvtma.gemm.claims import CLAIMS, claim_configs
from drvtma.gemm.config import GemmConfig
from drvtma.gemm.launch import KernelResources, check_register_split, compile_gemm, kernel_resources, map_specs
from drvtma.gemm.reference import exact_operands, reference_gemm, value_dtype
from drvtma.runtime import sass
from drvtma.tma.tiled import oracle as tma_oracle
from drvtma.tma.tiled.spec import Swizzle, TensorMapSpec

from support.gemm_configs import STMATRIX_CONFIGS

# Every configuration the GPU tests and the claim sweep will run: the main shape per dtype and output, then one
# change of each claim parameter at a time.
CONFIGS = {
    "bf16": GemmConfig(),
    "bf16->f32": GemmConfig(out_dtype="float32"),
    "f16": GemmConfig(dtype="float16"),
    "f16->f32": GemmConfig(dtype="float16", out_dtype="float32"),
    "f16->f16": GemmConfig(dtype="float16", out_dtype="float16"),
    "e4m3": GemmConfig(dtype="float8_e4m3fn"),
    "e5m2": GemmConfig(dtype="float8_e5m2"),
    "swizzle 64B": GemmConfig(swizzle="64B"),
    "swizzle 32B": GemmConfig(swizzle="32B"),
    "swizzle none": GemmConfig(swizzle="none"),
    "e4m3 swizzle 64B": GemmConfig(dtype="float8_e4m3fn", swizzle="64B"),
    "1 stage": GemmConfig(stages=1),
    "2 stages": GemmConfig(stages=2),
    "1 consumer": GemmConfig(bm=64, consumers=1),
    "1 consumer 2 atoms": GemmConfig(bm=128, bn=128, consumers=1, consumer_regs=240, producer_regs=24),
    "128x128": GemmConfig(bn=128),
    "setmaxnreg off": GemmConfig(setmaxnreg=False),
    "inflight 1": GemmConfig(inflight=1),
    "mma.sync": GemmConfig(mma="mma_sync"),
    "mma.sync f16 128x128 64B": GemmConfig(mma="mma_sync", dtype="float16", out_dtype="float32", bn=128,
                                           swizzle="64B"),
    "mma.sync swizzle none": GemmConfig(mma="mma_sync", swizzle="none"),
    "cluster 2": GemmConfig(cluster_m=2),
    "cluster 2 e4m3": GemmConfig(cluster_m=2, dtype="float8_e4m3fn"),
    "cluster 2 128x128 none": GemmConfig(cluster_m=2, bn=128, swizzle="none"),
    "cluster 2 mma.sync": GemmConfig(cluster_m=2, mma="mma_sync"),
    "cluster along N": GemmConfig(cluster_n=2),
    "swapped 64x32 cluster along N": GemmConfig(swap_ab=True, bm=64, bn=32, consumers=1, bk=128, stages=6,
                                                prefetch_maps=True, cluster_n=2),
    "stream-K": GemmConfig(streamk=True),
    "stream-K mma.sync": GemmConfig(streamk=True, mma="mma_sync"),
    "ping-pong 128x128": GemmConfig(pingpong=True, bn=128, stages=6),
    "ping-pong 64x256 e4m3 inflight 1": GemmConfig(pingpong=True, bm=64, bn=256, dtype="float8_e4m3fn", inflight=1),
    "swapped 64x16": GemmConfig(swap_ab=True, bm=64, bn=16, consumers=1, stages=8),
    "swapped 128x128 stream-K": GemmConfig(swap_ab=True, bn=128, stages=6, streamk=True),
    "swapped 64x64, 2 panels of K, maps prefetched": GemmConfig(swap_ab=True, bm=64, bn=64, consumers=1, bk=128,
                                                                 stages=6, prefetch_maps=True),
    "swapped 64x64, L2 evict (the skinny tiles')": GemmConfig(swap_ab=True, bm=64, bn=64, consumers=1, bk=128,
                                                              stages=6, prefetch_maps=True, evict_a="last",
                                                              evict_b="first"),
    "cluster along N, A's multicast evict_first": GemmConfig(cluster_n=2, evict_a="first"),
    "whole-tile staging": GemmConfig(epilogue_buffers=4, stages=3),
    "whole-tile staging e4m3 stream-K": GemmConfig(dtype="float8_e4m3fn", epilogue_buffers=4, stages=3, streamk=True),
    "3 staging buffers": GemmConfig(epilogue_buffers=3, stages=3),
    "ping-pong 128x128 whole-tile staging": GemmConfig(pingpong=True, bn=128, stages=4, epilogue_buffers=4),
    **STMATRIX_CONFIGS,
}


# One NVRTC build of the GEMM per configuration (seconds each, 40 of them): the default run builds one of each kind
# (dtype, mma.sync, cluster, stream-K, ping-pong, swapped, staging); the others are `-m slow`.
FAST_CONFIGS = ("bf16", "e4m3", "mma.sync", "cluster 2", "stream-K", "ping-pong 128x128", "swapped 64x16",
                "whole-tile staging", "stmatrix", "stmatrix swapped 64x16")


@pytest.fixture(scope="module", params=[n if n in FAST_CONFIGS else pytest.param(n, marks=pytest.mark.slow)
                                        for n in sorted(CONFIGS)], ids=str)
def built(request):
    cfg = CONFIGS[request.param]
    return cfg, compile_gemm(cfg)


def test_every_configuration_compiles_to_the_instructions_it_claims(built):
    cfg, cubin = built
    ops = sass.instructions(cubin, "gemm_ws")
    steps = cfg.k_tile * cfg.itemsize // 32
    count = lambda prefix: sum(v for op, v in ops.items() if op.startswith(prefix))  # noqa: E731
    loops = 2 if cfg.streamk else 1  # stream-K: the whole-tile loop and the split-run loop, each unrolled
    if cfg.mma == "mma_sync":  # per k-step and warp: 4 m16 atoms x bn/32 n8 blocks, 4 + bn/64 ldmatrix.x4
        assert count("HMMA.16816.F32") == loops * steps * 4 * cfg.bn // 32 and not count("HGMMA")
        assert ops["LDSM.16.M88.4"] == loops * steps * (4 + cfg.bn // 64)
    else:  # one wgmma per k-step per m64 atom, unrolled (the op's full name is e.g. HGMMA.64x256x16.F32.BF16)
        assert count("QGMMA" if cfg.itemsize == 1 else "HGMMA") == loops * steps * cfg.m_atoms and not count("HMMA")
    if cfg.cluster_size == 1:
        assert ops["UTMALDG.2D"] == loops * 2 * cfg.panels and not sass.has_opcode(ops, "UTMALDG.2D.MULTICAST")
    else:  # one box per K panel of the operand a CTA keeps; its part of the shared one (B along M, A along N)
        # multicast into the pair; cluster barriers at both ends
        assert ops["UTMALDG.2D"] == ops["UTMALDG.2D.MULTICAST"] == cfg.panels
        assert ops["UCGABAR_ARV"] >= 2 and ops["UCGABAR_WAIT"] >= 2
        # stages go back to the pair with CTA-scope remote arrives: a cluster-scope release costs a MEMBAR.ALL.GPU
        # each (it halved the tensor issue rate on the H200); only the two cluster barriers fence at GPU scope
        assert ops.get("MEMBAR.ALL.GPU", 0) == ops["UCGABAR_ARV"]
    # one store per epilogue panel: 128 B of a row, 64 rows (swapped: 64 columns of C by min(bn, 64) of its rows)
    assert ops["UTMASTG.2D"] == loops * cfg.bn // cfg.epilogue_width * cfg.m_atoms == loops * cfg.epilogue_panels
    # the async-proxy fence before the stores: one per panel, or one per tile when every panel has its own buffer
    # (plus the barriers' initialisation fence)
    whole_tile = cfg.epilogue_buffers >= cfg.epilogue_panels
    assert ops["FENCE.VIEW.ASYNC.S"] == 1 + loops * (1 if whole_tile else cfg.epilogue_panels)
    # the transposed staging writes one 16-bit value each; stmatrix four 8x8 matrices (swapped: transposed) each
    assert sass.has_opcode(ops, "STS.U16") == (cfg.swap_ab and not cfg.stmatrix)
    stsm = "STSM.16.MT88.4" if cfg.swap_ab else "STSM.16.M88.4"
    assert count("STSM") == ops.get(stsm, 0)
    if not cfg.stmatrix:
        assert not count("STSM")
    elif cfg.mma == "wgmma":  # one per 16 columns of each atom's tile, unrolled
        assert ops[stsm] == loops * cfg.m_atoms * cfg.bn // 16
    else:  # a warp's columns depend on its index: every panel's loop holds all of them, guarded
        assert ops[stsm] >= loops * cfg.bn // 16
    assert ops.get("UTMACCTL.PF", 0) == 3 * cfg.prefetch_maps  # prefetch.tensormap of A, B and C
    assert sass.has_opcode(ops, "USETMAXREG.DEALLOC.CTAPOOL") == cfg.setmaxnreg
    assert sass.has_opcode(ops, "USETMAXREG.TRY_ALLOC.CTAPOOL") == cfg.setmaxnreg
    res = kernel_resources(cubin)
    assert 0 < res.registers * cfg.threads <= 65536
    if cfg.mma == "mma_sync" and cfg.cluster_size > 1:
        # the one combination ptxas (168 registers for the whole kernel) spills a word in: measured, not timed
        assert res.frame_bytes <= 8
    elif cfg.setmaxnreg or cfg.consumers == 1:
        assert not any(op.startswith(("LDL", "STL")) for op in ops), "local memory: spills or an indexed array"
        assert res.frame_bytes == 0
    # Without setmaxnreg two consumer warpgroups get 65536 / 384 = 170 registers a thread: NVRTC 13.0's ptxas (the
    # H200 image) spills there, 13.5's does not. Spills are that claim's cost, measured by the claim sweep.
    check_register_split(cfg, res)


def test_l2_eviction_hints_reach_the_loads_of_their_operand_only(built):
    """A TMA load with .L2::cache_hint carries its policy register in SASS (UTMALDG ... desc[URn]); a plain one does
    not. Hinted: every panel of each operand whose priority is not "normal" (swapped, C's B is the kernel's A)."""
    cfg, cubin = built
    text = sass.disassemble(cubin)
    loads = [line for line in text.splitlines() if "UTMALDG" in line]
    hinted = sum("desc[" in line for line in loads)
    kernel_hints = cfg.kernel_operands(cfg.evict_a, cfg.evict_b)
    assert (cfg.defines()["GEMM_EVICT_A"], cfg.defines()["GEMM_EVICT_B"]) == tuple(
        {"normal": 0, "first": 1, "last": 2}[v] for v in kernel_hints)
    assert loads and len(loads) % 2 == 0
    per_operand = len(loads) // 2  # each operand's loads: one per panel (and per unrolled loop)
    assert hinted == per_operand * sum(v != "normal" for v in kernel_hints)


@pytest.mark.parametrize("cfg", [GemmConfig(), GemmConfig(swap_ab=True, bm=64, bn=16, consumers=1)],
                         ids=["bf16", "swapped 64x16"])
def test_the_kernel_refuses_a_panel_count_the_host_does_not_share(cfg):
    """GemmConfig.epilogue_panels (the staging buffers' count, the whole-tile rule) goes in as GEMM_EPI_PANELS and
    the kernel's static_assert compares it with its own count: one panel off fails to compile."""
    from drvtma.errors import NvrtcError
    from drvtma.gemm.config import KERNEL_SOURCE
    from drvtma.runtime.compiler import compile_cubin

    assert cfg.defines()["GEMM_EPI_PANELS"] == cfg.epilogue_panels
    with pytest.raises(NvrtcError) as exc:
        compile_cubin(KERNEL_SOURCE, defines={**cfg.defines(), "GEMM_EPI_PANELS": cfg.epilogue_panels + 1})
    assert "count the same panels" in exc.value.log


def test_kernel_resources_reads_registers_of_the_named_kernel(built):
    _, cubin = built
    assert kernel_resources(cubin).registers >= 128  # 128 accumulator floats per consumer thread at least
    with pytest.raises(KeyError):
        kernel_resources(cubin, "no_such_kernel")


@pytest.mark.parametrize("name", ["bf16", "e4m3 swizzle 64B", *(pytest.param(n, marks=pytest.mark.slow) for n in (
    "swizzle none", "1 consumer 2 atoms", "f16->f32", "mma.sync", "mma.sync f16 128x128 64B", "mma.sync swizzle none"))])
def test_descriptors_read_the_right_elements_of_every_stage(name):
    """The compiled-in descriptors, moved per consumer and stage as the kernel moves them, over TMA images of
    ragged operands (zero fill past every edge): the float64 sums equal A . B^T exactly."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(15)
    m, n = cfg.bm + 3, cfg.bn + 40
    k = cfg.k_tile * 2 + 16 // cfg.itemsize  # a partial last k-block
    a, b = exact_operands(rng, cfg.dtype, m, n, k)
    got = model.mainloop(cfg, a, b)
    np.testing.assert_array_equal(got, a.astype(np.float64) @ b.astype(np.float64).T)


def test_a_wrong_descriptor_is_caught_by_the_model():
    """The model is not vacuous: 128B-swizzle B descriptors over a stage that TMA loaded with 64B swizzle, or
    the B descriptors of the next k-step, read the wrong elements."""
    good_cfg, cfg = CONFIGS["bf16"], CONFIGS["swizzle 64B"]
    rng = np.random.default_rng(1)
    a, b = exact_operands(rng, cfg.dtype, 128, 256, 64)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    d = cfg.defines()
    np.testing.assert_array_equal(model.mainloop(cfg, a, b, d), want)
    wrong_swizzle = {**d, "GEMM_DESC_B": good_cfg.defines()["GEMM_DESC_B"]}  # same stage offset, 128B layout
    steps = d["GEMM_DESC_B"].split(",")
    shifted = {**d, "GEMM_DESC_B": ",".join(steps[1:] + steps[:1])}
    for wrong in (wrong_swizzle, shifted):
        assert not np.array_equal(model.mainloop(cfg, a, b, wrong), want)


@pytest.mark.parametrize("name", ["bf16", "bf16->f32", "mma.sync", "mma.sync f16 128x128 64B", "swapped 64x16",
                                  "swapped 128x128 stream-K", "stmatrix", "stmatrix f16 whole-tile staging",
                                  "stmatrix mma.sync", "stmatrix swapped 64x16",
                                  "stmatrix swapped 64x128, 2 panels of K"])
def test_epilogue_writes_where_the_swizzled_tma_store_reads(name):
    """Each output of a thread's accumulators lands at the staging byte a 128B-swizzled store box reads for its row
    and column (swapped: the box of C^T's rows, so the tile's column is the box's row), and that is where the
    accumulator belongs (wgmma accumulator map / mma.sync D fragment); over the panels every output of an atom's
    64 x bn slice is written exactly once. With stmatrix, the kernel's lane addresses go through the instruction's
    fragment layout (model._stmatrix_x4)."""
    cfg = CONFIGS[name]
    e, width = cfg.out_itemsize, cfg.epilogue_width
    box_shape = (width, 128 // e) if cfg.swap_ab else (64, width)
    box = TensorMapSpec.create(cfg.out_dtype, box_shape, box_shape, swizzle=Swizzle.B128)
    addresses = tma_oracle.box_row_addresses(box, 0)
    true_row, true_col = model.accumulator_positions(cfg)
    seen = np.zeros((64, cfg.bn), int)
    for panel in range(cfg.bn // width):
        at, row, col, thread, value = model.staged_outputs(cfg, panel)
        np.testing.assert_array_equal(at, addresses[col, row * e] if cfg.swap_ab else addresses[row, col * e])
        np.testing.assert_array_equal(row, true_row[thread, value])
        np.testing.assert_array_equal(col + panel * width, true_col[thread, value])
        np.add.at(seen, (row, col + panel * width), 1)
    assert (seen == 1).all()


def test_reference_is_exact_on_integer_data():
    rng = np.random.default_rng(3)
    for dtype in ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"):
        a, b = exact_operands(rng, dtype, 37, 24, 96)
        assert set(np.unique(a.astype(np.float32))) <= set(range(-3, 4))
        exact = a.astype(np.int64) @ b.astype(np.int64).T
        for out in ("float32", "bfloat16", "float16"):
            got = reference_gemm(a, b, alpha=0.5, out_dtype=out)
            assert got.dtype == value_dtype(out)
            np.testing.assert_array_equal(got.astype(np.float64),
                                          (exact * 0.5).astype(np.float32).astype(value_dtype(out)).astype(float))
    with pytest.raises(ValueError):
        exact_operands(rng, "bfloat16", 2, 2, 1 << 21)


@pytest.mark.parametrize("change, rule", [
    ({"dtype": "float32"}, "dtype"), ({"out_dtype": "int8"}, "out_dtype"), ({"mma": "dpas"}, "mma_kind"),
    ({"mma": "mma_sync", "dtype": "float8_e4m3fn"}, "mma_sync_dtype"),
    ({"mma": "mma_sync", "bm": 128, "bn": 128, "consumers": 1}, "mma_sync_tile"),
    ({"cluster_m": 4}, "cluster_size"), ({"streamk": True, "cluster_m": 2}, "streamk_schedule"),
    ({"streamk": True, "persistent": False}, "streamk_schedule"), ({"swizzle": "16B"}, "swizzle"), ({"consumers": 3}, "consumers"),
    ({"bm": 96}, "tile_m"), ({"bm": 320}, "tile_m"), ({"bn": 200}, "tile_n"), ({"bn": 80}, "tile_n"),
        ({"bn": 80, "swap_ab": True}, "tile_n"), ({"swap_ab": True, "out_dtype": "float32"}, "swap_ab_output"),
        ({"pingpong": True, "consumers": 1, "bm": 64}, "pingpong_schedule"),
        ({"pingpong": True, "streamk": True}, "pingpong_schedule"),
        ({"pingpong": True, "mma": "mma_sync"}, "pingpong_schedule"), ({"pingpong": True}, "accumulator_registers"),
    ({"bk": 40}, "tile_k"), ({"bm": 128, "consumers": 1}, "accumulator_registers"), ({"stages": 17}, "stages"),
    ({"stages": 5}, "smem_capacity"), ({"producer_regs": 20}, "setmaxnreg_range"),
    ({"consumer_regs": 256}, "register_budget"), ({"group_m": 0}, "group_m"), ({"inflight": 2}, "inflight"),
    ({"epilogue_buffers": 1}, "epilogue_buffers"), ({"epilogue_buffers": 5, "stages": 2}, "epilogue_buffers"),
    ({"epilogue_buffers": 4}, "smem_capacity"), ({"evict_a": "lru"}, "l2_evict"), ({"evict_b": "none"}, "l2_evict"),
])
def test_rules_refuse_what_the_kernel_cannot_take(change, rule):
    with pytest.raises(GemmError) as exc:
        GemmConfig(**change).check()
    assert exc.value.rule == rule
    assert "fix:" in str(exc.value)


def test_setmaxnreg_direction_rule():
    cfg = GemmConfig(producer_regs=40, consumer_regs=160)
    with pytest.raises(GemmError, match="setmaxnreg_direction"):
        check_register_split(cfg, KernelResources(registers=168, frame_bytes=0))
    with pytest.raises(GemmError, match="setmaxnreg_direction"):
        check_register_split(GemmConfig(producer_regs=200), KernelResources(registers=168, frame_bytes=0))
    check_register_split(GemmConfig(setmaxnreg=False, consumer_regs=8), KernelResources(168, 0))


@pytest.mark.parametrize("dtype, out, m, n, k, rule", [
    ("bfloat16", "bfloat16", 128, 128, 100, "k_alignment"),
    ("float8_e4m3fn", "bfloat16", 128, 128, 40, "k_alignment"),
    ("bfloat16", "bfloat16", 128, 100, 64, "n_alignment"),
    ("bfloat16", "float32", 128, 102, 64, "n_alignment"),
    ("bfloat16", "bfloat16", 0, 128, 64, "shape_range"),
])
def test_problem_shapes_tma_cannot_describe_are_refused(dtype, out, m, n, k, rule):
    with pytest.raises(GemmError) as exc:
        GemmConfig(dtype=dtype, out_dtype=out).check_problem(m, n, k)
    assert exc.value.rule == rule


def test_ragged_shapes_map_to_valid_tensor_maps():
    """Any M, N, K with 16-byte rows: the maps validate (edges are the loads' zero fill and the stores' clip)."""
    for cfg in (GemmConfig(), GemmConfig(dtype="float8_e4m3fn"), GemmConfig(out_dtype="float32", swizzle="none")):
        for m, n, k in ((1, 8, 16), (129, 264, 80), (16, 8192, 8192)):
            for spec in map_specs(cfg, m, n, k, 1 << 20, 1 << 30, 1 << 34):
                spec.validate()


def test_smem_and_grid():
    cfg = GemmConfig()
    assert cfg.smem_bytes == 1024 + 4 * (128 + 256) * 64 * 2 + 2 * 2 * 8192 <= 232448
    assert cfg.grid(8192, 8192, 132) == 132 and cfg.with_(persistent=False).grid(8192, 8192, 132) == 64 * 32
    assert cfg.grid(16, 8192, 132) == 32
    pair = cfg.with_(cluster_m=2)  # CTA pairs: an odd number of tile rows still takes a whole pair
    assert pair.cluster == (2, 1, 1) and cfg.cluster is None
    assert pair.grid(8192, 8192, 132) == 132 and pair.with_(persistent=False).grid(8192, 8192, 132) == 64 * 32
    assert pair.grid(300, 512, 132) == 2 * 2 * 2 and pair.with_(persistent=False).grid(130, 256, 132) == 2
    assert pair.grid(8192, 8192, 133) == 132  # whole clusters only
    cols = cfg.with_(cluster_n=2)  # pairs along N: an odd number of tile columns still takes a whole pair
    assert cols.cluster == (2, 1, 1) and cols.cluster_tiles(300, 2056) == 3 * 5
    assert cols.with_(persistent=False).grid(300, 2056, 132) == 2 * 3 * 5 and cols.grid(300, 2056, 132) == 30


@pytest.mark.parametrize("pair, solo", [
    ("cluster_m", GemmConfig()), ("cluster_n", GemmConfig()),
    ("cluster_n", GemmConfig(swap_ab=True, bm=128, bn=64, consumers=1, bk=128)),  # shared A: C's B, the large one
], ids=["along M", "along N", "along N swapped"])
def test_a_pair_loads_half_of_the_shared_tile_per_cta(pair, solo):
    """A pair's CTAs each load a full box of the operand they keep and half the shared tile's rows (B along M, A
    along N); both halves land in each CTA: the same stage, tx bytes and shared memory as alone."""
    cfg = solo.with_(**{pair: 2})
    shared, rows = (1, cfg.bn) if pair == "cluster_m" else (0, cfg.bm)
    specs = map_specs(cfg, 1024, 1024, 512, 1 << 20, 1 << 30, 1 << 34)
    alone = map_specs(solo, 1024, 1024, 512, 1 << 20, 1 << 30, 1 << 34)
    assert specs[1 - shared].box == alone[1 - shared].box and specs[2].box == alone[2].box
    assert sorted(specs[shared].box) == sorted((rows // 2, cfg.panel_elems)) and max(alone[shared].box) == rows
    assert specs[shared].smem_bytes * 2 == alone[shared].smem_bytes
    assert cfg.tx_bytes == solo.tx_bytes and cfg.smem_bytes == solo.smem_bytes
    define = f"GEMM_{pair.upper()}"
    assert (cfg.defines()[define], solo.defines()[define]) == (2, 1)
    assert ("along N (A multicast)" in cfg.label()) == (pair == "cluster_n")


def test_l2_promotion_reaches_the_a_and_b_maps_only():
    """l2_promotion widens the loads' memory requests: the A and B maps (and the convolution's im2col A map) carry
    it; C, a store map, keeps none; the label names it when it is not the default."""
    from drvtma.gemm.conv import ConvShape
    from drvtma.tma.tiled.spec import L2Promotion

    cfg = GemmConfig(l2_promotion="256B")
    a, b, c = map_specs(cfg, 1024, 1024, 512, 1 << 20, 1 << 30, 1 << 34)
    assert (a.l2_promotion, b.l2_promotion, c.l2_promotion) == (L2Promotion.B256, L2Promotion.B256, L2Promotion.NONE)
    plain = map_specs(GemmConfig(), 1024, 1024, 512, 1 << 20, 1 << 30, 1 << 34)
    assert {s.l2_promotion for s in plain} == {L2Promotion.NONE}
    assert "L2 promotion 256B" in cfg.label() and "L2 promotion" not in GemmConfig().label()
    shape = ConvShape(n=2, h=9, w=11, c=64, k=128, r=3, s=3, pad=1)
    assert shape.a_spec(cfg.with_(bm=128, bn=128)).l2_promotion == L2Promotion.B256
    assert shape.a_spec(GemmConfig(bm=128, bn=128)).l2_promotion == L2Promotion.NONE


@pytest.mark.slow
@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_every_claim_value_compiles_or_is_refused_by_its_rule(claim):
    """Each claim of the async tensor-core article is one field: every value builds a kernel with the instructions it claims, or names
    the rule that refuses it."""
    for cfg in claim_configs(claim):
        errors = list(cfg.errors())
        if errors:
            raise AssertionError((cfg.label(), errors))
            continue
        ops = sass.instructions(compile_gemm(cfg), "gemm_ws")
        assert sass.has_opcode(ops, "USETMAXREG.TRY_ALLOC.CTAPOOL") == cfg.setmaxnreg
        if cfg.setmaxnreg or cfg.consumers == 1:  # see test_every_configuration_compiles_to_the_instructions_it_claims
            assert not any(op.startswith(("LDL", "STL")) for op in ops)



@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(tiles=st.integers(1, 600), kblocks=st.integers(1, 140), ctas=st.integers(1, 140))
def test_streamk_split_covers_every_k_block_once_and_owners_wait_only_upward(tiles, kblocks, ctas):
    """The kernel's split (drvtma.gemm.schedule mirrors it): every k-block of every tile once; a CTA writes at
    most one partial (its first split run, the only one that can start inside a tile); the head of a split tile
    adds exactly the partials of the CTAs holding the rest of it, all above it (their first runs wait on
    nothing, so no order or residency deadlocks the owner)."""
    from drvtma.gemm import schedule

    per_cta = schedule.runs(tiles, kblocks, ctas, streamk=True)
    whole, _ = schedule.split(tiles, kblocks, ctas, True)
    holder = {}
    for mine in per_cta:
        partial = [i for i, r in enumerate(mine) if r.kb0 > 0]
        assert len(partial) <= 1 and all(i == sum(r.tile < whole for r in mine) for i in partial)
        for run in mine:
            for kb in range(run.kb0, run.kb1):
                assert (run.tile, kb) not in holder
                holder[(run.tile, kb)] = run
    assert len(holder) == tiles * kblocks
    heads = [holder[(t, 0)] for t in range(tiles)]
    for head in heads:
        who = schedule.contributors(head, tiles, kblocks, ctas)
        rest = {holder[(head.tile, kb)] for kb in range(head.kb1, kblocks)}
        assert set(who) == {r.cta for r in rest} and all(c > head.cta for c in who)
        assert all(r.kb0 > 0 for r in rest)
    plain = schedule.runs(tiles, kblocks, ctas, streamk=False)
    assert sorted(r.tile for mine in plain for r in mine if r.kb0 == 0 and r.kb1 == kblocks) == list(range(tiles))


def test_consumer_tiles_that_are_not_a_plain_offset_are_a_gemm_error(monkeypatch):
    """The kernel moves consumer 0's A descriptors by the consumer's byte offset: a configuration where that is not
    what descriptor_for gives is refused naming the rule, never an AssertionError."""
    from drvtma.wgmma.descriptor import SmemDescriptor

    assert GemmConfig().descriptors()  # the default's consumers are plain offsets
    advanced = SmemDescriptor.advanced
    monkeypatch.setattr(SmemDescriptor, "advanced", lambda self, nbytes: advanced(self, nbytes + 16))
    with pytest.raises(GemmError, match=r"\[consumer_offset\] bm = 128: consumer 1's A descriptors"):
        GemmConfig().descriptors()


def test_the_launch_sizes_are_computed_once_per_configuration(monkeypatch):
    """Every launch reads smem_bytes; built from validated box specs each time it cost 70 us of host time a launch,
    past the stream hold that keeps the host out of the timed interval. A configuration is frozen: once."""
    from drvtma.tma.tiled.spec import TensorMapSpec

    cfg = GemmConfig(dtype="float8_e4m3fn", bn=128, stages=5)
    first = (cfg.smem_bytes, cfg.stage_bytes, cfg.tx_bytes, cfg.a_bytes)
    monkeypatch.setattr(TensorMapSpec, "create", lambda *a, **k: pytest.fail("a box spec was built again"))
    assert (cfg.smem_bytes, cfg.stage_bytes, cfg.tx_bytes, cfg.a_bytes) == first
    assert cfg == GemmConfig(dtype="float8_e4m3fn", bn=128, stages=5)  # the cache is not part of equality
    monkeypatch.undo()
    assert cfg.with_(stages=4).smem_bytes == first[0] - first[1]  # a changed configuration computes its own
