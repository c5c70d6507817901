"""encode's one-pass geometry check agrees with rules.validate_all (it may only ever be stricter, and on the specs
the strategies build it is exactly as strict), and its memo survives re-encodes. No GPU needed."""

import numpy as np
import pytest

from drvtma.tma.encode import _geometry_holds
from drvtma.tma.rules import validate_all
from drvtma.tma.spec import SMEM_PER_BLOCK_OPTIN_SM90, TensorMapSpec
from drvtma.testing import RngChooser, build_any_spec, build_invalid_spec, build_valid_spec


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

    from drvtma.tma.encode import _geometry
    from drvtma.tma.spec import TensorMapSpec

    spec = TensorMapSpec.create("float32", (64, 256), (8, 32), base_address=1 << 20)
    _geometry(spec, 232448)
    assert "_drvtma_geometry" in spec.__dict__
    for again in (pickle.loads(pickle.dumps(spec)), copy.deepcopy(spec), copy.copy(spec)):
        assert again == spec and "_drvtma_geometry" not in again.__dict__
