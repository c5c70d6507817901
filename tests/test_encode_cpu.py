"""encode's one-pass geometry check agrees with rules.validate_all (it may only ever be stricter, and on the specs
the strategies build it is exactly as strict), and its memo survives re-encodes. No GPU needed."""

import numpy as np
import pytest

from drvtma.testing import RngChooser, build_any_spec, build_invalid_spec, build_valid_spec
from drvtma.tma.tiled.encode import _geometry_holds
from drvtma.tma.tiled.rules import RULES, validate_all
from drvtma.tma.tiled.spec import ALL_RULES, SMEM_PER_BLOCK_OPTIN_SM90, TensorMapSpec


def _geometry_errors(spec, limit):
    return [e for e in validate_all(spec, smem_limit=limit) if e.rule != "address_alignment"]


@pytest.mark.parametrize("seed", range(4))
def test_the_quick_check_says_yes_exactly_when_validate_all_finds_nothing(seed):
    ch = RngChooser(np.random.default_rng(seed))
    seen = {True: 0, False: 0}
    for i in range(1500):
        spec = build_any_spec(ch) if i % 3 else build_invalid_spec(ch)[0]
        limit = ch.choice([SMEM_PER_BLOCK_OPTIN_SM90, 16384, 1 << 20])
        extent = _geometry_holds(spec, limit)
        errors = _geometry_errors(spec, limit)
        assert (extent is not None) == (not errors), (spec.describe(), [e.rule for e in errors])
        if extent is not None:
            assert extent == spec.extent_bytes
        seen[extent is not None] += 1
    assert seen[True] > 100 and seen[False] > 100  # both answers were exercised


def _break_more(ch, spec):
    """`spec` with one more field set to a value some rule refuses (the rank kept)."""
    def first(values, v):
        return (v,) + values[1:] if values else values

    changes = ch.choice([
        {"shape": first(spec.shape, ch.choice([0, 1 << 33]))}, {"strides_bytes": first(spec.strides_bytes, -16)},
        {"strides_bytes": first(spec.strides_bytes, 24)}, {"strides_bytes": first(spec.strides_bytes, 0)},
        {"box": spec.box[:-1] + (300,) if spec.box else ()}, {"element_strides": first(spec.element_strides, 9)},
        {"oob_fill": "nan"}, {"swizzle": ch.choice([5, "128B"])}, {"interleave": ch.choice(["32B", "16B"])},
        {"base_address": 0x7F0000000004}, {"allow_overlap": True}, {"allow_undocumented": True},
        {"dtype": "16u4_align8b", "target": ch.choice(["sm_100a", "sm_90a"])}, {"target": "sm_120a"}])
    return spec.replace(**changes)


@pytest.mark.parametrize("seed", range(2))
def test_each_rules_quick_test_says_yes_exactly_when_its_check_finds_nothing(seed):
    """Rule by rule: validate_all runs `holds` first and `broken` only on a no, so they must agree (on specs that
    break several rules too: every quick test but the form's runs there)."""
    ch = RngChooser(np.random.default_rng(100 + seed))
    seen = {rule.rules: {True: 0, False: 0} for rule in RULES}
    for i in range(1500):
        spec = build_any_spec(ch) if i % 2 else build_invalid_spec(ch)[0]
        if i % 3 == 0:
            spec = _break_more(ch, spec)
        limit = ch.choice([SMEM_PER_BLOCK_OPTIN_SM90, 16384])
        names: set = set()
        for rule in RULES:
            if names & rule.after:
                continue
            found = list(rule.broken(spec, limit))
            assert rule.holds(spec, limit) == (not found), (rule.rules, spec.describe(), [str(e) for e in found])
            assert {e.rule for e in found} <= set(rule.rules)
            seen[rule.rules][not found] += 1
            names |= {e.rule for e in found}
            if rule.stop and names:
                break
    assert all(counts[True] and counts[False] for counts in seen.values()), seen


def test_the_table_names_every_rule_once():
    names = [name for rule in RULES for name in rule.rules]
    assert len(names) == len(set(names)) and set(names) == ALL_RULES
    assert {rule.scope for rule in RULES} == {"form", "address", "layout", "box"}


def test_valid_specs_pass_the_quick_check():
    ch = RngChooser(np.random.default_rng(11))
    for _ in range(500):
        spec = build_valid_spec(ch)
        assert _geometry_holds(spec, SMEM_PER_BLOCK_OPTIN_SM90) == spec.extent_bytes, spec.describe()


@pytest.mark.parametrize("changes, rule", [
    ({"strides_bytes": (8200, 2)}, "stride_alignment"), ({"box": (64, 65)}, "box_inner_bytes"),
    ({"box": (64, 128)}, "swizzle_span"), ({"oob_fill": "nan", "dtype": "uint16"}, "nan_fill_type"),
    ({"strides_bytes": (0, 2)}, "stride_zero"), ({"element_strides": (9, 1)}, "element_stride_range"),
])
def test_a_broken_geometry_fails_both(changes, rule):
    spec = TensorMapSpec.create("bfloat16", (4096, 4096), (64, 64), swizzle="128B").replace(**changes)
    assert _geometry_holds(spec, SMEM_PER_BLOCK_OPTIN_SM90) is None
    assert rule in [e.rule for e in validate_all(spec)]


def test_an_encoded_spec_pickles_and_copies_without_its_memo():
    """encode_tiled remembers the checked geometry on the spec object (a driver struct that cannot be pickled):
    pickling or copying the spec leaves that memo behind and keeps every field."""
    import copy
    import pickle

    from drvtma.tma.tiled.encode import _geometry
    from drvtma.tma.tiled.spec import TensorMapSpec

    spec = TensorMapSpec.create("float32", (64, 256), (8, 32), base_address=1 << 20, element_strides=(2, 1))
    _geometry(spec, 232448)
    assert "_drvtma_geometry" in spec.__dict__ and spec.loaded_counts == (4, 32)  # loaded_counts: cached too
    for again in (pickle.loads(pickle.dumps(spec)), copy.deepcopy(spec), copy.copy(spec)):
        assert again == spec and set(again.__dict__) == set(spec.__dataclass_fields__)
        assert again.loaded_counts == (4, 32)
    assert spec.replace(box=(16, 32)).loaded_counts == (8, 32)  # a new spec, its own counts


@pytest.mark.parametrize("value, ok", [(3, True), (np.int64(3), True), (np.uint8(7), True), (True, False),
                                       (np.bool_(True), False), (3.0, False), ("3", False), (None, False)])
def test_the_one_integer_test_takes_python_and_numpy_ints_only(value, ok):
    """is_int's fast path for a plain int (every spec validation calls it dozens of times) changes no answer."""
    from drvtma.errors import ArgumentError, as_ints, is_int

    assert is_int(value) is ok
    if ok:
        assert as_ints((value, 2), "box") == (int(value), 2)
    else:
        with pytest.raises(ArgumentError, match=r"box\[0\]"):
            as_ints((value, 2), "box")
    plain = (1, 2, 3)
    assert as_ints(plain, "box") is plain and as_ints([1, 2], "box") == (1, 2)
