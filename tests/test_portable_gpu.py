"""The portable build on a GPU (drvtma.runtime.families): a TMA family forced to compute_90 (DRVTMA_ARCH) is
handed to the driver as PTX, so what runs is the driver's JIT output, and it loads tiles the oracle predicts; the
default build of the same family on a Hopper is sm_90 SASS; the capability row is the device's own."""

from __future__ import annotations

import numpy as np
import pytest

from drvtma.runtime import capabilities
from drvtma.runtime.driver import DeviceBuffer, call, cu, device_capabilities, synchronize
from drvtma.runtime.figures import record_test as record
from drvtma.runtime.kernel import Module, build_target
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.probe import POISON, LoadProbe
from drvtma.tma.tiled.spec import TensorMapSpec

pytestmark = pytest.mark.gpu


def test_the_device_row_is_the_devices_own(ctx):
    row = device_capabilities()
    props = ctx.properties
    assert row.cc == props.compute_capability and row.sm_count == props.sm_count
    assert row.smem_per_block_optin == props.smem_per_block_optin
    assert row.has("tma")
    if props.compute_capability == (9, 0):
        assert row.has("wgmma") and row.target == "sm_90a"


def test_a_ptx_image_is_compiled_by_the_jit_and_runs(ctx, monkeypatch):
    monkeypatch.setenv("DRVTMA_ARCH", "compute_90")
    mod = Module.load("runtime/launch_cost.cu")
    try:
        assert mod.target == "compute_90" and mod.from_ptx  # PTX only: nothing but the JIT can make it run
        assert b".target sm_90" in mod.image and mod.cubin.startswith(b"\x7fELF")
        kernel = mod.kernel("plain_args")
        cc = ctx.properties.compute_capability
        binary = int(call(cu.cuKernelGetAttribute, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_BINARY_VERSION,
                          kernel.handle, ctx.device))
        ptx = int(call(cu.cuKernelGetAttribute, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PTX_VERSION,
                       kernel.handle, ctx.device))
        assert binary == cc[0] * 10 + cc[1] and ptx == 90  # SASS for this GPU, from compute_90 PTX
        with DeviceBuffer(4 * 1000) as out:
            out.fill_u32(0)
            kernel.launch(out, 1000, 2.5, grid=4, block=256)
            synchronize()
            assert (out.download(np.float32, (1000,)) == 2.5).all()
        record("portable_jit_kernel", binary_version=binary, ptx_version=ptx)
    finally:
        mod.close()


def test_tma_loads_through_the_jit_match_the_oracle(ctx, monkeypatch):
    monkeypatch.setenv("DRVTMA_ARCH", "compute_90")
    host = np.random.default_rng(5).integers(0, 256, 64 * 128 * 4, dtype=np.uint8)
    spec = TensorMapSpec.create("uint32", (64, 128), (8, 32), swizzle="128B")
    coords = [(0, 0), (8, 32), (60, 120), (-3, -8)]  # innermost: a multiple of 16 B
    with LoadProbe() as probe, DeviceBuffer.from_array(host) as buf:
        assert probe.kernel.module.from_ptx
        images = probe.run(encode_tiled(spec, buf), coords)
        want = oracle.load_images(spec, host, coords, image_bytes=images.shape[1], poison=POISON)
        assert (images == want).all()


def test_the_default_build_of_a_portable_family(ctx):
    """Unforced, a TMA-only family is sm_90 SASS on a Hopper and compute_90 PTX on anything newer."""
    from drvtma import settings

    if settings.ARCH.get():
        pytest.skip(f"DRVTMA_ARCH={settings.ARCH.get()} forces every build")
    target = build_target("tma/load_probe.cu")
    assert target == ("sm_90" if ctx.properties.compute_capability[0] == 9 else capabilities.GENERIC_TARGET)
