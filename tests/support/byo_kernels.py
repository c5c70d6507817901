"""Pure-NumPy "user kernels" for the fuzz-your-kernel contract (drvtma.fuzz.kernel): right ones built on drvtma's
oracles, and ones with the bugs users plant by accident (an off-by-one coordinate, a wrong swizzle, a store that
skips the last 16-byte chunk of each row)."""

import numpy as np

from drvtma.fuzz.kernel import batched
from drvtma.tma.stores import CHUNK_BYTES, apply_store, reduce_values, store_targets
from drvtma.tma.tiled import oracle


def _tensor(memory, base, spec):
    return memory[base:]


def load_images(memory, base, spec, coords):
    """Right: the shared-memory images, as TMA writes them."""
    return oracle.load_images(spec, _tensor(memory, base, spec), coords, image_bytes=spec.smem_bytes)


def load_boxes(memory, base, spec, coords):
    """Right: the boxes' values in the map's dtype (as a framework's block load returns them)."""
    return oracle.box_values(spec, _tensor(memory, base, spec), coords).view(spec.dtype.numpy)


def off_by_one(memory, base, spec, coords):
    """Wrong: every box starts one row too far along the outermost axis (16 bytes along a rank-1 map's)."""
    moved = coords.copy()
    moved[:, 0] += 1 if spec.rank > 1 else CHUNK_BYTES // spec.itemsize
    return load_boxes(memory, base, spec, moved)


def no_swizzle(memory, base, spec, coords):
    """Wrong: reads shared memory as if the map did not swizzle (same row pitch, rows in plain order)."""
    values = oracle.box_values(spec, _tensor(memory, base, spec), coords)
    n, inner = len(coords), spec.loaded_counts[-1] * spec.itemsize
    images = np.zeros((n, spec.smem_bytes // spec.row_pitch_bytes, spec.row_pitch_bytes), np.uint8)
    images[:, :, :inner] = values.reshape(n, -1).view(np.uint8).reshape(n, -1, inner)
    return images.reshape(n, spec.smem_bytes)


def store(memory, base, spec, coords, box, op):
    """Right: the store (or reduction) through drvtma's stores oracle."""
    out = memory.copy()
    apply_store(out, base, spec, tuple(int(c) for c in coords), box, op)
    return out


def store_skips_last_chunk(memory, base, spec, coords, box, op):
    """Wrong: never writes the last 16-byte chunk of a box row."""
    out = memory.copy()
    targets = store_targets(spec, tuple(int(c) for c in coords))
    inner = targets.box_index[-1]
    keep = inner < spec.loaded_counts[-1] - CHUNK_BYTES // spec.itemsize  # the box's inner index, broadcast
    offsets = np.broadcast_to(targets.byte_offsets, np.broadcast_shapes(targets.byte_offsets.shape, keep.shape))
    mask = np.broadcast_to(keep, offsets.shape)
    values = np.asarray(box, dtype=spec.dtype.numpy)[targets.box_index]
    elements = out.view(spec.dtype.numpy)
    index = (base + offsets[mask]) // spec.itemsize
    elements[index] = reduce_values(op, spec.dtype, elements[index], values[mask])
    return out


def wrong_shape(memory, base, spec, coords):
    """Wrong contract: one box too few."""
    return load_boxes(memory, base, spec, coords)[1:]


def _image_store(memory, base, spec, coords, box, op, skip_last_chunk=False):
    """byo_image_store.cu (beside this file) done in NumPy on the image drvtma's CuStoreRunner hands it: the box read
    back from the shared-memory image where the store reads it, then stored; `skip_last_chunk` is its planted bug."""
    from drvtma.fuzz.runners import store_arguments
    from drvtma.tma.stores import OP_CODES, smem_byte_offsets

    tma, code, image = store_arguments(memory, base, spec, coords, box, op)
    assert code == OP_CODES[op] and list(tma[:spec.rank]) == list(spec.tma_coordinates(tuple(coords)))
    if skip_last_chunk:
        image[-CHUNK_BYTES:] = 0
    seen = np.ascontiguousarray(image[smem_byte_offsets(spec)]).view(spec.dtype.numpy).reshape(spec.loaded_counts)
    out = memory.copy()
    apply_store(out, base, spec, tuple(int(c) for c in coords), seen, op)
    return out


def image_store(memory, base, spec, coords, box, op):
    return _image_store(memory, base, spec, coords, box, op)


def image_store_skips_chunk(memory, base, spec, coords, box, op):
    return _image_store(memory, base, spec, coords, box, op, skip_last_chunk=True)


# ---- the batched protocol (drvtma.fuzz.kernel.batched): one call per batch of cases


def _batched_form(one):
    """`one` (a one-case kernel above) as a batched kernel: each call of the batch run through it."""
    return batched(lambda calls: [one(*call) for call in calls])


load_images_batched = _batched_form(load_images)
off_by_one_batched = _batched_form(off_by_one)
store_batched = _batched_form(store)
store_skips_last_chunk_batched = _batched_form(store_skips_last_chunk)


@batched
def one_result_short(calls):
    return [load_images(*call) for call in calls][:-1]
