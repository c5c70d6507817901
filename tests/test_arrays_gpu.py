"""Tensor maps for the ecosystem's arrays on the GPU: torch (bf16, fp8, a strided view), CuPy and a cuda.core buffer,
each through `TensorMapSpec.for_array` and encoded for the array itself; every probe image must match the oracle bit
for bit, and the oracle's values (as ml_dtypes types) must be the framework's own. JAX is not here: its __dlpack__
refuses DLPack's "no synchronization" stream (-1) with CUDA_ERROR_INVALID_HANDLE on the H200 image (jax 0.11.2)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from drvtma.tma.dtypes import BFLOAT16, UINT8
from drvtma.tma.tiled.oracle import box_values
from drvtma.tma.tiled.probe import LoadProbe, check_loads
from drvtma.tma.tiled.spec import TensorMapSpec

pytestmark = pytest.mark.gpu

COORDS = [(0, 0), (8, 32), (40, 64), (-4, -16), (60, 80)]  # in and out of bounds


@pytest.fixture(scope="module")
def probe(ctx):
    p = LoadProbe()
    yield p
    p.close()


def _check(probe, arr, host_bytes: np.ndarray, box, **options) -> TensorMapSpec:
    """for_array -> encode for the array -> probe; images compared with the oracle over the array's bytes."""
    spec = TensorMapSpec.for_array(arr, box, **options)
    result = check_loads(spec, host_bytes, COORDS, target=arr, probe=probe)
    assert result.ok, result.report
    return spec


@pytest.fixture(scope="module")
def torch(ctx):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch


def test_torch_bf16_tensor(probe, torch):
    t = torch.randn(64, 96, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    raw = t.view(torch.int16).cpu().numpy().view(np.uint8)
    spec = _check(probe, t, raw, (16, 64), swizzle="128B")
    assert spec.dtype == BFLOAT16 and spec.base_address == t.data_ptr()
    got = BFLOAT16.as_values(box_values(spec, raw, [(8, 32)]))[0]
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), t[8:24, 32:96].float().cpu().numpy())


def test_torch_float8_e4m3fn_tensor(probe, torch):
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    t = (torch.randn(64, 128, device="cuda") * 4).to(torch.float8_e4m3fn)
    torch.cuda.synchronize()
    raw = t.view(torch.uint8).cpu().numpy()
    spec = _check(probe, t, raw, (16, 64), swizzle="64B")
    assert spec.dtype == UINT8  # fp8 travels in a uint8 map
    got = box_values(spec, raw, [(8, 32)])[0].view(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(got.astype(np.float32), t[8:24, 32:96].float().cpu().numpy())


def test_torch_strided_view(probe, torch):
    base = torch.randn(64, 192, dtype=torch.float16, device="cuda")
    view = base[:, 64:160]  # rows keep the parent's pitch; the address is 128 B into each row
    torch.cuda.synchronize()
    raw = base.view(torch.int16).cpu().numpy().view(np.uint8).reshape(-1)[64 * 2:]
    spec = _check(probe, view, raw, (8, 32))
    assert spec.strides_bytes == (192 * 2, 2) and spec.base_address == view.data_ptr()


def test_cupy_array(probe, ctx):
    cp = pytest.importorskip("cupy")
    host = np.random.default_rng().standard_normal((64, 100)).astype(np.float32)[:, :96]
    a = cp.asarray(np.ascontiguousarray(host))
    cp.cuda.runtime.deviceSynchronize()
    _check(probe, a, np.ascontiguousarray(host).view(np.uint8), (8, 32), oob_fill="nan")


def test_cuda_core_buffer_and_view(probe, ctx):
    from cuda.core import Device
    from cuda.core.utils import StridedMemoryView

    from drvtma.runtime.driver import DeviceBuffer

    host = np.random.default_rng().integers(0, 256, (64, 128), dtype=np.uint8)
    with DeviceBuffer.from_array(host) as mine:
        dev = Device(0)
        dev.set_current()
        try:
            buf = dev.allocate(host.nbytes, stream=dev.default_stream)
        except TypeError:  # cuda.core before the stream argument
            buf = dev.allocate(host.nbytes)
        dev.sync()
        from drvtma.runtime.driver import call, cu

        call(cu.cuMemcpyDtoD, int(buf.handle), mine.ptr, host.nbytes)
    probe_host = host.reshape(-1)
    spec = TensorMapSpec.for_array(buf, (256,))  # a cuda.core Buffer exports itself as bytes
    assert spec.shape == (host.nbytes,) and spec.base_address == int(buf.handle)
    result = check_loads(spec, probe_host, [(0,), (4096,), (host.nbytes - 112,)], target=buf, probe=probe)
    assert result.ok, result.report
    if hasattr(StridedMemoryView, "from_buffer"):  # a typed 2D view of the same buffer
        view = StridedMemoryView.from_buffer(buf, (64, 128), dtype=np.dtype(np.uint8))  # an instance, not the type
        _check(probe, view, host, (16, 64))
    buf.close()


def test_a_torch_tensor_and_a_cupy_array_are_pointer_arguments(ctx, torch):
    from drvtma import load_module, synchronize

    kernel = load_module("runtime/launch_cost.cu").kernel("plain_args")  # out[i] = v for i < n
    t = torch.full((1000,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    kernel.launch(t, 900, 2.5, grid=4, block=256)
    synchronize()
    got = t.cpu().numpy()
    assert (got[:900] == 2.5).all() and np.isnan(got[900:]).all()
    cp = pytest.importorskip("cupy")
    a = cp.full((256,), -1.0, dtype=cp.float32)
    cp.cuda.runtime.deviceSynchronize()
    kernel.launch(a, 256, 0.75, grid=1, block=256)
    synchronize()
    assert (cp.asnumpy(a) == 0.75).all()
