"""Batched im2col load probes on the GPU: one launch makes many loads of one im2col map (one CTA each, poisoned
images, bounded waits) and returns their raw shared memory; `check_im2col_loads` compares them with the oracle."""

from __future__ import annotations

import numpy as np

from ..tiled import probe as tiled_probe
from ..tiled.encode import TensorMap
from ..tiled.probe import POISON, ImageCheck, ImageProbe, check_box_offset, check_image_bytes, mismatch_lines
from . import oracle
from .encode import encode_im2col
from .spec import Im2colSpec

IM2COL_SOURCE = "tma/im2col_probe.cu"
IM2COL_KERNEL = "im2col_probe"


class Im2colProbe(ImageProbe):
    """The compiled im2col probe and its reusable device scratch (rows, images, status)."""

    SOURCE = IM2COL_SOURCE
    KERNEL = IM2COL_KERNEL

    def _prepare(self, tmap: TensorMap, coords, offsets, box_offset: int, image_bytes: int | None, checked: bool):
        spec = tmap.spec
        if not isinstance(spec, Im2colSpec):
            raise ValueError("the im2col probe needs a TensorMap encoded from an Im2colSpec (encode_im2col)")
        if checked:
            c, o = oracle.check_im2col_coordinates(spec, coords, offsets)
        else:
            c = np.asarray(coords, dtype=np.int64).reshape(-1, spec.rank)
            o = np.broadcast_to(np.asarray(offsets, dtype=np.int64).reshape(-1, spec.rank - 2), (len(c), spec.rank - 2))
        check_box_offset(box_offset)
        image_bytes = oracle.im2col_image_bytes(spec, box_offset) if image_bytes is None else image_bytes
        check_image_bytes(spec, box_offset, image_bytes, "rows")
        return oracle.kernel_im2col_rows(spec, c, o), image_bytes

    def run(self, tmap: TensorMap, coords, offsets, *, box_offset: int = 0, image_bytes: int | None = None,
            poison: int = POISON, checked: bool = True) -> np.ndarray:
        """(L, image_bytes) uint8 images of loads at `coords` (L x rank) with `offsets` (L x rank - 2, or one row
        for all), NumPy order, checked by the oracle's rules before the launch (``checked=False``: not, for the
        hazard tests, which run it in a child process)."""
        rows, image_bytes = self._prepare(tmap, coords, offsets, box_offset, image_bytes, checked)
        return self._run_rows(tmap, rows, box_offset, image_bytes, poison)

    def launch(self, tmap: TensorMap, coords, offsets, *, box_offset: int = 0, image_bytes: int | None = None,
               poison: int = POISON, digests: bool = False) -> tiled_probe.PendingImages:
        """`run`'s loads in one launch (at most MAX_IMAGES_BYTES of images), returned at once: the host computes
        the oracle while the GPU loads; `PendingImages.wait()` gives what `run` gives (`digests`: and
        `PendingImages.digests()` the images' digests)."""
        rows, image_bytes = self._prepare(tmap, coords, offsets, box_offset, image_bytes, True)
        return self._launch_rows(tmap, rows, box_offset, image_bytes, poison, digests)


def describe_im2col_mismatch(spec: Im2colSpec, coords, offsets, box_offset: int, got: np.ndarray,
                             want: np.ndarray, limit: int = 8) -> str:
    """The spec, the load and its first differing bytes (which pixel row and byte, before the swizzle)."""
    diff = np.flatnonzero(got != want)
    lines = [f"im2col load at {tuple(int(v) for v in coords)} offsets {tuple(int(v) for v in offsets)} (NumPy "
             f"order), box offset {box_offset}: {diff.size} of {got.size} bytes differ", spec.describe()]
    pitch = spec.row_pitch_bytes
    lines += mismatch_lines(diff[:limit], got, want, box_offset, lambda rel: (
        f"pixel row {rel // pitch} (after the swizzle), byte {rel % pitch}" if 0 <= rel < spec.smem_bytes
        else "outside the rows"))
    return "\n".join(lines)


def check_im2col_loads(spec: Im2colSpec, global_bytes, coords, offsets, *, target=None, box_offset: int = 0,
                       poison: int = POISON, probe: Im2colProbe | None = None, max_reports: int = 3) -> ImageCheck:
    """Encode `spec` for `target`, run the loads, compare every image with the oracle bit for bit.
    `global_bytes`: the host copy of the device bytes from the map's address."""
    c, o = oracle.check_im2col_coordinates(spec, coords, offsets)
    tmap = encode_im2col(spec, target)
    owned = probe is None
    probe = probe or Im2colProbe()
    try:
        images = probe.run(tmap, c, o, box_offset=box_offset, poison=poison)
    finally:
        if owned:
            probe.close()
    want = oracle.im2col_images(spec, global_bytes, c, o, box_offset=box_offset, image_bytes=images.shape[1],
                                poison=poison)
    bad = np.flatnonzero((images != want).any(axis=1)).tolist()
    reports = [describe_im2col_mismatch(spec, c[i], o[i], box_offset, images[i], want[i]) for i in bad[:max_reports]]
    return ImageCheck(spec, len(c), bad, "\n\n".join(reports))
