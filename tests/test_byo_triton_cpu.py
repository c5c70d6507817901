"""The triton strategy of kernel fuzzing against Triton's own host-side checks (TensorDescriptor.__post_init__):
it never draws a descriptor Triton refuses, and `TensorMapSpec.from_triton` reads the descriptor back."""

from __future__ import annotations

import pytest

from drvtma.fuzz.choosers import RecordingChooser, case_seed
from drvtma.fuzz.triton import DTYPES, ROW_BYTES, TRITON_SPECS, signature_pool
from drvtma.fuzz.user import MAX_EXTENT_BYTES
from drvtma.tma.dtypes import tma_dtype
from drvtma.tma.tiled.spec import TensorMapSpec
from drvtma.tma.triton import TRITON_DTYPES, is_power_of_two, triton_arguments

OPTIONS = {"max_extent_bytes": MAX_EXTENT_BYTES, "ops": ["store"]}


def _descriptors(n: int = 400, options=None):
    for i in range(n):
        yield TRITON_SPECS.descriptor(RecordingChooser(case_seed(8, i)), options or OPTIONS)


POOLED = {**OPTIONS, "signatures": 40, "signature_seed": 3}


@pytest.mark.parametrize("options", [OPTIONS, POOLED], ids=["own", "pooled"])
def test_drawn_descriptors_keep_tritons_rules_and_make_valid_maps(options):
    for d in _descriptors(options=options):
        s = d.base.dtype.itemsize
        assert 1 <= len(d.shape) <= 5 and all(is_power_of_two(b) for b in d.block_shape)
        assert d.strides[-1] == 1 and all(st * s % 16 == 0 for st in d.strides[:-1])
        assert d.block_shape[-1] * s >= 16 and min(d.shape) > 0
        assert d.padding == "zero" or d.base.dtype.is_floating_point
        spec = TensorMapSpec.from_triton(d).validate()
        assert triton_arguments(spec) == {"shape": d.shape, "strides": d.strides, "block_shape": d.block_shape,
                                          "padding": d.padding}


@pytest.mark.parametrize("options", [OPTIONS, POOLED], ids=["own", "pooled"])
def test_triton_accepts_every_drawn_descriptor(options):
    tensor_descriptor = pytest.importorskip("triton.tools.tensor_descriptor", reason="triton is not installed")
    for d in _descriptors(options=options):
        tensor_descriptor.TensorDescriptor(d.base, d.shape, d.strides, d.block_shape, d.padding)  # its asserts


def test_from_triton_reads_a_descriptor():
    from drvtma.fuzz.triton import _Base

    d = type("Desc", (), {"base": _Base("bfloat16", 2, True), "shape": [40, 100], "strides": [104, 1],
                          "block_shape": [16, 64], "padding": "nan"})()
    spec = TensorMapSpec.from_triton(d)
    assert spec.dtype.name == "bfloat16" and spec.strides_bytes == (208, 2) and spec.box == (16, 64)
    assert spec.swizzle == 3 and spec.oob_fill == 1  # 128-byte rows: 128B swizzle; NaN padding
    assert TensorMapSpec.from_triton(d, swizzle="none").swizzle == 0


def test_a_signature_pool_holds_every_type_with_every_row_width_and_serves_every_case():
    """What Triton compiles for (element type, block, padding) comes from the pool alone, which holds every type
    with every row width (so every swizzle Triton picks) and NaN padding for every float type; the same seed gives
    the same pool, another seed another."""
    pool = signature_pool(40, 3, DTYPES)
    assert len(pool) == 40 == len(set(pool)) and pool == signature_pool(40, 3, DTYPES) != signature_pool(40, 4, DTYPES)
    widths = {(name, block[-1] * tma_dtype(TRITON_DTYPES[name]).itemsize) for name, block, _ in pool}
    assert widths >= {(name, row) for name in DTYPES for row in ROW_BYTES}
    assert {name for name, _, padding in pool if padding == "nan"} == {d for d in DTYPES if d.startswith(("float", "bf"))}
    drawn = {(d.base.dtype.name, tuple(d.block_shape), d.padding) for d in _descriptors(options=POOLED)}
    assert drawn <= set(pool) and len(drawn) > 30
    assert len({(d.base.dtype.name, tuple(d.block_shape)) for d in _descriptors()}) > 100  # without: its own each


def test_a_signature_pool_is_for_the_triton_strategy_only(tmp_path):
    from drvtma.cli.main import main
    from drvtma.errors import ArgumentError
    from drvtma.fuzz.user import KERNEL_LOADS

    with pytest.raises(ArgumentError, match="signatures"):
        KERNEL_LOADS.configure(kernel="k.py:run", strategy="drvtma", signatures=8)
    with pytest.raises(ArgumentError, match="max_boxes"):
        KERNEL_LOADS.configure(kernel="k.py:run", max_boxes=0)
    for wrong in (10**9, -1, "8"):  # a pool larger than any campaign's signatures would never fill: refused
        with pytest.raises(ArgumentError, match="signatures"):
            KERNEL_LOADS.configure(kernel="k.py:run", strategy="triton", signatures=wrong)
    assert KERNEL_LOADS.configure(kernel="k.py:run", strategy="triton", signatures=8, signature_seed=5,
                                  max_boxes=64).items() >= {"signatures": 8, "signature_seed": 5, "max_boxes": 64}.items()
    assert main(["fuzz", "loads", "--signatures", "4", "--fake-device", "--out", str(tmp_path)]) == 2
