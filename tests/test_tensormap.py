"""TensorMapSpec, its validation rules and error messages (CPU only)."""

from __future__ import annotations

import json
from dataclasses import replace as dataclasses_replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drvtma.errors import TensorMapError
from drvtma.testing import DrawChooser, applicable_rules, break_rule, build_valid_spec, invalid_specs, valid_specs
from drvtma.tma import dtypes
from drvtma.tma.tiled.encode import TensorMap
from drvtma.tma.tiled.rules import driver_box_bytes, driver_should_accept, validate_all
from drvtma.tma.tiled.spec import ALL_RULES, DRIVER_RULES, Interleave, Swizzle, TensorMapSpec, to_tma_order

# ---- dtypes

def test_thirteen_dtypes_with_the_driver_enum_values():
    from cuda.bindings import driver as cu

    assert len(dtypes.ALL_DTYPES) == 13
    for d in dtypes.ALL_DTYPES:
        member = cu.CUtensorMapDataType(d.enum)
        assert member.name.endswith(d.name.upper()), (member.name, d.name)
        assert d.numpy.itemsize == d.itemsize


@pytest.mark.parametrize("value, name", [("bf16", "bfloat16"), (np.float16, "float16"), ("float8_e4m3", "uint8"),
                                         (np.int8, "int8"), ("tf32", "tfloat32"), (7, "float32"),
                                         ("CU_TENSOR_MAP_DATA_TYPE_INT64", "int64")])
def test_dtype_lookup(value, name):
    assert dtypes.tma_dtype(value).name == name


@pytest.mark.parametrize("name, signed, carrier_type", [("int8", np.int8, dtypes.UINT8), ("i8", np.int8, dtypes.UINT8),
                                                        (np.int8, np.int8, dtypes.UINT8),
                                                        ("int16", np.int16, dtypes.UINT16),
                                                        (np.int16, np.int16, dtypes.UINT16)])
def test_int8_and_int16_are_signed_views_of_the_unsigned_map_types(name, signed, carrier_type):
    """The driver has no signed 8- or 16-bit map type: int8 / int16 are accepted as what they are, a UINT8 / UINT16
    map whose bytes the load copies unchanged, and the spec, its description and the oracle keep the signed values."""
    from drvtma.tma import stores
    from drvtma.tma.tiled import decode, oracle

    spec = TensorMapSpec.create(name, (64, 128), (16, 64), base_address=1 << 20)
    dt = spec.dtype
    assert (dt.name, dt.values, dt.is_view) == (np.dtype(signed).name, np.dtype(signed), True)
    assert dt.map_type is carrier_type and dt.enum == carrier_type.enum and dt == carrier_type
    assert spec.tma_params().dtype_enum == carrier_type.enum
    text = spec.describe()
    assert f"{np.dtype(signed).name} (tensor-map type {carrier_type.enum} = {carrier_type.name.upper()}" in text
    assert "copy the bytes unchanged" in text and "does not interpret the sign" in text
    # the map is byte for byte the unsigned one: decoding it gives the map type, equal to the view
    unsigned = dataclasses_replace(spec, dtype=carrier_type)
    assert decode.encode_bytes(spec) == decode.encode_bytes(unsigned)
    assert decode.decode(decode.encode_bytes(spec))[0].dtype == dt
    assert TensorMapSpec.from_json(json.dumps(spec.to_dict())).dtype.name == dt.name
    # the oracle: the same bits, read as signed values (bytes 0x80.. are negative)
    memory = np.arange(spec.extent_bytes, dtype=np.uint64).astype(np.uint8)
    got = oracle.box_values(spec, memory, [(3, 64)])
    want = oracle.box_values(unsigned, memory, [(3, 64)])
    assert got.dtype == np.dtype(signed) and got.tobytes() == want.tobytes() and (got < 0).any()
    assert np.array_equal(oracle.load_images(spec, memory, [(3, 64)]), oracle.load_images(unsigned, memory, [(3, 64)]))
    # a store writes the signed values' bytes
    box = -np.arange(np.prod(spec.loaded_counts), dtype=signed).reshape(spec.loaded_counts)
    after = memory.copy()
    stores.apply_store(after, 0, spec, (0, 0), box)
    assert np.array_equal(after.view(signed).reshape(64, 128)[:16, :64], box)
    assert TensorMapSpec.for_array(np.zeros((64, 128), signed), (16, 64)).dtype.name == np.dtype(signed).name


@pytest.mark.parametrize("value, rule", [(16, "enum"), ("complex64", "enum")])
def test_dtype_refusals_name_the_rule(value, rule):
    with pytest.raises(TensorMapError) as info:
        dtypes.tma_dtype(value)
    assert info.value.rule == rule


def test_nan_fill_bytes_match_the_observed_patterns():
    assert dtypes.FLOAT32.nan_fill_bytes() == (0x7FF77FF7).to_bytes(4, "little")
    assert dtypes.FLOAT16.nan_fill_bytes() == (0x7FF7).to_bytes(2, "little")
    assert dtypes.BFLOAT16.nan_fill_bytes() == (0x7FF7).to_bytes(2, "little")
    with pytest.raises(ValueError):
        dtypes.INT32.nan_fill_bytes()


# ---- construction and TMA order

def test_for_array_reads_shape_strides_and_dtype():
    a = np.zeros((3, 5, 64), dtype=np.float32)[:, 1:4, :]
    spec = TensorMapSpec.for_array(a, box=(1, 2, 32))
    assert spec.shape == (3, 3, 64) and spec.strides_bytes == (5 * 64 * 4, 64 * 4, 4)
    p = spec.tma_params()
    assert p.global_dim == (64, 3, 3) and p.global_strides == (256, 1280) and p.box_dim == (32, 2, 1)
    assert p.rank == 3 and p.dtype_enum == 7


def test_for_array_with_cuda_array_interface_takes_the_address(monkeypatch):
    monkeypatch.setattr("drvtma.runtime.arrays.no_driver", lambda exc: True)  # a fake address: read the interface

    class Fake:
        __cuda_array_interface__ = {"shape": (4, 8), "typestr": "<u2", "data": (0x7F0000001000, False),
                                    "strides": None, "version": 3}

    spec = TensorMapSpec.for_array(Fake(), box=(2, 8), dtype="bf16")
    assert spec.base_address == 0x7F0000001000 and spec.dtype is dtypes.BFLOAT16
    assert spec.strides_bytes == (16, 2)


def test_from_buffer_strides_in_elements_or_bytes():
    class Buf:
        ptr, nbytes = 0x7F0000000000, 1 << 20

    a = TensorMapSpec.from_buffer(Buf(), "float16", (10, 24), (4, 8), strides=(32, 1), offset_bytes=64)
    b = TensorMapSpec.from_buffer(Buf(), "float16", (10, 24), (4, 8), strides_bytes=(64, 2), offset_bytes=64)
    assert a == b and a.base_address == Buf.ptr + 64
    with pytest.raises(ValueError):
        TensorMapSpec.create("float16", (10, 24), (4, 8), strides=(32, 1), strides_bytes=(64, 2))


def test_rank1_passes_one_dummy_stride():
    spec = TensorMapSpec.create("uint8", (100,), (16,))
    assert spec.tma_params().global_strides == (16,)


@given(st.lists(st.integers(), min_size=0, max_size=5))
def test_to_tma_order_reverses_and_is_an_involution(values):
    assert to_tma_order(values) == tuple(values[::-1])
    assert to_tma_order(to_tma_order(values)) == tuple(values)


@settings(max_examples=300)
@given(valid_specs())
def test_tma_params_are_the_reversed_spec(spec):
    p = spec.tma_params()
    assert p.global_dim[::-1] == spec.shape and p.box_dim[::-1] == spec.box
    assert p.element_strides[::-1] == spec.element_strides
    if spec.rank > 1:
        assert p.global_strides[::-1] == spec.strides_bytes[:-1]


@settings(max_examples=200)
@given(valid_specs())
def test_dict_and_json_round_trip(spec):
    assert TensorMapSpec.from_json(json.dumps(spec.to_dict())) == spec


def test_from_dict_rejects_unknown_fields():
    with pytest.raises(ValueError, match="unknown tensor-map field"):
        TensorMapSpec.from_dict({"dtype": "u8", "shape": [16], "box": [16], "swizle": "128B"})


# ---- validation properties

@settings(max_examples=1000)
@given(valid_specs())
def test_validator_accepts_every_valid_spec(spec):
    assert validate_all(spec) == []
    assert spec.validate() is spec


@settings(max_examples=1000)
@given(invalid_specs())
def test_validator_rejects_every_invalid_spec_with_its_rule(case):
    spec, rule = case
    errors = validate_all(spec)
    assert {e.rule for e in errors} == {rule}, [str(e) for e in errors]
    for e in errors:
        assert e.rule in ALL_RULES and e.parameter and e.fix
        assert e.rule in str(e) and e.fix in str(e)
    with pytest.raises(TensorMapError):
        spec.validate()


def test_every_rule_is_generated_by_the_invalid_strategy():
    """Every rule is applicable to some generated spec, and breaking it there trips exactly that rule."""
    from drvtma.testing import RngChooser, break_rule

    broken = set()
    ch = RngChooser(np.random.default_rng(0))
    for _ in range(3000):
        spec = build_valid_spec(ch)
        for rule in applicable_rules(spec):
            if rule not in broken:
                assert {e.rule for e in validate_all(break_rule(ch, spec, rule))} == {rule}
                broken.add(rule)
    assert broken == set(ALL_RULES)


@settings(max_examples=300)
@given(st.data())
def test_driver_expectation_follows_the_rule_kind(data):
    spec = data.draw(valid_specs())
    rule = data.draw(st.sampled_from(applicable_rules(spec)))
    broken = break_rule(DrawChooser(data.draw), spec, rule)
    assert driver_should_accept(validate_all(broken)) == (rule not in DRIVER_RULES)


# ---- decisions where the driver is looser than the documentation

def _matrix(**kw):
    base = dict(dtype="float32", shape=(8, 64), box=(4, 32), base_address=0x7F0000000000)
    base.update(kw)
    return TensorMapSpec.create(**base)


def test_stride_zero_is_refused_unless_overlap_is_allowed():
    spec = _matrix(strides_bytes=(0, 4))
    assert [e.rule for e in validate_all(spec)] == ["stride_zero"]
    assert validate_all(spec.replace(allow_overlap=True)) == []


def test_overlapping_rows_are_refused_unless_overlap_is_allowed():
    spec = _matrix(strides_bytes=(128, 4))  # 64 floats = 256 B rows, 128 B apart
    errors = validate_all(spec)
    assert [e.rule for e in errors] == ["strides_overlap"] and "256" in str(errors[0])
    assert validate_all(spec.replace(allow_overlap=True)) == []


def test_permuted_outer_strides_are_accepted():
    a = np.zeros((4, 6, 32), dtype=np.float32).transpose(1, 0, 2)  # strides decrease in TMA order
    spec = TensorMapSpec.for_array(a, box=(2, 2, 32))
    assert spec.tma_params().global_strides[0] > spec.tma_params().global_strides[1]
    assert validate_all(spec) == []


def test_box_larger_than_the_tensor_is_accepted_and_described():
    spec = _matrix(shape=(2, 8), box=(16, 32))
    assert validate_all(spec) == []
    assert "larger than the tensor" in spec.describe()


def test_interleave_32b_needs_swizzle_32b_unless_undocumented_is_allowed():
    spec = TensorMapSpec.create("float16", (4, 8, 16), (1, 2, 16), interleave="32B", swizzle="128B",
                                base_address=0x7F0000000000)
    assert [e.rule for e in validate_all(spec)] == ["interleave_swizzle"]
    assert validate_all(spec.replace(allow_undocumented=True)) == []
    assert validate_all(spec.replace(swizzle=Swizzle.B32)) == []


# ---- error messages

def test_row_stride_message_names_the_padding():
    spec = _matrix(shape=(4, 250), strides_bytes=(1000, 4), box=(2, 32))
    (err,) = validate_all(spec)
    assert err.rule == "stride_alignment" and err.parameter == "strides_bytes[0]" and err.value == 1000
    assert "1000 B" in str(err) and "1008 B = 252 float32" in err.fix


def test_inner_box_message_offers_nearby_sizes():
    (err,) = validate_all(_matrix(box=(4, 5)))
    assert err.rule == "box_inner_bytes" and err.parameter == "box[1]"
    assert "4 or 8" in err.fix and "20 B" in str(err)


def test_swizzle_span_message_gives_the_largest_box():
    (err,) = validate_all(_matrix(box=(4, 64), swizzle="64B"))
    assert err.rule == "swizzle_span" and "<= 16 float32" in err.fix


def test_address_message_gives_an_aligned_address():
    (err,) = validate_all(_matrix(base_address=0x7F0000000008))
    assert err.rule == "address_alignment" and "0x7f0000000010" in err.fix


def test_nan_fill_message():
    (err,) = validate_all(_matrix(dtype="int32", oob_fill="nan"))
    assert err.rule == "nan_fill_type" and "zero" in err.fix


def test_blackwell_swizzle_is_refused_by_name_for_sm90():
    (err,) = validate_all(_matrix(swizzle=5))
    assert err.rule == "needs_swizzle_atoms" and "the target is sm_90a" in str(err) and "sm_100a" in err.fix


def test_box_bytes_is_the_drivers_rule_and_smem_budget_drvtmas():
    spec = TensorMapSpec.create("float32", (256, 256, 256), (256, 256, 4), base_address=0x7F0000000000)
    (err,) = validate_all(spec)  # 256 KiB of data: the driver refuses it, so smem_budget is not reported as well
    assert err.rule == "box_bytes" and str(233472) in str(err)
    assert "box_bytes" in DRIVER_RULES and not driver_should_accept([err])
    # The float64 boxes the H200's driver accepted (229,376 B) and refused (245,760 B).
    accepted = TensorMapSpec.create("float64", (256, 256, 32), (14, 64, 32), base_address=0x7F0000000000)
    refused = accepted.replace(box=(15, 64, 32))
    assert accepted.smem_bytes == 229376 and validate_all(accepted) == []
    assert refused.smem_bytes == 245760 and [e.rule for e in validate_all(refused)] == ["box_bytes"]
    # Between the block's 227 KiB and the driver's 228 KiB: the map encodes, no block can hold the box.
    between = TensorMapSpec.create("uint8", (228, 32, 32), (228, 32, 32))
    (err,) = validate_all(between)
    assert err.rule == "smem_budget" and "smem_budget" not in DRIVER_RULES and driver_should_accept([err])
    # A tighter budget of one's own (several stages in one block).
    assert [e.rule for e in validate_all(accepted, smem_limit=96 * 1024)] == ["smem_budget"]


def test_driver_box_bytes_counts_the_dim0_element_stride_and_no_padding():
    halved = TensorMapSpec.create("uint8", (227, 64, 32), (227, 64, 32), element_strides=(1, 1, 2))
    assert driver_box_bytes(halved) == 232448 and halved.smem_bytes == 464896
    assert [e.rule for e in validate_all(halved)] == ["smem_budget"]


def test_smem_budget_counts_loaded_elements_and_the_padded_pitch():
    # boxDim product 8 MiB, but element strides 8 load 32 x 32 rows of 128 B: accepted (as the driver did).
    strided = TensorMapSpec.create("float32", (256, 256, 32), (256, 256, 32), element_strides=(8, 8, 1))
    assert strided.smem_bytes == 32 * 32 * 128 and validate_all(strided) == []
    # 16 B rows padded to a 128 B pitch by the swizzle: 2048 rows x 128 B = 256 KiB.
    padded = TensorMapSpec.create("float32", (8, 256, 4), (8, 256, 4), swizzle="128B")
    assert padded.smem_bytes == 262144 and [e.rule for e in validate_all(padded)] == ["smem_budget"]


def test_interleave_rank_rule():
    spec = TensorMapSpec.create("float16", (8, 16), (2, 8), interleave="16B")
    assert [e.rule for e in validate_all(spec)] == ["interleave_rank"]


def test_validate_all_lists_every_broken_rule():
    spec = _matrix(shape=(4, 250), strides_bytes=(1000, 4), box=(300, 5), base_address=0x7F0000000004)
    rules = [e.rule for e in validate_all(spec)]
    assert rules == ["address_alignment", "stride_alignment", "box_range", "box_inner_bytes"]


# ---- geometry

def test_geometry_with_element_strides_and_swizzle():
    spec = TensorMapSpec.create("float16", (64, 64, 64), (5, 7, 32), element_strides=(2, 3, 4), swizzle="128B")
    assert spec.loaded_counts == (3, 3, 32)  # dim 0's element stride is ignored without interleave
    assert spec.expect_tx_bytes == 3 * 3 * 32 * 2
    assert spec.row_pitch_bytes == 128 and spec.smem_bytes == 9 * 128


# ---- TensorMap host buffer (no GPU: built from a fake encoded map)

class _FakeEncoded:
    def __init__(self):
        self.raw = np.arange(128, dtype=np.uint8)

    def getPtr(self):
        return self.raw.ctypes.data


def test_tensor_map_owns_128_aligned_bytes():
    spec = _matrix()
    maps = [TensorMap(_FakeEncoded(), spec.tma_params(), 0x7F0000000000, spec=spec) for _ in range(8)]
    for m in maps:
        address, size = m.__drvtma_param__()
        assert size == 128 and address % 128 == 0 and address == m.host_address
        assert m.to_bytes() == bytes(range(128))
        assert "TensorMap at global 0x7f0000000000" in str(m)


def test_replace_address_checks_alignment_before_the_driver():
    spec = _matrix()
    m = TensorMap(_FakeEncoded(), spec.tma_params(), 0x7F0000000000, spec=spec)
    with pytest.raises(TensorMapError) as info:
        m.replace_address(0x7F0000000008)
    assert info.value.rule == "address_alignment"


def test_replace_address_checks_the_buffer_size():
    class Small:
        ptr, nbytes = 0x7F0000100000, 64

    spec = _matrix()
    m = TensorMap(_FakeEncoded(), spec.tma_params(), 0x7F0000000000, spec=spec)
    with pytest.raises(TensorMapError) as info:
        m.replace_address(Small())
    assert info.value.rule == "buffer_bounds"


def test_interleave_enum_names_parse():
    spec = TensorMapSpec.create("u8", (4, 4, 32), (1, 1, 32), interleave="16b", swizzle="none", l2_promotion="256B")
    assert spec.interleave is Interleave.B16 and spec.l2_promotion == 3


# ---- drvtma check

def test_check_command_reports_rules_and_exit_codes(capsys):
    from drvtma.cli.check import check_command

    assert check_command(["--dtype", "f32", "--shape", "4,250", "--box", "2,32", "--strides-bytes", "1000,4"]) == 1
    out = capsys.readouterr().out
    assert "stride_alignment" in out and "1008 B = 252 float32" in out and "globalDim [250, 4]" in out
    assert check_command(["--json", '{"dtype": "bf16", "shape": [64, 64], "box": [16, 64], "swizzle": "128B"}']) == 0
    assert "valid" in capsys.readouterr().out
    from drvtma.cli.main import main

    assert main(["check", "--dtype", "nope", "--shape", "4", "--box", "16"]) == 2  # a usage error: one line
    assert capsys.readouterr().err.count("\n") == 1
    # a stride flag replaces the JSON's strides in the other unit, whichever way round
    json_elems = '{"dtype": "f32", "shape": [4, 256], "box": [2, 32], "strides": [256, 1]}'
    assert check_command(["--json", json_elems, "--strides-bytes", "1000,4"]) == 1
    assert "stride_alignment" in capsys.readouterr().out
    json_bytes = '{"dtype": "f32", "shape": [4, 256], "box": [2, 32], "strides_bytes": [1000, 4]}'
    assert check_command(["--json", json_bytes, "--strides", "256,1"]) == 0
