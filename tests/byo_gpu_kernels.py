"""User kernels on the GPU for tests/test_byo_fuzz_gpu.py: drvtma's ready runner over tests/byo_image_load.cu,
and the same kernel with a planted off-by-one coordinate."""

from pathlib import Path

from drvtma.fuzz.runners import CuLoadRunner

IMAGE_LOAD = CuLoadRunner(Path(__file__).with_name("byo_image_load.cu"), "image_load")


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
