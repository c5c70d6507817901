"""User kernels on the GPU for tests/test_byo_fuzz_gpu.py and tests/test_byo_toolchains_gpu.py: drvtma's ready
runners over byo_image_load.cu and byo_image_store.cu (beside this file), the same files built by nvcc and by
cuda.core, each also with a planted bug, and Triton's desc.load / desc.store."""

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


# nvcc and cuda.core: the same sources built by the other toolchains, and with their planted bugs
_RUNNERS: dict = {}
SOURCE = Path(__file__).with_name("byo_image_load.cu")
# direction -> (the source, its kernel, the macro that plants its bug)
BUILDS = {"load": (SOURCE, "image_load", "PLANT_OFF_BY_ONE"),
          "store": (Path(__file__).with_name("byo_image_store.cu"), "image_store", "SKIP_LAST_CHUNK")}


def nvcc_cubin(plant: bool = False, direction: str = "load") -> Path:
    """The direction's source built by `nvcc -cubin -arch=sm_90a -I cu/include` (-D its macro when `plant`) once
    per process (a skip without nvcc)."""
    import tempfile

    from drvtma.runtime.compiler import include_dir

    if __package__:  # imported as support.byo_gpu_kernels
        from .byo_builds import nvcc_build
    else:  # loaded by path (`--kernel tests/support/byo_gpu_kernels.py:...` puts this folder on sys.path)
        from byo_builds import nvcc_build

    source, name, macro = BUILDS[direction]
    key = ("nvcc-cubin", direction, plant)
    if key not in _RUNNERS:
        out = Path(tempfile.mkdtemp(prefix="drvtma-nvcc-")) / f"{name}{'_plant' if plant else ''}.cubin"
        flags = [f"-I{include_dir()}"] + ([f"-D{macro}"] if plant else [])
        _RUNNERS[key] = nvcc_build(source, out, flags=flags)
    return _RUNNERS[key]


def _runner(kind: str, plant: bool, direction: str = "load"):
    if (kind, direction, plant) not in _RUNNERS:
        source, name, macro = BUILDS[direction]
        if kind == "nvcc":
            runner = (CuLoadRunner if direction == "load" else CuStoreRunner)(nvcc_cubin(plant, direction), name)
        else:
            from drvtma.fuzz.cuda_core import CudaCoreLoadRunner, CudaCoreStoreRunner

            runner = (CudaCoreLoadRunner if direction == "load" else CudaCoreStoreRunner)(
                source, name, defines={macro: 1} if plant else None)
        _RUNNERS[kind, direction, plant] = runner
    return _RUNNERS[kind, direction, plant]


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


def nvcc_stores(memory, base, spec, coords, box, op):
    """byo_image_store.cu as nvcc built it, launched by drvtma (CuStoreRunner over the cubin)."""
    return _runner("nvcc", False, "store")(memory, base, spec, coords, box, op)


def nvcc_store_skips_chunk(memory, base, spec, coords, box, op):
    """nvcc's build with -DSKIP_LAST_CHUNK: the store writes zeros where the box's last 16 bytes belong."""
    return _runner("nvcc", True, "store")(memory, base, spec, coords, box, op)


def cuda_core_stores(memory, base, spec, coords, box, op):
    """byo_image_store.cu the cuda.core way: Program, as_tensor_map, launch (CudaCoreStoreRunner)."""
    return _runner("cuda.core", False, "store")(memory, base, spec, coords, box, op)


def cuda_core_store_skips_chunk(memory, base, spec, coords, box, op):
    """cuda.core's build with the macro SKIP_LAST_CHUNK defined."""
    return _runner("cuda.core", True, "store")(memory, base, spec, coords, box, op)


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
