"""Fuzz a kernel built by another toolchain on the GPU: tests/byo_image_load.cu built by `nvcc -cubin` (launched
through drvtma with the map by value) and by cuda.core's Program (its TensorMapDescriptor, its launch), each
against the oracle with a figure line, and each with its planted off-by-one (PLANT_OFF_BY_ONE) found, shrunk and
replayed. Not yet run on a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drvtma.cli.main import main
from drvtma.runtime.figures import record_figure
from drvtma.runtime.sass import instructions

import byo_gpu_kernels as G

pytestmark = pytest.mark.gpu


def _cuda_core_maps():
    """cuda.core's public tiled maps (StridedMemoryView.as_tensor_map, cuda.core 1.x), or a one-line skip."""
    import cuda.core

    if not hasattr(cuda.core, "TensorMapDescriptorOptions"):
        pytest.skip(f"cuda.core {cuda.core.__version__} has no StridedMemoryView.as_tensor_map (cuda.core 1.x has)")


KERNELS = Path(G.__file__).resolve()
# toolchain -> (the right kernel, the planted one, the strategy, the cubin it runs)
TOOLCHAINS = {
    "nvcc": ("nvcc_images", "nvcc_off_by_one", "drvtma", lambda: G.nvcc_cubin().read_bytes()),
    "cuda.core": ("cuda_core_images", "cuda_core_off_by_one", "cuda.core",
                  lambda: _cuda_core_maps() or G._runner("cuda.core", False).code().code),
}


@pytest.mark.parametrize("toolchain", list(TOOLCHAINS))
def test_the_toolchains_kernel_matches_the_oracle(ctx, tmp_path, toolchain):
    right, _, strategy, built = TOOLCHAINS[toolchain]
    uses_tma = any(op.startswith("UTMALDG") for op in instructions(built(), "image_load"))  # nvcc absent: a skip
    rc = main(["fuzz", "loads", "--kernel", f"{KERNELS}:{right}", "--strategy", strategy, "--examples", "360",
               "--seed", "1", "--quiet", "--no-db", "--out", str(tmp_path)])
    js = json.loads((tmp_path / "kernel-loads-report.json").read_text())
    record_figure({"test": "byo_fuzz", "toolchain": toolchain, "direction": "load", "cases": js["cases"],
                   "boxes": js["size"], "mismatches": js["mismatches"], "uses_tma": uses_tma})
    assert rc == 0 and js["mismatches"] == 0, (tmp_path / "kernel-loads-report.md").read_text()
    assert uses_tma and js["size"] >= 2000


@pytest.mark.parametrize("toolchain", list(TOOLCHAINS))
def test_the_toolchains_planted_off_by_one_is_shrunk_and_replayed(ctx, tmp_path, capsys, toolchain):
    _, planted, strategy, built = TOOLCHAINS[toolchain]
    built()  # nvcc absent: a skip before the campaign
    rc = main(["fuzz", "loads", "--kernel", f"{KERNELS}:{planted}", "--strategy", strategy, "--examples", "24",
               "--seed", "2", "--quiet", "--no-db", "--max-shrinks", "1", "--shrink-seconds", "120",
               "--out", str(tmp_path)])
    assert rc == 1
    repro = G.shrunk_repro_replays(tmp_path, "loads", capsys)
    assert len(repro["case"]["coordinates"]) == 1 and repro["options"]["kernel"].endswith(planted)


def test_cuda_cores_descriptors_decode_to_the_drawn_maps(ctx):
    """The translation checked where it matters: what as_tensor_map encodes is the map drvtma drew (the innermost
    element stride, which the map ignores, written as 1)."""
    import numpy as np
    from cuda.core import Device

    from drvtma.fuzz import cuda_core as C
    from drvtma.fuzz.user import MAX_EXTENT_BYTES, strategy
    from drvtma.runtime.driver import DeviceBuffer
    from drvtma.testing import RngChooser
    from drvtma.tma.decode import decode, same_map

    _cuda_core_maps()
    Device(0).set_current()
    with DeviceBuffer(MAX_EXTENT_BYTES + 1024) as buf:
        for seed in range(200):
            spec = strategy("cuda.core").load_spec(RngChooser(np.random.default_rng(seed)),
                                                   {"max_extent_bytes": MAX_EXTENT_BYTES})
            args = C.tensor_map_arguments(spec)
            desc = C.device_view(buf.ptr + 512, args, spec.itemsize).as_tensor_map(**C.map_options(args))
            want = spec.replace(element_strides=args["element_strides"], base_address=buf.ptr + 512)
            got, _ = decode(desc)
            assert same_map(got, want), f"drawn:\n{spec.describe()}\ncuda.core encoded:\n{got.describe()}"
