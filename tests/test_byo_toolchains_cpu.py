"""nvcc and cuda.core as your toolchain, on the CPU: the spec -> cuda.core translation and its refusals, the
"cuda.core" strategy drawing only what as_tensor_map can express (loads and stores), byo_image_load.cu and
byo_image_store.cu built by cuda.core's Program and by nvcc (each also with its planted bug) into tensor loads and
stores with the runners' parameter layouts."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from drvtma.errors import ArgumentError, StoreStraddleWarning, TensorMapError
from drvtma.fuzz import cuda_core as C
from drvtma.fuzz.runners import CuLoadRunner, CuStoreRunner
from drvtma.fuzz.user import MAX_EXTENT_BYTES, strategy
from drvtma.runtime import cubin
from drvtma.runtime.sass import instructions
from drvtma.testing import RngChooser
from drvtma.tma.stores import REDUCE_OPS, STORE, check_case, check_store_spec
from drvtma.tma.tiled.spec import TensorMapSpec

from support import byo_gpu_kernels as G

SOURCE = Path(G.__file__).with_name("byo_image_load.cu")
# direction -> (the runner's parameter layout, the TMA instruction it issues, its runner over nvcc's cubin). Loads:
# map by value, coords, rank, box_bytes, image_bytes, out, status; stores: map by value, coords, rank, op, image,
# image_bytes.
LAYOUTS = {"load": ([128, 8, 4, 4, 4, 8, 8], "UTMALDG", CuLoadRunner),
           "store": ([128, 8, 4, 4, 8, 4], "UTMASTG", CuStoreRunner)}


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


@pytest.mark.parametrize("ops", [[STORE], list(REDUCE_OPS)], ids=["stores", "reductions"])
def test_the_cuda_core_strategy_draws_only_expressible_stores(ops):
    specs, seen = strategy("cuda.core"), set()
    for seed in range(300):
        drawn = specs.store_case(RngChooser(np.random.default_rng(seed)),
                                 {"ops": ops, "max_extent_bytes": MAX_EXTENT_BYTES})
        spec = drawn.case.spec
        assert C.cuda_core_refusals(spec) == [] and spec.extent_bytes <= MAX_EXTENT_BYTES, spec.describe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreStraddleWarning)  # a straddling inner edge is drawn on purpose
            check_store_spec(spec, drawn.case.op)
        check_case(drawn.case)  # coordinates a store can take
        seen.add((spec.rank, int(spec.swizzle), drawn.case.op))
    assert {r for r, *_ in seen} == {1, 2, 3, 4, 5} and {s for _, s, _ in seen} == {0, 1, 2, 3}
    assert {op for *_, op in seen} == set(ops)


def test_the_cuda_core_store_runner_refuses_before_any_launch():
    spec = TensorMapSpec.create("tfloat32", (10, 40), (4, 8))
    memory = np.zeros(1024 + spec.extent_bytes, np.uint8)
    run = C.CudaCoreStoreRunner(G.BUILDS["store"][0], "image_store")
    with pytest.raises(TensorMapError, match="store_dtype"):  # a store the oracle does not model (tf32)
        run(memory, 512, spec, np.array((1, 16)), np.zeros((4, 8), np.float32), "store")
    with pytest.raises(ArgumentError, match="runner_op"):  # the store runner's own checks come first
        run(memory, 512, spec.replace(dtype="float32"), np.array((1, 16)), np.zeros((4, 8), np.float32), "up")


@pytest.mark.parametrize("direction", list(G.BUILDS))
def test_cuda_core_program_builds_the_kernel_into_tensor_copies(direction):
    source, name, macro = G.BUILDS[direction]
    layout, instruction, _ = LAYOUTS[direction]
    runner = C.CudaCoreLoadRunner if direction == "load" else C.CudaCoreStoreRunner
    plain = runner(source, name).code().code
    planted = runner(source, name, defines={macro: 1}).code().code
    for built in (plain, planted):
        assert {f"{instruction}.{r}D" for r in range(1, 6)} <= set(instructions(built, name))
        assert [s for _, s in cubin.kernel_params(built, name)] == layout
    assert plain != planted


def test_a_missing_source_is_named():
    with pytest.raises(ArgumentError, match="kernel_source.*nope.cu"):
        C.CudaCoreLoadRunner("nope.cu", "image_load").code()


@pytest.mark.parametrize("direction", list(G.BUILDS))
def test_nvcc_builds_the_runners_kernel_with_drvtmas_headers(direction):
    """What the GPU tests run: G.nvcc_cubin's builds, the plain one and the planted one (a skip without nvcc)."""
    name = G.BUILDS[direction][1]
    layout, instruction, runner = LAYOUTS[direction]
    plain, planted = (G.nvcc_cubin(plant, direction).read_bytes() for plant in (False, True))
    for built in (plain, planted):
        assert [s for _, s in cubin.kernel_params(built, name)] == layout
        assert any(op.startswith(instruction) for op in instructions(built, name))
    assert plain != planted
    assert runner(plain, name).source == plain  # the bytes themselves: load_module reads them as a cubin
    assert runner(G.nvcc_cubin(False, direction), name).source.suffix == ".cubin"
