"""Arrays from the ecosystem as tensor-map specs (drvtma.tma.arrays), with fake exporters: no GPU needed."""

import ml_dtypes
import numpy as np
import pytest

from drvtma.errors import TensorMapError
from drvtma.tma.arrays import array_layout
from drvtma.tma.dtypes import BFLOAT16, FLOAT16, FLOAT32, UINT8, tma_dtype
from drvtma.tma.tiled.encode import _resolve_target
from drvtma.tma.tiled.spec import TensorMapSpec

from support.fake_arrays import (
    DL_BFLOAT,
    DL_COMPLEX,
    DL_CPU,
    DL_FLOAT,
    DL_FLOAT8_E4M3FN,
    DL_FLOAT8_E5M2,
    DL_INT,
    FakeCAI,
    FakeDLPack,
)

ADDRESS = 0x7F0000100000


@pytest.fixture()
def without_a_driver(monkeypatch):
    """As on a machine with no driver, even where there is one: a fake CAI address is no pointer cuda.core can
    query (on a GPU machine it refuses it), so the interface itself is read."""
    monkeypatch.setattr("drvtma.runtime.arrays.no_driver", lambda exc: True)


@pytest.mark.parametrize("code, bits, dtype, tma, values", [
    (DL_BFLOAT, 16, "bfloat16", BFLOAT16, ml_dtypes.bfloat16),
    (DL_FLOAT, 16, "float16", FLOAT16, np.float16),
    (DL_FLOAT, 32, "float32", FLOAT32, np.float32),
    (DL_FLOAT8_E4M3FN, 8, "float8_e4m3fn", UINT8, ml_dtypes.float8_e4m3fn),
    (DL_FLOAT8_E5M2, 8, "float8_e5m2", UINT8, ml_dtypes.float8_e5m2),
    (DL_INT, 8, "int8", UINT8, np.int8),
])
def test_a_dlpack_device_array_gives_its_type_layout_and_address(code, bits, dtype, tma, values):
    itemsize = bits // 8
    arr = FakeDLPack(ADDRESS, (48, 64), (256, 2), code, bits)  # every other column of a 48 x 256 tensor
    layout = array_layout(arr)
    assert layout.dtype == np.dtype(values) and layout.dtype.name == dtype
    assert layout.shape == (48, 64) and layout.strides_bytes == (256 * itemsize, 2 * itemsize)
    assert layout.address == ADDRESS
    assert layout.extent_bytes == 47 * 256 * itemsize + 63 * 2 * itemsize + itemsize
    spec = TensorMapSpec.for_array(arr, (16, 32))
    assert spec.dtype == tma and spec.base_address == ADDRESS
    assert spec.strides_bytes == (256 * itemsize, 2 * itemsize)


def test_a_contiguous_dlpack_array_gets_c_strides():
    spec = TensorMapSpec.for_array(FakeDLPack(ADDRESS, (4, 8, 32), None, DL_BFLOAT, 16), (2, 8, 32))
    assert spec.strides_bytes == (8 * 32 * 2, 32 * 2, 2) and spec.dtype == BFLOAT16


def test_a_host_dlpack_array_gives_no_address():
    spec = TensorMapSpec.for_array(FakeDLPack(ADDRESS, (8, 16), None, DL_FLOAT, 32, device=(DL_CPU, 0)), (8, 16))
    assert spec.base_address is None and spec.dtype == FLOAT32


def test_a_type_no_tensor_map_has_is_refused_naming_it():
    with pytest.raises(TensorMapError, match=r"\[enum\] dtype"):
        TensorMapSpec.for_array(FakeDLPack(ADDRESS, (8, 16), None, DL_COMPLEX, 64), (8, 16))


def test_cuda_array_interface_without_a_driver_reads_the_interface(without_a_driver):
    arr = FakeCAI(ADDRESS, (32, 100), "<f4", strides=(512, 4))
    spec = TensorMapSpec.for_array(arr, (8, 16))
    assert (spec.dtype, spec.shape, spec.strides_bytes, spec.base_address) == (FLOAT32, (32, 100), (512, 4), ADDRESS)


def test_cuda_array_interface_bf16_needs_a_name_and_takes_one(without_a_driver):
    arr = FakeCAI(ADDRESS, (32, 64), "<V2")  # what torch's bf16 tensors say there
    with pytest.raises(TensorMapError, match="cannot say bf16 or fp8"):
        TensorMapSpec.for_array(arr, (8, 16))
    spec = TensorMapSpec.for_array(arr, (8, 16), dtype="bfloat16")
    assert spec.dtype == BFLOAT16 and spec.strides_bytes == (128, 2)
    with pytest.raises(ValueError, match="does not match"):
        TensorMapSpec.for_array(arr, (8, 16), dtype="float32")


def test_numpy_arrays_give_host_layouts_with_ml_dtypes_types():
    a = np.zeros((16, 64), dtype=ml_dtypes.bfloat16)[:, 8:]
    spec = TensorMapSpec.for_array(a, (8, 16))
    assert spec.dtype == BFLOAT16 and spec.base_address is None and spec.strides_bytes == (128, 2)
    assert TensorMapSpec.for_array(np.zeros(64, dtype=ml_dtypes.float8_e4m3fn), (16,)).dtype == UINT8


def test_values_show_the_carrier_bits_as_ml_dtypes_types():
    bits = np.array([0x3F80, 0xC040, 0x7F80], dtype=np.uint16)
    vals = BFLOAT16.as_values(bits)
    assert vals.dtype == ml_dtypes.bfloat16 and vals.astype(np.float32).tolist() == [1.0, -3.0, np.inf]
    assert np.shares_memory(vals, bits)  # raw bits stay available
    assert tma_dtype(ml_dtypes.bfloat16) is BFLOAT16 and tma_dtype(np.dtype(ml_dtypes.float8_e5m2)) is UINT8
    with pytest.raises(TensorMapError, match="Blackwell"):
        tma_dtype(ml_dtypes.int4)


def test_an_array_is_an_encode_target_bounded_by_its_extent():
    arr = FakeDLPack(ADDRESS, (48, 64), None, DL_BFLOAT, 16)
    address, keep, available = _resolve_target(None, arr)
    assert (address, keep, available) == (ADDRESS, arr, 48 * 64 * 2)
    with pytest.raises(TensorMapError, match="host memory"):
        _resolve_target(None, FakeDLPack(ADDRESS, (4,), None, DL_FLOAT, 32, device=(DL_CPU, 0)))


def test_fp8_is_recognised_by_the_exporters_own_type_name():
    """Where cuda.core names neither the DLPack code nor the type, the exporter's dtype name (torch.float8_e5m2)."""
    from drvtma.runtime.arrays import DLPackOnly

    arr = FakeDLPack(ADDRESS, (16, 64), None, 99, 8)  # a code no cuda.core knows
    arr.dtype = "torch.float8_e5m2"
    layout = array_layout(DLPackOnly(arr))
    assert layout.dtype == np.dtype(ml_dtypes.float8_e5m2) and layout.address == ADDRESS
    assert TensorMapSpec.for_array(arr, (16, 64)).dtype == UINT8
    nameless = FakeDLPack(ADDRESS, (16, 64), None, 99, 8)
    with pytest.raises(TypeError, match="cannot name its element type"):
        array_layout(nameless)


def test_fp8_comes_from_the_dlpack_capsule_whatever_cuda_core_says():
    """The type code is read from the exporter's own capsule (dlpack.h's DLDataType), not from cuda.core's words."""
    from types import SimpleNamespace

    from drvtma.runtime.arrays import dlpack_dtype
    from drvtma.tma.arrays import _view_dtype

    arr = FakeDLPack(ADDRESS, (16, 64), None, DL_FLOAT8_E5M2, 8)
    assert dlpack_dtype(arr) == (DL_FLOAT8_E5M2, 8, 1)
    assert dlpack_dtype(np.zeros(4, np.int16)) == (DL_INT, 16, 1)  # a host exporter: asked with no stream
    assert dlpack_dtype(object()) is None

    class Wordless:
        @property
        def dtype(self):
            raise TypeError("a message with no code in it")

    assert _view_dtype(Wordless(), arr) == np.dtype(ml_dtypes.float8_e5m2)
    with pytest.raises(TypeError, match="cannot name its element type"):
        _view_dtype(Wordless(), SimpleNamespace(__dlpack__=None))
