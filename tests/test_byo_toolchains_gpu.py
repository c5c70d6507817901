"""Fuzz a kernel built by another toolchain on the GPU: tests/support/byo_image_load.cu and byo_image_store.cu built
by `nvcc -cubin` (launched through drvtma with the map by value) and by cuda.core's Program (its
TensorMapDescriptor, its launch), each against the oracle with a figure line per toolchain and direction, and each
with its planted bug (PLANT_OFF_BY_ONE, SKIP_LAST_CHUNK) found, shrunk and replayed. All pass on the H200."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drvtma.cli.main import main
from drvtma.fuzz.standard import kernel_campaign
from drvtma.runtime.figures import record_figure
from drvtma.runtime.sass import instructions
from drvtma.tma.tiled.spec import TensorMapSpec

from support import byo_gpu_kernels as G

pytestmark = pytest.mark.gpu


def _cuda_core_maps():
    """cuda.core's public tiled maps (StridedMemoryView.as_tensor_map, cuda.core 1.x), or a one-line skip."""
    import cuda.core

    if not hasattr(cuda.core, "TensorMapDescriptorOptions"):
        pytest.skip(f"cuda.core {cuda.core.__version__} has no StridedMemoryView.as_tensor_map (cuda.core 1.x has)")


KERNELS = Path(G.__file__).resolve()
TOOLCHAINS = {"nvcc": "drvtma", "cuda.core": "cuda.core"}  # toolchain -> the strategy drawing its maps
# (toolchain, direction) -> (the right kernel, the planted one) in byo_gpu_kernels.py
KERNELS_OF = {("nvcc", "load"): ("nvcc_images", "nvcc_off_by_one"),
              ("cuda.core", "load"): ("cuda_core_images", "cuda_core_off_by_one"),
              ("nvcc", "store"): ("nvcc_stores", "nvcc_store_skips_chunk"),
              ("cuda.core", "store"): ("cuda_core_stores", "cuda_core_store_skips_chunk")}
# direction -> (fuzz target, its TMA instruction, examples, the least boxes, the planted bug's examples)
DIRECTIONS = {"load": ("loads", "UTMALDG", 360, 2000, 24), "store": ("stores", "UTMASTG", 500, 500, 100)}
CASES = [pytest.param(t, d, id=f"{t}-{d}") for d in DIRECTIONS for t in TOOLCHAINS]


def _built(toolchain: str, direction: str) -> bytes:
    """The cubin the toolchain built for the direction (nvcc absent or cuda.core without as_tensor_map: a skip)."""
    if toolchain == "nvcc":
        return G.nvcc_cubin(direction=direction).read_bytes()
    _cuda_core_maps()
    return G._runner("cuda.core", False, direction).code().code


def _fuzz(tmp_path, target: str, kernel: str, strategy: str, *extra: str) -> int:
    return main(["fuzz", target, "--kernel", f"{KERNELS}:{kernel}", "--strategy", strategy,
                 *extra, "--quiet", "--no-db", "--out", str(tmp_path)])


@pytest.mark.parametrize("toolchain, direction", CASES)
def test_the_toolchains_kernel_matches_the_oracle(ctx, tmp_path, toolchain, direction):
    target, instruction, examples, least, _ = DIRECTIONS[direction]
    name = G.BUILDS[direction][1]
    uses_tma = any(op.startswith(instruction) for op in instructions(_built(toolchain, direction), name))
    options = ["--examples", str(examples), "--seed", "1"]
    if direction == "load":  # the standard campaign's boxes a call (cuda.core's: its cases too, for every class)
        campaign = kernel_campaign("kernel-loads", TOOLCHAINS[toolchain])
        options = campaign.cli() if toolchain == "cuda.core" else [*options, "--max-boxes", str(campaign.max_boxes)]
    rc = _fuzz(tmp_path, target, KERNELS_OF[toolchain, direction][0], TOOLCHAINS[toolchain], *options)
    js = json.loads((tmp_path / f"kernel-{target}-report.json").read_text())
    record_figure({"test": "byo_fuzz", "toolchain": toolchain, "direction": direction, "cases": js["cases"],
                   "boxes": js["size"], "mismatches": js["mismatches"], "uses_tma": uses_tma})
    assert rc == 0 and js["mismatches"] == 0, (tmp_path / f"kernel-{target}-report.md").read_text()
    assert uses_tma and js["size"] >= least


@pytest.mark.parametrize("toolchain, direction", CASES)
def test_the_toolchains_planted_bug_is_shrunk_and_replayed(ctx, tmp_path, capsys, toolchain, direction):
    """The off-by-one load or the store one chunk short: the CPU tests' NumPy model of the store bug shrinks, on
    these seeds, to a 16-byte uint8 box (tests/test_byo_stores_cpu.py)."""
    target, *_, examples = DIRECTIONS[direction]
    planted = KERNELS_OF[toolchain, direction][1]
    _built(toolchain, direction)  # nvcc absent: a skip before the campaign
    rc = _fuzz(tmp_path, target, planted, TOOLCHAINS[toolchain], "--examples", str(examples), "--seed", "2",
               "--max-shrinks", "1", "--shrink-seconds", "120")
    assert rc == 1
    repro = G.shrunk_repro_replays(tmp_path, target, capsys)
    assert repro["options"]["kernel"].endswith(planted)
    if direction == "load":
        assert len(repro["case"]["coordinates"]) == 1
    else:
        spec = TensorMapSpec.from_dict(repro["case"]["spec"])
        assert spec.smem_bytes <= 64 and spec.rank <= 2, repro["describe"]


@pytest.mark.parametrize("toolchain", list(TOOLCHAINS))
def test_the_toolchains_store_kernel_reduces_as_the_oracle(ctx, tmp_path, toolchain):
    """The store kernel takes `op`: the same runners serve `drvtma fuzz reductions` (cuda.core's map types)."""
    _built(toolchain, "store")
    rc = _fuzz(tmp_path, "reductions", KERNELS_OF[toolchain, "store"][0], TOOLCHAINS[toolchain], "--examples", "120",
               "--seed", "1")
    assert rc == 0, (tmp_path / "kernel-reductions-report.md").read_text()


def test_cuda_cores_descriptors_decode_to_the_drawn_maps(ctx):
    """The translation checked where it matters: what as_tensor_map encodes is the map drvtma drew (the innermost
    element stride, which the map ignores, written as 1)."""
    import numpy as np
    from cuda.core import Device

    from drvtma.fuzz import cuda_core as C
    from drvtma.fuzz.user import MAX_EXTENT_BYTES, strategy
    from drvtma.runtime.driver import DeviceBuffer
    from drvtma.testing import RngChooser
    from drvtma.tma.tiled.decode import decode, same_map

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
