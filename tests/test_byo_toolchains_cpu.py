"""nvcc and cuda.core as your toolchain, on the CPU: the spec -> cuda.core translation and its refusals, the
"cuda.core" strategy drawing only what as_tensor_map can express, byo_image_load.cu built by cuda.core's Program
and by nvcc into tensor loads with the runner's parameter layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from drvtma.errors import ArgumentError
from drvtma.fuzz import cuda_core as C
from drvtma.fuzz.runners import CuLoadRunner
from drvtma.fuzz.user import MAX_EXTENT_BYTES, strategy
from drvtma.runtime import cubin
from drvtma.runtime.sass import instructions
from drvtma.testing import RngChooser
from drvtma.tma.spec import TensorMapSpec

from byo_builds import nvcc_build

SOURCE = Path(__file__).with_name("byo_image_load.cu")
LAYOUT = [128, 8, 4, 4, 4, 8, 8]  # map by value, coords, rank, box_bytes, image_bytes, out, status


def test_a_spec_becomes_as_tensor_maps_arguments():
    import cuda.core
    import ml_dtypes

    spec = TensorMapSpec.create("bfloat16", (5, 40, 96), (2, 8, 64), strides_bytes=(9216, 224, 2),
                                element_strides=(2, 1, 4), swizzle="128B", oob_fill="nan", l2_promotion="256B")
    args = C.tensor_map_arguments(spec)
    assert args["shape"] == (5, 40, 96) and args["strides"] == (4608, 112, 1) and args["typestr"] == "<u2"
    assert args["box_dim"] == (2, 8, 64) and args["element_strides"] == (2, 1, 1)  # innermost: ignored, so 1
    assert args["data_type"] == np.dtype(ml_dtypes.bfloat16)
    options = C.map_options(args)
    assert [options[k].name for k in ("swizzle", "oob_fill", "l2_promotion", "interleave")] == \
        ["SWIZZLE_128B", "NAN_REQUEST_ZERO_FMA", "L2_256B", "NONE"]
    made = cuda.core.TensorMapDescriptorOptions(**options)  # cuda.core's own checks of each option's type
    assert made.box_dim == (2, 8, 64)


def test_the_view_describes_the_tensor_at_its_address():
    spec = TensorMapSpec.create("float32", (3, 20), (2, 4), strides_bytes=(96, 4))
    cai = C._DeviceTensor(0x7000_0200, C.tensor_map_arguments(spec), 4).__cuda_array_interface__
    assert cai == {"version": 3, "shape": (3, 20), "typestr": "<u4", "data": (0x7000_0200, False),
                   "strides": (96, 4), "stream": None}


@pytest.mark.parametrize("spec, rule, parameter", [
    (TensorMapSpec.create("tfloat32", (64, 64), (8, 64)), "cuda_core_dtype", "dtype"),
    (TensorMapSpec.create("float32_ftz", (64, 64), (8, 32)), "cuda_core_dtype", "dtype"),
    (TensorMapSpec.create("uint8", (64, 128), (8, 128), swizzle="128B_atom_32B", target="sm_100a"),
     "cuda_core_swizzle", "swizzle"),
    (TensorMapSpec.create("float16", (4, 64), (8, 64)), "cuda_core_box", "box"),
    (TensorMapSpec.create("float16", (4, 64), (2, 64), element_strides=(8, 1)), "cuda_core_element_strides",
     "element_strides"),
    (TensorMapSpec.create("float16", (8, 4, 64), (2, 2, 64), strides_bytes=(128, 1024, 2)), "cuda_core_strides",
     "strides_bytes"),
])
def test_what_cuda_core_cannot_express_is_refused_by_name(spec, rule, parameter):
    with pytest.raises(ArgumentError) as info:
        C.tensor_map_arguments(spec)
    assert info.value.rule == rule and info.value.parameter == parameter and "fix:" in str(info.value)
    assert [e.rule for e in C.cuda_core_refusals(spec)] == [rule]


def test_the_cuda_core_strategy_draws_only_expressible_maps():
    specs = strategy("cuda.core")
    seen = set()
    for seed in range(400):
        spec = specs.load_spec(RngChooser(np.random.default_rng(seed)), {"max_extent_bytes": MAX_EXTENT_BYTES})
        assert spec.is_valid() and C.cuda_core_refusals(spec) == [], spec.describe()
        assert spec.extent_bytes <= MAX_EXTENT_BYTES
        seen.add((spec.rank, int(spec.swizzle), spec.dtype.name, int(spec.oob_fill)))
    assert {r for r, *_ in seen} == {1, 2, 3, 4, 5} and {s for _, s, *_ in seen} == {0, 1, 2, 3}
    assert ("bfloat16" in {d for *_, d, _ in seen}) and {f for *_, f in seen} == {0, 1}


def test_cuda_core_program_builds_the_kernel_into_tensor_loads():
    plain = C.CudaCoreLoadRunner(SOURCE, "image_load").code().code
    planted = C.CudaCoreLoadRunner(SOURCE, "image_load", defines={"PLANT_OFF_BY_ONE": 1}).code().code
    for built in (plain, planted):
        assert {f"UTMALDG.{r}D" for r in range(1, 6)} <= set(instructions(built, "image_load"))
        assert [s for _, s in cubin.kernel_params(built, "image_load")] == LAYOUT
    assert plain != planted


def test_a_missing_source_is_named():
    with pytest.raises(ArgumentError, match="kernel_source.*nope.cu"):
        C.CudaCoreLoadRunner("nope.cu", "image_load").code()


def test_nvcc_builds_the_runners_kernel_with_drvtmas_headers(tmp_path):
    from drvtma.runtime.compiler import include_dir

    built = nvcc_build(SOURCE, tmp_path / "k.cubin", flags=[f"-I{include_dir()}"]).read_bytes()
    assert [s for _, s in cubin.kernel_params(built, "image_load")] == LAYOUT
    assert any(op.startswith("UTMALDG") for op in instructions(built, "image_load"))
    runner = CuLoadRunner(built, "image_load")  # the bytes themselves: load_module reads them as a cubin
    assert runner.source == built and CuLoadRunner(tmp_path / "k.cubin", "image_load").source.suffix == ".cubin"
