"""User kernels on the GPU for tests/test_byo_fuzz_gpu.py and tests/test_byo_stores_gpu.py: drvtma's ready runners
over tests/byo_image_load.cu and tests/byo_image_store.cu, each also with a planted bug, and Triton's desc.load /
desc.store."""

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
