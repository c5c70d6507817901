"""Blackwell's map rules on the CPU: each rule's edges on both sides, a spec's target (JSON, default, bad text), the
decoder's reading of the new fields, the command line, stores, shared alignment and gather4 / scatter4 maps."""

from __future__ import annotations

import json

import numpy as np
import pytest

import drvtma.tma.tiled.decode as D
from drvtma.errors import TensorMapError
from drvtma.runtime import driver
from drvtma.tma import stores as S
from drvtma.tma.dtypes import PACKED_DTYPES, tma_dtype
from drvtma.tma.tiled.blackwell_rules import check_smem_destination, gather4_values, smem_alignment, validate_gather4
from drvtma.tma.tiled.encode import _geometry_holds
from drvtma.tma.tiled.rules import validate_all
from drvtma.tma.tiled.spec import DRIVER_RULES, TensorMapSpec

BASE = 0x7F0000000000
PACKED = [d.name for d in PACKED_DTYPES]


def packed(dtype="16u4_align8b", shape=(64, 256), box=(16, 128), target="sm_100a", **options):
    return TensorMapSpec.create(dtype, shape, box, target=target, base_address=BASE, **options)


def rules(spec) -> set[str]:
    return {e.rule for e in validate_all(spec)}


# ---------------------------------------------------------------------------------------------- types and targets

@pytest.mark.parametrize("value, name", [(13, "16u4_align8b"), (14, "16u4_align16b"), (15, "16u6_align16b"),
                                         ("CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B", "16u4_align8b")])
def test_packed_types_by_enum_and_driver_name(value, name):
    dt = tma_dtype(value)
    assert dt.name == name and dt.packed and dt.bits in (4, 6) and not dt.is_float


@pytest.mark.parametrize("dtype", PACKED)
@pytest.mark.parametrize("target", ["sm_100a", "sm_103a", "sm_120a", "sm_100"])
def test_a_valid_packed_map_holds_on_every_blackwell_target(dtype, target):
    for swizzle in ("none", "128B"):
        assert validate_all(packed(dtype, target=target, swizzle=swizzle)) == []


@pytest.mark.parametrize("dtype", PACKED)
def test_an_sm90_target_refuses_packed_types_naming_the_arch(dtype):
    (e,) = validate_all(packed(dtype, target="sm_90a"))
    assert e.rule == "needs_subbyte_maps" and e.rule in DRIVER_RULES
    assert f"{dtype.upper()} needs sm_100a, sm_103a or sm_120a; the target is sm_90a" in str(e)
    assert "target='sm_100a'" in e.fix and "uint8" in e.fix


@pytest.mark.parametrize("swizzle", [4, 5, 6, "128B_ATOM_32B", "128b_atom_32b_flip_8b", "B128_ATOM_64B"])
def test_swizzle_atoms_need_blackwell(swizzle):
    spec = TensorMapSpec.create("bf16", (64, 64), (16, 64), swizzle=swizzle, base_address=BASE)
    assert spec.swizzle_span_bytes == 128
    (e,) = validate_all(spec.replace(target="sm_90a"))
    assert e.rule == "needs_swizzle_atoms" and "the target is sm_90a" in str(e) and "SWIZZLE_128B" in e.fix
    assert validate_all(spec.replace(target="sm_120a")) == []
    assert rules(spec.replace(target="sm_100a", box=(16, 128))) == {"swizzle_span"}  # a 256-B row: 128-B span


def test_default_target_is_sm90a_without_a_context_and_the_devices_with_one(monkeypatch):
    spec = packed(target=None)
    monkeypatch.setattr(driver, "current_target", lambda: None)  # as without a GPU, even where one is open
    assert rules(spec) == {"needs_subbyte_maps"}
    monkeypatch.setattr(driver, "current_target", lambda: "sm_120a")
    assert validate_all(spec) == []


@pytest.mark.parametrize("text, target", [("sm_100a", "sm_100a"), (" SM_120A ", "sm_120a"), ("sm_90a", "sm_90a")])
def test_target_text_is_normalised_and_round_trips_through_json(text, target):
    spec = packed(target=text)
    assert spec.target == target and spec.to_dict()["target"] == target
    assert TensorMapSpec.from_json(json.dumps(spec.to_dict())) == spec
    assert "target" not in TensorMapSpec.create("f16", (8, 8), (8, 8)).to_dict()


@pytest.mark.parametrize("bad", ["sm_75", "sm_80a", "hopper", "sm_", 90, ""])
def test_bad_targets_are_refused_by_name(bad):
    with pytest.raises(TensorMapError) as info:
        packed(target=bad)
    assert info.value.rule == "target" and info.value.parameter == "target"


# ---------------------------------------------------------------------------------------------- each rule's edges

@pytest.mark.parametrize("n, ok", [(128, True), (256, True), (1024, True), (192, False), (320, False)])
def test_packed_dim_edges(n, ok):
    spec = TensorMapSpec.create("16u4_align16b", (n,), (128,), target="sm_100a", base_address=BASE)
    assert rules(spec) == (set() if ok else {"packed_dim"})


@pytest.mark.parametrize("box, ok", [(128, True), (127, False), (129, False), (64, False), (256, False)])
def test_packed_box_edges(box, ok):
    assert rules(packed(box=(16, box))) == (set() if ok else {"packed_box"})


@pytest.mark.parametrize("swizzle, broken", [("none", set()), ("128B", set()), ("64B", {"packed_swizzle",
                                              "swizzle_span"}), ("128B_atom_64B", {"packed_swizzle"}),
                                             ("128B_atom_32B_flip_8B", {"packed_swizzle"})])
def test_packed_swizzle_edges(swizzle, broken):
    assert rules(packed(swizzle=swizzle)) == broken


@pytest.mark.parametrize("offset, ok", [(0, True), (32, True), (64, True), (16, False), (48, False)])
def test_packed_address_is_32_byte_aligned(offset, ok):
    assert rules(packed().replace(base_address=BASE + offset)) == (set() if ok else {"address_alignment"})
    assert validate_all(TensorMapSpec.create("u8", (64, 256), (16, 128), base_address=BASE + 16)) == []


@pytest.mark.parametrize("stride, ok", [(128, True), (160, True), (144, False), (176, False)])
def test_packed_strides_are_32_byte_multiples(stride, ok):
    errors = validate_all(packed(shape=(64, 256), strides_bytes=(stride, 1)))
    assert {e.rule for e in errors} == (set() if ok else {"stride_alignment"})
    if not ok:
        assert "32 B (16u4_align8b)" in str(errors[0]) and "values" in errors[0].fix


def test_packed_types_take_no_nan_fill():
    (e,) = validate_all(packed(oob_fill="nan"))
    assert e.rule == "nan_fill_type"


def test_packed_geometry_counts_bits():
    u4, u6 = packed("16u4_align8b"), packed("16u6_align16b")
    assert u4.strides_bytes == (128, 1) and u6.strides_bytes == (192, 1)
    assert (u4.extent_bytes, u6.extent_bytes) == (64 * 128, 63 * 192 + 192)
    assert packed("16u4_align8b").row_pitch_bytes == 64 and packed("16u4_align16b").row_pitch_bytes == 128
    assert packed("16u4_align8b").expect_tx_bytes == 16 * 64  # unconfirmed on a GPU
    assert TensorMapSpec.create("16u4_align8b", (4, 256), (1, 128), strides=(512, 1)).strides_bytes == (256, 1)


def test_encode_quick_path_follows_the_target():
    limit = 232448
    assert _geometry_holds(packed(target="sm_90a"), limit) is None
    assert _geometry_holds(packed(), limit) == packed().extent_bytes
    assert _geometry_holds(packed(box=(16, 64)), limit) is None
    hopper = TensorMapSpec.create("f16", (64, 64), (16, 64), swizzle="128B")
    assert _geometry_holds(hopper, limit) == hopper.extent_bytes


# ---------------------------------------------------------------------------------------------- stores, shared memory

def test_stores_and_reductions_of_packed_types():
    S.check_store_spec(packed("16u4_align8b"))
    S.check_store_spec(packed("16u6_align16b"))
    for dtype, op in (("16u4_align16b", "store"), ("16u4_align8b", "add"), ("16u6_align16b", "min")):
        with pytest.raises(TensorMapError) as info:
            S.check_store_spec(packed(dtype), op)
        assert info.value.rule == "packed_store"


@pytest.mark.parametrize("target, swizzle, align", [("sm_100a", "128B", 1024), ("sm_120a", "128B_atom_64B", 1024),
                                                    ("sm_100a", "64B", 128), ("sm_90a", "128B", 128)])
def test_smem_alignment_of_128b_swizzles(target, swizzle, align):
    spec = TensorMapSpec.create("bf16", (64, 64), (16, 32), swizzle=swizzle, target=target)
    assert smem_alignment(spec) == align
    check_smem_destination(spec, 4096)
    if align == 1024:
        with pytest.raises(TensorMapError, match="smem_swizzle_alignment"):
            check_smem_destination(spec, 4096 + 128)
    else:
        check_smem_destination(spec, 4096 + 128)


# ---------------------------------------------------------------------------------------------- gather4, scatter4

def test_gather4_and_scatter4_rules():
    spec = TensorMapSpec.create("f32", (64, 256), (1, 64), target="sm_100a")
    assert validate_gather4(spec) == [] and validate_gather4(spec, scatter=True) == []
    assert [e.rule for e in validate_gather4(spec.replace(target="sm_120a"), scatter=True)] == ["needs_scatter4"]
    assert validate_gather4(spec.replace(target="sm_120a")) == []
    (e,) = validate_gather4(spec.replace(target="sm_90a"))
    assert e.rule == "needs_gather4" and "the target is sm_90a" in str(e)
    assert [e.rule for e in validate_gather4(spec.replace(box=(2, 64)))] == ["gather4_box"]
    three = TensorMapSpec.create("f32", (2, 64, 256), (1, 1, 64), target="sm_100a")
    assert [e.rule for e in validate_gather4(three, scatter=True)] == ["scatter4_rank"]


def test_gather4_oracle_moves_the_four_named_rows():
    tensor = np.arange(8 * 32, dtype=np.uint32).reshape(8, 32)
    spec = TensorMapSpec.create("u32", (8, 32), (1, 16), target="sm_100a")
    got = gather4_values(spec, tensor.view(np.uint8), 8, [7, 0, 7, 9])
    assert got.shape == (4, 16)
    assert (got[0] == tensor[7, 8:24]).all() and (got[1] == tensor[0, 8:24]).all() and (got[2] == got[0]).all()
    assert (got[3] == 0).all()  # row 9 is outside the tensor: the fill
    edge = gather4_values(spec, tensor.view(np.uint8), 24, [1, 2, 3, 4])
    assert (edge[:, :8] == tensor[1:5, 24:]).all() and (edge[:, 8:] == 0).all()
    with pytest.raises(TensorMapError, match="gather4_rows"):
        gather4_values(spec, tensor.view(np.uint8), 0, [1, 2, 3])
    with pytest.raises(TensorMapError, match="needs_gather4"):
        gather4_values(spec.replace(target="sm_90a"), tensor.view(np.uint8), 0, [1, 2, 3, 4])


# ---------------------------------------------------------------------------------------------- decoder

def test_decoder_reads_bits_85_86_and_refuses_unknown_layouts():
    spec = TensorMapSpec.create("f16", (64, 64), (16, 64), base_address=1 << 20)
    v = int.from_bytes(D.encode_bytes(spec), "little")
    f = D.fields((v | 1 << 85 | 1 << 86).to_bytes(128, "little"))
    assert (f.small_tensor_bit, f.swizzle_atomicity_bit) == (1, 1)
    for code in (11, 13, 14, 15):
        with pytest.raises(TensorMapError, match="packed element types: not known") as info:
            D.decode(D.put(v, D.ELEMTYPE, code).to_bytes(128, "little"))
        assert info.value.rule == "decode_elemtype"
    with pytest.raises(TensorMapError, match="decode_unknown_layout") as info:
        D.encode_bytes(packed())
    assert D.UNKNOWN_LAYOUT["packed element types"] in str(info.value)
    with pytest.raises(TensorMapError, match="swizzle atoms: not known"):
        D.encode_bytes(TensorMapSpec.create("bf16", (64, 64), (16, 64), swizzle=5, target="sm_100a",
                                            base_address=BASE))
    assert set(D.UNKNOWN_LAYOUT) == {"packed element types", "swizzle atoms", "96B swizzle"}


# ---------------------------------------------------------------------------------------------- command line

ARGS = ["--dtype", "16u4_align8b", "--shape", "64,256", "--box", "16,128", "--swizzle", "128B"]


def test_check_answers_for_a_blackwell_target_on_a_cpu(capsys):
    from drvtma.cli.main import main

    assert main(["check", "--target", "sm_100a", *ARGS]) == 0
    assert "target sm_100a" in capsys.readouterr().out
    assert main(["check", "--target", "sm_100a", *ARGS[:-1], "64B", "--box", "16,64"]) == 1
    out = capsys.readouterr().out
    assert "[packed_box]" in out and "[packed_swizzle]" in out and "fix: use box[1] = 128" in out
    assert main(["check", "--target", "sm_90a", *ARGS]) == 1
    out = capsys.readouterr().out
    assert "16U4_ALIGN8B needs sm_100a, sm_103a or sm_120a; the target is sm_90a" in out
    assert main(["check", *ARGS]) == 1 and "needs_subbyte_maps" in capsys.readouterr().out  # no GPU: sm_90a


@pytest.mark.parametrize("bad", ["sm_999x", "sm_75", "blackwell"])
def test_check_refuses_an_unknown_target_in_one_line(capsys, bad):
    from drvtma.cli.main import main

    assert main(["check", "--target", bad, *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--target" in err and bad in err
