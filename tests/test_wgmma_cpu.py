"""wgmma descriptors, rules, descriptor_for and the oracle on the CPU; the probe kernels compile to HGMMA/UTMALDG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drvtma.errors import WgmmaError
from drvtma.tma.tiled.spec import Swizzle, TensorMapSpec
from drvtma.wgmma import cases as wc
from drvtma.wgmma import oracle, rules
from drvtma.wgmma.descriptor import (
    SPAN_BYTES,
    SmemDescriptor,
    WgmmaSwizzle,
    from_tma_swizzle,
    to_tma_swizzle,
    wgmma_swizzle,
)
from drvtma.wgmma.dtypes import ALL_TYPES, BF16, E4M3, F16, S8, TF32, U8, M, wgmma_type
from drvtma.wgmma.layout import descriptor_for
from drvtma.wgmma.probe import CASE_DTYPE, ProbeCase, WgmmaProbe, check_case, operand_tiles, predict

ROOT = Path(__file__).resolve().parents[1]


# ---- descriptor encode / decode

def test_worked_values_from_wgmma_tma_md():
    """§1's worked values: fast.cu style, DeepGEMM style, MN-major bf16 B."""
    assert SmemDescriptor(0x400, lbo=16, sbo=1024, swizzle="128B").encode() == 0x4000004000010040
    assert SmemDescriptor(0x400, lbo=0, sbo=1024, swizzle="128B").encode() == 0x4000004000000040
    assert SmemDescriptor(0x2000, lbo=8192, sbo=1024, swizzle="128B").encode() == 0x4000004002000200


@given(st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1),
       st.integers(0, 7), st.integers(0, 3))
def test_encode_decode_round_trip(start, lbo, sbo, base_offset, swz):
    d = SmemDescriptor(start << 4, lbo=lbo << 4, sbo=sbo << 4, swizzle=WgmmaSwizzle(swz), base_offset=base_offset)
    v = d.encode()
    assert SmemDescriptor.decode(v) == d
    assert SmemDescriptor.decode(v).encode() == v
    assert v & 0x3FFF == start and (v >> 16) & 0x3FFF == lbo and (v >> 32) & 0x3FFF == sbo
    assert (v >> 49) & 7 == base_offset and v >> 62 == swz


def test_swizzle_codes_convert_in_one_place():
    assert [int(from_tma_swizzle(s)) for s in range(4)] == [0, 3, 2, 1]
    for code in range(4):
        assert from_tma_swizzle(to_tma_swizzle(code)) == code
    assert wgmma_swizzle("128B") == WgmmaSwizzle.B128 and wgmma_swizzle("none") == WgmmaSwizzle.NONE


def test_decode_refuses_reserved_bits_of_a_tcgen05_descriptor():
    with pytest.raises(WgmmaError) as e:
        SmemDescriptor.decode(0x4000004000010040 | 1 << 46)
    assert e.value.rule == "reserved_bits" and "46" in str(e.value)


def test_describe_names_fields_bytes_and_hex():
    text = SmemDescriptor(0x400, lbo=16, sbo=1024, swizzle="128B").describe()
    assert "0x4000004000010040" in text and "SBO 1024 B (enc 64)" in text and "128B" in text


# ---- every rule: one valid and one broken case

RULE_CASES = [
    ("field_range", lambda: SmemDescriptor(1 << 18, 16, 1024).encode(), lambda: SmemDescriptor(0, 16, 1024).encode()),
    ("field_alignment", lambda: SmemDescriptor(0, 24, 1024).encode(), lambda: SmemDescriptor(0, 32, 1024).encode()),
    ("base_offset_range", lambda: SmemDescriptor(0, 16, 1024, "128B", 8).encode(),
     lambda: SmemDescriptor(0, 16, 1024, "128B", 7).encode()),
    ("swizzle_code", lambda: wgmma_swizzle(4), lambda: wgmma_swizzle(3)),
    ("start_alignment", lambda: rules.check_descriptor(SmemDescriptor(8, 16, 128)),
     lambda: rules.check_descriptor(SmemDescriptor(16, 16, 128))),
    ("base_offset_use", lambda: rules.check_descriptor(SmemDescriptor(1024, 16, 1024, "128B", 1)),
     lambda: rules.check_descriptor(SmemDescriptor(1024, 16, 1024, "128B", 0))),
    ("swizzle_alignment", lambda: rules.check_descriptor(SmemDescriptor(1024 + 16, 16, 1024, "128B")),
     lambda: rules.check_descriptor(SmemDescriptor(1024 + 128 + 96, 16, 1024, "128B"))),
    ("shape_m", lambda: rules.check_shape("bf16", 64, m=128), lambda: rules.check_shape("bf16", 64, m=64)),
    ("shape_k", lambda: rules.check_shape("tf32", 64, k=16), lambda: rules.check_shape("tf32", 64, k=8)),
    ("shape_n", lambda: rules.check_shape("s8", 40), lambda: rules.check_shape("bf16", 40)),
    ("major_dtype", lambda: rules.check_operands("e4m3", "K", "MN"), lambda: rules.check_operands("bf16", "K", "MN")),
    ("register_a_major", lambda: rules.check_operands("f16", "MN", "K", a_from_registers=True),
     lambda: rules.check_operands("f16", "K", "MN", a_from_registers=True)),
    ("operand", lambda: rules.check_operands("f16", "M", "K"), lambda: rules.check_operands("f16", "MN", "K")),
    ("dtype", lambda: wgmma_type("b1"), lambda: wgmma_type("u8")),
    ("reserved_bits", lambda: SmemDescriptor.decode(1 << 14), lambda: SmemDescriptor.decode(1 << 13)),
    ("field_type", lambda: SmemDescriptor(1.5, 16, 1024), lambda: SmemDescriptor(np.int64(0), 16, 1024).encode()),
    ("descriptor_type", lambda: rules.check_descriptor(0x40), lambda: rules.check_descriptor(SmemDescriptor.decode(
        "0x4000004000010040"))),
    ("descriptor_mismatch",
     lambda: rules.check_matches(SmemDescriptor(0, 16, 512, "128B"), SmemDescriptor(0, 16, 1024, "128B"),
                                 major="K", parameter="d"),
     lambda: rules.check_matches(SmemDescriptor(0, 0, 1024, "128B"), SmemDescriptor(0, 16, 1024, "128B"),
                                 major="K", parameter="d")),
]


@pytest.mark.parametrize("rule,broken,valid", RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rule(rule, broken, valid):
    valid()
    with pytest.raises(WgmmaError) as e:
        broken()
    assert e.value.rule == rule and e.value.fix


def test_every_named_rule_has_a_case():
    assert {c[0] for c in RULE_CASES} == set(rules.RULES)


def _spec(dtype, shape, box, swizzle, strides=None):
    return TensorMapSpec.create(wgmma_type(dtype).tma_dtype, shape, box, swizzle=swizzle, strides_bytes=strides)


LAYOUT_CASES = [
    ("spec_type", lambda: descriptor_for({"box": (64, 64)}, 0, "A", "K")),
    ("spec_interleave", lambda: descriptor_for(TensorMapSpec.create("float16", (64, 64), (64, 8), interleave=1),
                                                0, "A", "K")),
    ("spec_element_strides", lambda: descriptor_for(TensorMapSpec.create("float16", (64, 64), (64, 64),
                                                                         element_strides=(2, 1), swizzle=3), 0, "A", "K")),
    ("spec_dtype_size", lambda: descriptor_for(_spec("f16", (64, 64), (64, 64), 3), 0, "A", "K", dtype="tf32")),
    ("spec_rank", lambda: descriptor_for(TensorMapSpec.create("float16", (64,), (64,)), 0, "A", "K")),
    ("box_inner_span", lambda: descriptor_for(_spec("f16", (64, 64), (64, 32), 0), 0, "A", "K")),
    ("box_inner_kstep", lambda: descriptor_for(_spec("f16", (64, 64), (64, 8), 3), 0, "A", "K")),
    ("box_rows", lambda: descriptor_for(_spec("f16", (64, 64), (32, 64), 3), 0, "A", "K")),
    ("tile_alignment", lambda: descriptor_for(_spec("f16", (64, 64), (64, 64), 3), 64, "A", "K")),
    ("k_step_range", lambda: descriptor_for(_spec("f16", (64, 64), (64, 64), 3), 0, "A", "K", 4)),
]


@pytest.mark.parametrize("rule,broken", LAYOUT_CASES, ids=[c[0] for c in LAYOUT_CASES])
def test_layout_rule(rule, broken):
    with pytest.raises(WgmmaError) as e:
        broken()
    assert e.value.rule == rule and e.value.fix
    descriptor_for(_spec("f16", (64, 64), (64, 64), 3), 1024, "A", "K", 3)  # the valid neighbour


def test_every_layout_rule_has_a_case():
    assert {c[0] for c in LAYOUT_CASES} == set(rules.LAYOUT_RULES)


# ---- descriptor_for against a table worked by hand

@pytest.mark.parametrize("swz,span", [(3, 128), (2, 64), (1, 32)])
def test_descriptor_for_k_major_swizzled(swz, span):
    spec = _spec("bf16", (128, 256), (128, span // 2), swz)
    d = descriptor_for(spec, 0x2000, "B", "K", dtype="bf16", panels=2)
    assert all(x.sbo == 8 * span and x.swizzle == from_tma_swizzle(swz) and x.base_offset == 0 for x in d)
    per_panel = span // 32
    assert [x.start - 0x2000 for x in d] == [p * 128 * span + 32 * s for p in range(2) for s in range(per_panel)]


def test_descriptor_for_k_major_unswizzled_16_byte_columns():
    spec = _spec("bf16", (8, 64, 8), (4, 64, 8), 0, strides=(16, 128, 2))
    d = descriptor_for(spec, 0x400, "A", "K", dtype="bf16")
    assert [(x.start, x.lbo, x.sbo) for x in d] == [(0x400, 64 * 16, 128), (0x400 + 2 * 64 * 16, 64 * 16, 128)]


def test_descriptor_for_mn_major_tables():
    # 128B: box {64 (MN), BK}: SBO 1024, LBO = BK x 128, step += 2048
    spec = _spec("bf16", (2, 64, 64), (2, 64, 64), 3, strides=(128, 256, 2))
    d = descriptor_for(spec, 0x2000, "B", "MN", dtype="bf16")
    assert [(x.start - 0x2000, x.lbo, x.sbo) for x in d] == [(2048 * s, 64 * 128, 1024) for s in range(4)]
    assert d[0].encode() == 0x4000004002000200  # §1's worked value
    # none: box {8, BK}: SBO = BK x 16 (swapped), LBO = 128, step += 256
    spec = _spec("bf16", (16, 32, 8), (16, 32, 8), 0, strides=(16, 256, 2))
    d = descriptor_for(spec, 0, "B", "MN", dtype="bf16")
    assert [(x.start, x.lbo, x.sbo) for x in d] == [(256 * s, 128, 32 * 16) for s in range(2)]


def test_descriptor_for_narrow_box_keeps_the_span_pitch():
    spec = _spec("f16", (64, 128), (64, 32), 3)  # 64 B of a 128 B span
    d = descriptor_for(spec, 0, "A", "K", dtype="f16", panels=2)
    assert [x.start for x in d] == [0, 32, 64 * 128, 64 * 128 + 32]


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_descriptor_for_reads_exactly_the_loaded_tiles(t):
    """Every layout the fuzz builds: the oracle's reads through descriptor_for equal the global matrix."""
    rng = np.random.default_rng(3)
    for _ in range(12):
        g = wc.random_group(rng, t, cases=3, wrong_fraction=0.0)
        for c in g.cases:
            a, b = operand_tiles(g, c)
            for s in range(c.steps):
                assert np.array_equal(b[s], g.plans["B"].logical_tile(c.b_boxes[0], s))
                if not c.rs:
                    assert np.array_equal(a[s], g.plans["A"].logical_tile(c.a_boxes[0], s))


# ---- oracle index maps

@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("swz", list(WgmmaSwizzle))
def test_valid_descriptors_read_a_permutation(t, swz):
    """For a canonical descriptor the element addresses are distinct and tile one contiguous block."""
    for major in (("K", "MN") if t.transposable else ("K",)):
        for rows in (64, 256):
            span = SPAN_BYTES[WgmmaSwizzle(int(swz))]
            if major == "K":
                d = (SmemDescriptor(0, lbo=rows * 16, sbo=128, swizzle=swz) if swz == WgmmaSwizzle.NONE
                     else SmemDescriptor(0, lbo=16, sbo=8 * span, swizzle=swz))
                if swz != WgmmaSwizzle.NONE:  # one 32-B k-step of a span-wide row: the block is rows x span
                    addr = oracle.element_addresses(d, t, rows, major)
                    assert len(np.unique(addr)) == addr.size
                    assert set(np.unique(addr // 16 * 16 % span)) <= set(range(0, span, 16))
                    continue
            else:
                d = (SmemDescriptor(0, lbo=128, sbo=16 * 16, swizzle=swz) if swz == WgmmaSwizzle.NONE
                     else SmemDescriptor(0, lbo=16 * span, sbo=8 * span, swizzle=swz))
            addr = oracle.element_addresses(d, t, rows, major)
            flat = np.sort(addr.reshape(-1))
            assert np.array_equal(flat, np.arange(addr.size) * t.itemsize), (major, rows)


def test_swizzle_xor_matches_the_tma_oracle():
    from drvtma.tma.tiled.oracle import swizzle_addresses

    a = np.arange(0, 8192, 16)
    for tma in (Swizzle.B32, Swizzle.B64, Swizzle.B128):
        assert np.array_equal(oracle.swizzle_phase(a, from_tma_swizzle(tma)), swizzle_addresses(a, tma))


@pytest.mark.parametrize("n", [8, 24, 256])
def test_accumulator_map_is_a_bijection(n):
    rows, cols = oracle.accumulator_map(n)
    flat = rows * n + cols
    assert sorted(flat.reshape(-1)) == list(range(M * n))
    # warp w owns rows 16w..16w+15 (fast.cu, DeepGEMM, MMA-Sim agree)
    assert rows[32:64].min() == 16 and rows[32:64].max() == 31
    m = np.arange(M * n).reshape(M, n)
    assert np.array_equal(oracle.fragments_to_matrix(oracle.matrix_to_fragments(m, n), n), m)


@pytest.mark.parametrize("t", [F16, TF32, E4M3], ids=lambda t: t.name)
def test_a_fragments_are_a_bijection_and_round_trip(t):
    rows, cols = oracle.a_fragment_map(t)
    assert sorted((rows * t.k + cols).reshape(-1)) == list(range(M * t.k))
    bits = wc.exact_bits(t, np.random.default_rng(0), (M, t.k))
    assert np.array_equal(oracle.unpack_a_registers(oracle.pack_a_registers(bits, t), t), bits)


def test_mma_is_exact_and_models_scale_d_and_int_wrap():
    rng = np.random.default_rng(0)
    a = wc.exact_bits(BF16, rng, (M, 16))
    b = wc.exact_bits(BF16, rng, (32, 16))
    c = wc.exact_c(BF16, rng, 32)
    want = BF16.from_bits(a) @ BF16.from_bits(b).T
    assert np.array_equal(oracle.mma([a], [b], BF16, c, scale_d=False), want.astype(np.float32))
    assert np.array_equal(oracle.mma([a], [b], BF16, c, scale_d=True), (want + c).astype(np.float32))
    big = np.full((M, 32), 127, np.int8).view(np.uint8)
    d = oracle.mma([big], [big[:8]], S8, np.full((M, 8), 2**31 - 1, np.int32))
    assert d.dtype == np.int32 and d[0, 0] == np.int32(-(2**31) + 127 * 127 * 32 - 1)
    assert oracle.mma([np.full((M, 32), 200, np.uint8)], [np.full((8, 32), 200, np.uint8)], U8)[0, 0] == 200 * 200 * 32


def test_tf32_reads_drop_the_low_13_bits():
    bits = np.array([0x3F801FFF], np.uint32)
    assert TF32.from_bits(bits)[0] == 1.0


def test_exact_data_is_exact_in_float32():
    rng = np.random.default_rng(1)
    for t in ALL_TYPES:
        v = t.from_bits(wc.exact_bits(t, rng, 4096))
        if not t.is_int:
            assert np.array_equal(v.astype(t.values).astype(np.float64), v)
            assert np.abs(v).max() <= 16


# ---- the probe: wrong descriptors are refused before any launch; case records mirror the kernel struct

def _valid_group():
    return wc.random_group(np.random.default_rng(5), "bf16", n=48, cases=4, wrong_fraction=0.0,
                           config={"rs": False, "major_a": "K", "major_b": "K", "swizzle_a": 3, "swizzle_b": 3,
                                   "steps": 4})


def test_checked_launch_refuses_a_wrong_descriptor_by_rule_before_launch():
    group = _valid_group()
    for i, c in enumerate(group.cases):
        check_case(group, c, i)
    c = group.cases[1]
    c.desc_b = [d.replace(sbo=512) for d in c.desc_b]
    with WgmmaProbe() as p:  # no GPU is touched: the refusal comes first
        with pytest.raises(WgmmaError) as e:
            p.run(group)
    assert e.value.rule == "descriptor_mismatch" and "cases[1].desc_b[0].sbo" in str(e.value)
    c.desc_b = [d.replace(sbo=1024, swizzle=WgmmaSwizzle(3)) for d in c.desc_b]  # TMA's enum for 128B
    with pytest.raises(WgmmaError) as e:
        WgmmaProbe().run(group)
    assert e.value.rule == "descriptor_mismatch" and "swizzle" in str(e.value)


def test_every_wrong_kind_is_refused_when_checked():
    rng = np.random.default_rng(9)
    seen = set()
    for _ in range(60):
        g = wc.random_group(rng, "f16", n=32, cases=8, wrong_fraction=1.0)
        for i, c in enumerate(g.cases):
            if c.label == "valid":
                continue
            kind = c.label.split(":")[0]  # lbo_plus16 is refused only where LBO is read (docs/wgmma.md §9.3)
            try:
                check_case(g, c, i)
            except WgmmaError:
                seen.add(kind)
    assert seen == set(wc.WRONG_KINDS)


def test_predict_differs_for_most_wrong_descriptors():
    """A wrong descriptor that the oracle says reads the same bytes would prove nothing on the GPU."""
    rng = np.random.default_rng(11)
    same = total = 0
    for _ in range(20):
        g = wc.random_group(rng, "bf16", n=32, cases=8, wrong_fraction=1.0)
        right = [ProbeCase(**{**c.__dict__, "desc_a": c.expected_a, "desc_b": c.expected_b}) for c in g.cases]
        for c, r in zip(g.cases, right):
            if c.label == "valid" or r.desc_b is None or (not c.rs and r.desc_a is None):
                continue
            total += 1
            g2 = type(g)(**{**g.__dict__, "cases": [c, r]})
            p = predict(g2)
            same += np.array_equal(p[0], p[1])
    assert total > 50 and same < total * 0.35, (same, total)


def test_case_struct_mirrors_the_kernel():
    from support.struct_layout import compile_layout_check

    src = (ROOT / "cu" / "wgmma" / "wgmma_probe.cu").read_text()
    struct = src[src.index("struct WgCase"):src.index("};", src.index("struct WgCase")) + 2]
    compile_layout_check('#include <drvtma/common.cuh>\n#define WG_MAX_STEPS 8\n#define WG_MAX_BOXES 4\n' + struct,
                         {"WgCase": CASE_DTYPE}, "wgmma_case_layout.cu")


def test_generated_wrappers_are_up_to_date():
    assert subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_wgmma_ops.py"), "--check"]).returncode == 0
    from drvtma.wgmma.probe import PROBE_NS

    gen = (ROOT / "scripts" / "gen_wgmma_ops.py").read_text()
    assert f"PROBE_NS = {PROBE_NS}" in gen
    kernels = (ROOT / "cu" / "wgmma" / "wgmma_probe.cu").read_text()
    assert [int(v) for v in __import__("re").findall(r"^WG_KERNEL\((\d+)\)", kernels, flags=8)] == list(PROBE_NS)


# ---- the kernels compile; SASS shows the tensor-core and TMA instructions

OPCODE = {"f16": "HGMMA", "bf16": "HGMMA", "tf32": "HGMMA", "e4m3": "QGMMA", "e5m2": "QGMMA", "s8": "IGMMA",
          "u8": "IGMMA"}


# f16 in the default run; each other type is one more full NVRTC build of the probe (`-m slow`)
@pytest.mark.parametrize("t", [t if t.name == "f16" else pytest.param(t, marks=pytest.mark.slow) for t in ALL_TYPES],
                         ids=lambda t: t.name)
def test_probe_kernels_compile_to_gmma_and_utmaldg(t):
    from drvtma.runtime import compiler, sass

    cubin = compiler.compile_cubin("wgmma/wgmma_probe.cu", defines={f"DRVTMA_WGMMA_{t.name.upper()}": 1,
                                                                    "WG_T": t.name})
    # the whole shape and the accumulator: ptxas puts a dummy HGMMA.64x8x16.F16 into every module, so a bare
    # opcode prefix would pass for every type
    acc = t.name.upper() if t.name in ("s8", "u8") else "F32"
    for n in (8, 256):
        ops = sass.instructions(cubin, f"wgmma_probe_n{n}")
        want = f"{OPCODE[t.name]}.64x{n}x{32 // t.itemsize}.{acc}"
        assert any(op.startswith(want) for op in ops), (want, sorted(op for op in ops if "GMMA" in op))
        assert any(op.startswith("UTMALDG") for op in ops)
        assert "WARPGROUP.ARRIVE" in ops


@pytest.mark.slow
def test_wait_group_counts_above_7_become_7_in_sass():
    """§9 question 5: ptxas takes any non-negative wait_group N, but the SASS counter is 3 bits: N >= 7 waits as 7."""
    from drvtma.errors import NvrtcError
    from drvtma.runtime import compiler, sass

    def depbar(n):
        src = ('#include <drvtma/wgmma.cuh>\nextern "C" __global__ void k() { wgmma_fence(); wgmma_commit(); '
               f'wgmma_wait<{n}>(); }}\n')
        text = sass.disassemble(compiler.compile_cubin(src, name=f"wgmma_wait_{n}.cu"))
        return [line.split("gsb0,")[1].strip(" ;") for line in text.splitlines() if "WARPGROUP.DEPBAR" in line][0]

    assert [depbar(n) for n in (0, 1, 6, 7, 8, 63, 1024)] == ["0x0", "0x1", "0x6", "0x7", "0x7", "0x7", "0x7"]
    with pytest.raises(NvrtcError):
        depbar(-1)


def test_the_command_says_when_n_is_not_fuzzed_on_a_gpu(capsys):
    """No answer without evidence: an N the wgmma probe never runs is named as such in the answer."""
    from drvtma.cli.main import main
    from drvtma.wgmma.probe import PROBE_NS

    assert 64 not in PROBE_NS and 128 in PROBE_NS
    for n, said in ((64, True), (128, False)):
        assert main(["wgmma", "--dtype", "bf16", "--operand", "B", "--tile", f"{n}x64", "--swizzle", "128B"]) == 0
        assert ("not fuzzed on a GPU at N = 64" in capsys.readouterr().out) is said
