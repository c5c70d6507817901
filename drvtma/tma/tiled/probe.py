"""Batched load probes on the GPU: one launch loads many boxes of one map and returns their raw shared memory.

`run_load_probe` runs cu/tma/load_probe.cu; `check_loads` compares the images with drvtma.tma.tiled.oracle byte for
byte and reports the spec, the coordinates and the first mismatching bytes. One cubin serves every spec and rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ...runtime.driver import Resource, ScratchBuffers
from ...runtime.status import StatusBuffer
from . import oracle
from .encode import TensorMap, encode_tiled
from .spec import TensorMapSpec

PROBE_SOURCE = "tma/load_probe.cu"
PROBE_KERNEL = "load_probe"
PROBE_THREADS = 128
IMAGE_ALIGN_SLACK = 1024  # the kernel aligns its image to 1024 B inside the dynamic region
POISON = 0xA5A5A5A5  # what the probes fill shared memory with; pass the same to oracle.load_images
MAX_IMAGES_BYTES = 256 << 20  # per launch; larger batches are split


def check_box_offset(box_offset: int) -> None:
    if box_offset % oracle.SMEM_DST_ALIGNMENT:
        raise ValueError(f"box_offset {box_offset} must be a multiple of {oracle.SMEM_DST_ALIGNMENT}")


def check_image_bytes(spec, box_offset: int, image_bytes: int, what: str) -> None:
    """An image is whole 16-byte chunks and holds the load's footprint (`what`: "box", "rows") after box_offset."""
    if image_bytes % 16 or image_bytes < box_offset + spec.smem_bytes:
        raise ValueError(f"image_bytes {image_bytes} must be a multiple of 16 and hold the {what}")


def mismatch_lines(diff: np.ndarray, got: np.ndarray, want: np.ndarray, box_offset: int, where) -> list[str]:
    """One line per differing image byte at `diff`; `where(rel)` says what the byte `rel` past box_offset is."""
    return [f"  image byte {int(pos)}: got 0x{int(got[pos]):02x}, expected 0x{int(want[pos]):02x} "
            f"({where(int(pos) - box_offset)})" for pos in diff]


class ImageProbe(Resource):
    """A compiled image probe (cu/tma/*_probe.cu: one CTA per load, a row of ints each, poisoned images, bounded
    waits) and its reusable device scratch; subclasses name the kernel and check their loads."""

    SOURCE = PROBE_SOURCE
    KERNEL = PROBE_KERNEL

    def __init__(self):
        from ...runtime.kernel import load_module

        self.kernel = load_module(self.SOURCE).kernel(self.KERNEL)
        self.status = StatusBuffer()
        self.scratch = ScratchBuffers(minimum=1 << 16)

    def _launch_chunk(self, tmap: TensorMap, chunk: np.ndarray, box_offset: int, image_bytes: int, poison: int,
                      digests: bool = False):
        """One launch of the chunk's rows -> (the images' buffer, the digests' buffer or None)."""
        spec = tmap.spec
        assert spec is not None  # the callers refused a map without one
        chunk = np.ascontiguousarray(chunk)
        coords_buf = self.scratch.get("coords", chunk.nbytes)
        images_buf = self.scratch.get("images", len(chunk) * image_bytes)
        digests_buf = self.scratch.get("digests", 8 * len(chunk)) if digests else None
        coords_buf.upload(chunk)
        self.kernel.launch(tmap, spec.rank, coords_buf, box_offset, image_bytes, spec.expect_tx_bytes,
                           poison & 0xFFFFFFFF, images_buf, digests_buf or 0, self.status, grid=(len(chunk), 1, 1),
                           block=(PROBE_THREADS, 1, 1), shared_mem=image_bytes + IMAGE_ALIGN_SLACK)
        return images_buf, digests_buf

    def _run_rows(self, tmap: TensorMap, rows: np.ndarray, box_offset: int, image_bytes: int,
                  poison: int) -> np.ndarray:
        """(len(rows), image_bytes) images, one per kernel row, in launches of at most MAX_IMAGES_BYTES."""
        out = np.empty((len(rows), image_bytes), dtype=np.uint8)
        per_launch = max(1, MAX_IMAGES_BYTES // image_bytes)
        self.status.reset()  # timeouts add up over the launches; one check after the last
        for start in range(0, len(rows), per_launch):
            chunk = rows[start:start + per_launch]
            images_buf, _ = self._launch_chunk(tmap, chunk, box_offset, image_bytes, poison)
            out[start:start + len(chunk)] = images_buf.download(np.uint8, (len(chunk), image_bytes))
        self.status.check(self.KERNEL)
        return out

    def _launch_rows(self, tmap: TensorMap, rows: np.ndarray, box_offset: int, image_bytes: int,
                     poison: int, digests: bool = False) -> PendingImages:
        """One launch of every row, returned at once (`PendingImages.wait()` downloads): the host computes the
        oracle while the GPU loads. One pending launch at a time: the next launch reuses the scratch buffers.
        `digests`: the kernel also digests each image (`PendingImages.digests()`)."""
        if len(rows) * image_bytes > MAX_IMAGES_BYTES:
            raise ValueError(f"{len(rows)} images of {image_bytes} B exceed one launch "
                             f"({MAX_IMAGES_BYTES} B): use run()")
        self.status.reset()
        images_buf, digests_buf = self._launch_chunk(tmap, rows, box_offset, image_bytes, poison, digests)
        return PendingImages(self, images_buf, (len(rows), image_bytes), digests_buf)

    def _parts(self) -> tuple:
        return self.scratch, self.status


class LoadProbe(ImageProbe):
    """The compiled tiled-load probe kernel and reusable device scratch (coordinates, images, status)."""

    def _prepare(self, tmap: TensorMap, coords, box_offset: int, image_bytes: int | None):
        spec = cast("TensorMapSpec | None", tmap.spec)  # a tiled map's (Im2colProbe takes the im2col ones)
        if spec is None:
            raise ValueError("the probe needs a TensorMap encoded from a TensorMapSpec")
        c = oracle.check_load_coordinates(spec, coords)
        check_box_offset(box_offset)
        image_bytes = oracle.image_bytes_for(spec, box_offset) if image_bytes is None else image_bytes
        check_image_bytes(spec, box_offset, image_bytes, "box")
        return spec, oracle.kernel_coordinates(spec, c), image_bytes

    def run(self, tmap: TensorMap, coords, *, box_offset: int = 0, image_bytes: int | None = None,
            poison: int = POISON) -> np.ndarray:
        """(N, image_bytes) uint8 images of loads at `coords` (N x rank, NumPy order), checked before launch."""
        _, tma_coords, image_bytes = self._prepare(tmap, coords, box_offset, image_bytes)
        return self._run_rows(tmap, tma_coords, box_offset, image_bytes, poison)

    def launch(self, tmap: TensorMap, coords, *, box_offset: int = 0, image_bytes: int | None = None,
               poison: int = POISON, digests: bool = False) -> PendingImages:
        """Start one launch (at most MAX_IMAGES_BYTES of images) and return at once; `PendingImages.wait()` gives
        what `run` gives (`digests`: and `PendingImages.digests()` the images' digests)."""
        _, tma_coords, image_bytes = self._prepare(tmap, coords, box_offset, image_bytes)
        return self._launch_rows(tmap, tma_coords, box_offset, image_bytes, poison, digests)


class PendingImages:
    """A launched probe whose images are not downloaded yet (`LoadProbe.launch`, `Im2colProbe.launch`)."""

    def __init__(self, probe: ImageProbe, images_buf, shape: tuple[int, int], digests_buf=None):
        self._probe, self._buf, self._shape, self._digests = probe, images_buf, shape, digests_buf

    def wait(self, into=None) -> np.ndarray:
        """Download the images (a synchronous copy: it waits for the launch) and check the probe's status; `into`:
        a host scratch to download into (runtime.host.PinnedScratch; the images are then valid until its next use)."""
        out = self._buf.download(np.uint8, self._shape, into=into)
        self._probe.status.check(self._probe.KERNEL)
        return out

    def digests(self) -> np.ndarray:
        """The kernel's digest of each image ((N,) uint64, as oracle.image_digests; waits for the launch) and the
        probe's status checked: 8 bytes an image to download instead of the image. `wait()` may follow."""
        if self._digests is None:
            raise ValueError("this launch made no digests: launch with digests=True")
        out = self._digests.download(np.uint64, (self._shape[0],))
        self._probe.status.check(self._probe.KERNEL)
        return out


_default_probe: LoadProbe | None = None


def default_probe() -> LoadProbe:
    global _default_probe
    if _default_probe is None:
        _default_probe = LoadProbe()
    return _default_probe


def run_load_probe(spec: TensorMapSpec, coords_list, base_offset: int = 0, *, target=None,
                   image_bytes: int | None = None, poison: int = POISON,
                   probe: LoadProbe | None = None) -> np.ndarray:
    """Encode `spec` (for `target`, else its base_address), load a box per coordinate set, return the images."""
    tmap = encode_tiled(spec, target)
    return (probe or default_probe()).run(tmap, coords_list, box_offset=base_offset, image_bytes=image_bytes,
                                          poison=poison)


@dataclass
class ImageCheck:
    """The outcome of comparing probe images with the oracle for one spec, tiled or im2col: how many loads ran,
    the indices of those whose image differs, and the first few described."""

    spec: object
    loads: int
    bad_loads: list[int] = field(default_factory=list)
    report: str = ""

    @property
    def ok(self) -> bool:
        return not self.bad_loads


def describe_mismatch(spec: TensorMapSpec, coords, box_offset: int, got: np.ndarray, want: np.ndarray,
                      limit: int = 8) -> str:
    """The spec, the coordinates and the first differing bytes (offset, got, expected, what the oracle put there)."""
    diff = np.flatnonzero(got != want)
    lines = [f"load at coordinates {tuple(int(v) for v in coords)} (NumPy order), box offset {box_offset}: "
             f"{diff.size} of {got.size} bytes differ", spec.describe()]
    pitch = spec.row_pitch_bytes
    lines += mismatch_lines(diff[:limit], got, want, box_offset, lambda rel: (
        f"box byte {rel}, row {rel // pitch}, byte {rel % pitch} of the pitch (before swizzle)"
        if 0 <= rel < spec.smem_bytes else "outside the box footprint"))
    return "\n".join(lines)


def check_loads(spec: TensorMapSpec, global_bytes, coords_list, base_offset: int = 0, *, target=None,
                poison: int = POISON, probe: LoadProbe | None = None, max_reports: int = 3) -> ImageCheck:
    """Load every box through `spec` on the GPU (drvtma's probe) and compare each image with the oracle, bit for bit.

    Parameters
    ----------
    spec : TensorMapSpec
        The map; its base address (or `target`) holds the tensor.
    global_bytes : array-like of uint8
        The host copy of the device bytes from that address.
    coords_list : sequence of coordinate tuples
        One per load, NumPy order.
    base_offset : int
        Where the box lands in its 1024-byte aligned shared-memory image.

    Returns
    -------
    ImageCheck
        How many loads ran, the indices of those that differ, and the first `max_reports` described.

    Raises
    ------
    TensorMapError
        A broken map rule or a coordinate out of TMA's range (before the GPU).
    NoGpuError, CudaError
        No GPU, or a driver error.
    """
    coords = oracle.check_load_coordinates(spec, coords_list)
    images = run_load_probe(spec, coords, base_offset, target=target, poison=poison, probe=probe)
    want = oracle.load_images(spec, global_bytes, coords, box_offset=base_offset, image_bytes=images.shape[1],
                              poison=poison)
    bad = np.flatnonzero((images != want).any(axis=1)).tolist()
    reports = [describe_mismatch(spec, coords[i], base_offset, images[i], want[i]) for i in bad[:max_reports]]
    return ImageCheck(spec, len(coords), bad, "\n\n".join(reports))
