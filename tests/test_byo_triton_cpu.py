"""The triton strategy of kernel fuzzing against Triton's own host-side checks (TensorDescriptor.__post_init__):
it never draws a descriptor Triton refuses, and `TensorMapSpec.from_triton` reads the descriptor back."""

from __future__ import annotations

import pytest

from drvtma.fuzz.choosers import RecordingChooser, case_seed
from drvtma.fuzz.triton import TRITON_SPECS
from drvtma.fuzz.user import MAX_EXTENT_BYTES
from drvtma.tma.tiled.spec import TensorMapSpec
from drvtma.tma.triton import is_power_of_two, triton_arguments

OPTIONS = {"max_extent_bytes": MAX_EXTENT_BYTES, "ops": ["store"]}


def _descriptors(n: int = 400):
    for i in range(n):
        yield TRITON_SPECS.descriptor(RecordingChooser(case_seed(8, i)), OPTIONS)


def test_drawn_descriptors_keep_tritons_rules_and_make_valid_maps():
    for d in _descriptors():
        s = d.base.dtype.itemsize
        assert 1 <= len(d.shape) <= 5 and all(is_power_of_two(b) for b in d.block_shape)
        assert d.strides[-1] == 1 and all(st * s % 16 == 0 for st in d.strides[:-1])
        assert d.block_shape[-1] * s >= 16 and min(d.shape) > 0
        assert d.padding == "zero" or d.base.dtype.is_floating_point
        spec = TensorMapSpec.from_triton(d).validate()
        assert triton_arguments(spec) == {"shape": d.shape, "strides": d.strides, "block_shape": d.block_shape,
                                          "padding": d.padding}


def test_triton_accepts_every_drawn_descriptor():
    tensor_descriptor = pytest.importorskip("triton.tools.tensor_descriptor", reason="triton is not installed")
    for d in _descriptors():
        tensor_descriptor.TensorDescriptor(d.base, d.shape, d.strides, d.block_shape, d.padding)  # its asserts


def test_from_triton_reads_a_descriptor():
    from drvtma.fuzz.triton import _Base

    d = type("Desc", (), {"base": _Base("bfloat16", 2, True), "shape": [40, 100], "strides": [104, 1],
                          "block_shape": [16, 64], "padding": "nan"})()
    spec = TensorMapSpec.from_triton(d)
    assert spec.dtype.name == "bfloat16" and spec.strides_bytes == (208, 2) and spec.box == (16, 64)
    assert spec.swizzle == 3 and spec.oob_fill == 1  # 128-byte rows: 128B swizzle; NaN padding
    assert TensorMapSpec.from_triton(d, swizzle="none").swizzle == 0
