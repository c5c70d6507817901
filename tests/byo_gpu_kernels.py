"""User kernels on the GPU for tests/test_byo_fuzz_gpu.py: drvtma's ready runners
over tests/byo_image_load.cu and tests/byo_image_store.cu, each also with a planted bug, and Triton's desc.load /
desc.store."""

import json
from pathlib import Path

from drvtma.fuzz.runners import CuLoadRunner, CuStoreRunner

IMAGE_LOAD = CuLoadRunner(Path(__file__).with_name("byo_image_load.cu"), "image_load")
IMAGE_STORE = CuStoreRunner(Path(__file__).with_name("byo_image_store.cu"), "image_store")
# The planted bug, built from the same file: the kernel copies one 16-byte chunk of the box too few
STORE_SKIPS_CHUNK = CuStoreRunner(Path(__file__).with_name("byo_image_store.cu"), "image_store",
                                  defines={"SKIP_LAST_CHUNK": 1})


def drvtma_images(memory, base, spec, coords):
    return IMAGE_LOAD(memory, base, spec, coords)


def drvtma_off_by_one(memory, base, spec, coords):
    """The planted bug: every box one row further along the outermost axis (16 bytes on a rank-1 map)."""
    moved = coords.copy()
    moved[:, 0] += 1 if spec.rank > 1 else 16 // spec.itemsize
    return IMAGE_LOAD(memory, base, spec, moved)


def triton_boxes(memory, base, spec, coords):
    """Triton's desc.load of each box (drvtma.fuzz.triton.triton_loads)."""
    from drvtma.fuzz.triton import triton_loads

    return triton_loads(memory, base, spec, coords)


def drvtma_store_images(memory, base, spec, coords, box, op):
    return IMAGE_STORE(memory, base, spec, coords, box, op)


def drvtma_store_skips_chunk(memory, base, spec, coords, box, op):
    return STORE_SKIPS_CHUNK(memory, base, spec, coords, box, op)


def triton_store_boxes(memory, base, spec, coords, box, op):
    """Triton's desc.store of the box (drvtma.fuzz.triton.triton_stores)."""
    from drvtma.fuzz.triton import triton_stores

    return triton_stores(memory, base, spec, coords, box, op)


# nvcc and cuda.core: the same source built by the other toolchains, and with its planted bug (PLANT_OFF_BY_ONE)
_RUNNERS: dict = {}
SOURCE = Path(__file__).with_name("byo_image_load.cu")


def nvcc_cubin(plant: bool = False) -> Path:
    """byo_image_load.cu built by `nvcc -cubin -arch=sm_90a -I cu/include` once per process (a skip without
    nvcc)."""
    import tempfile

    from byo_builds import nvcc_build
    from drvtma.runtime.compiler import include_dir

    key = ("nvcc-cubin", plant)
    if key not in _RUNNERS:
        out = Path(tempfile.mkdtemp(prefix="drvtma-nvcc-")) / f"image_load{'_plant' if plant else ''}.cubin"
        flags = [f"-I{include_dir()}"] + (["-DPLANT_OFF_BY_ONE"] if plant else [])
        _RUNNERS[key] = nvcc_build(SOURCE, out, flags=flags)
    return _RUNNERS[key]


def _runner(kind: str, plant: bool):
    if (kind, plant) not in _RUNNERS:
        if kind == "nvcc":
            _RUNNERS[kind, plant] = CuLoadRunner(nvcc_cubin(plant), "image_load")
        else:
            from drvtma.fuzz.cuda_core import CudaCoreLoadRunner

            defines = {"PLANT_OFF_BY_ONE": 1} if plant else None
            _RUNNERS[kind, plant] = CudaCoreLoadRunner(SOURCE, "image_load", defines=defines)
    return _RUNNERS[kind, plant]


def nvcc_images(memory, base, spec, coords):
    """The kernel as nvcc built it, launched by drvtma with the map by value."""
    return _runner("nvcc", False)(memory, base, spec, coords)


def nvcc_off_by_one(memory, base, spec, coords):
    """nvcc's build with -DPLANT_OFF_BY_ONE: the kernel loads each box one row further along the outermost axis."""
    return _runner("nvcc", True)(memory, base, spec, coords)


def cuda_core_images(memory, base, spec, coords):
    """cuda.core's Program build, its TensorMapDescriptor, its launch."""
    return _runner("cuda.core", False)(memory, base, spec, coords)


def cuda_core_off_by_one(memory, base, spec, coords):
    """cuda.core's build with the macro PLANT_OFF_BY_ONE defined."""
    return _runner("cuda.core", True)(memory, base, spec, coords)


def shrunk_repro_replays(tmp_path, target: str, capsys) -> dict:
    """(For the GPU tests.) The shrunk reproducer a failing campaign wrote, once `drvtma repro` has replayed it with
    the same diff."""
    from drvtma.cli.main import main

    written = sorted(tmp_path.glob(f"repro-kernel-{target}-*.json"))
    path = next(p for p in written if json.loads(p.read_text())["shrunk"])
    capsys.readouterr()
    assert main(["repro", str(path)]) == 1
    assert "same diff as recorded" in capsys.readouterr().out
    return json.loads(path.read_text())
