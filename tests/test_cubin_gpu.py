"""The cubin's parameter records agree with the driver's cuKernelGetParamInfo, asked only for indices that exist."""

import pytest

from drvtma.runtime import cubin
from drvtma.runtime.driver import call, context, cu
from drvtma.runtime.kernel import PARAM_COUNT_DRIVER_VERSION, load_module

pytestmark = pytest.mark.gpu

KERNELS = {"runtime/core_roundtrip.cu": ("scale_add", "echo_args", "tma_box_and_bulk"),
           "b08/pipelines.cu": ("pipe_ring", "ws_ring"), "b08/b08_modes.cu": ("b08_sync", "b08_tensor2d"),
           "tma/load_probe.cu": ("load_probe",)}


@pytest.mark.parametrize("source", sorted(KERNELS))
def test_cubin_layout_is_the_drivers(ctx, source):
    mod = load_module(source)
    for name in KERNELS[source]:
        kernel = mod.kernel(name)
        parsed = cubin.kernel_params(mod.cubin, name)
        driver = [tuple(int(v) for v in call(cu.cuKernelGetParamInfo, kernel.handle, i))
                  for i in range(len(parsed))]
        assert parsed == driver, name
        assert kernel.params == parsed, name


def test_the_count_query_is_used_where_the_driver_has_it(ctx):
    kernel = load_module("runtime/core_roundtrip.cu").kernel("scale_add")
    version = context().properties.driver_version
    print(f"driver {version}; cuKernelGetParamCount in the bindings: {hasattr(cu, 'cuKernelGetParamCount')}")
    if version >= PARAM_COUNT_DRIVER_VERSION and hasattr(cu, "cuKernelGetParamCount"):
        assert int(call(cu.cuKernelGetParamCount, kernel.handle)) == 5
    assert len(kernel.params) == 5
