"""`check_images`: compare the images a load probe (or your kernel) gave with the oracle's; on a difference, write a
JSON reproducer and the picture of the first differing box (`show.failure`, expected vs got, the differing cells
marked) and fail naming both. The plugin's `tma_check` fixture is this function writing into the test's tmp_path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ..errors import ArgumentError
from ..show.failure import failure_svg
from ..tma.tiled import oracle
from ..tma.tiled.probe import describe_mismatch
from ..tma.tiled.spec import TensorMapSpec

FAILURE_FORMAT = 1
HEX_LIMIT = 64 << 10  # images up to this size go into the JSON whole


def _images(value, name: str, boxes: int) -> np.ndarray:
    """(boxes, image bytes) of a NumPy array of any element type; ArgumentError for anything else."""
    a = np.ascontiguousarray(value)
    if a.dtype.hasobject or a.nbytes == 0 or a.nbytes % boxes:
        raise ArgumentError("show_option", name, f"{a.dtype} array of shape {a.shape}",
                            f"give one image of bytes per box ({boxes} boxes), e.g. (boxes, image bytes) uint8")
    return a.reshape(-1).view(np.uint8).reshape(boxes, -1)


def check_images(spec: TensorMapSpec, coords, got, want, *, box_offset: int = 0, out=".",
                 name: str = "tma-failure") -> None:
    """`got` and `want`: (boxes, image bytes) of the loads at `coords` (NumPy order), the box `box_offset` bytes
    into a 1024-byte aligned image. Returns when they agree; else writes `out/name.json` and `out/name.svg`
    (the first differing box) and raises AssertionError with the mismatch and both paths."""
    c = oracle.check_load_coordinates(spec, coords)
    got, want = _images(got, "got", len(c)), _images(want, "want", len(c))
    if got.shape != want.shape:
        raise ArgumentError("show_option", "got", got.shape, f"give images of the shape want has, {want.shape}")
    bad = np.flatnonzero((got != want).any(axis=1)).tolist()
    if not bad:
        return
    first = bad[0]
    detail = describe_mismatch(spec, c[first], box_offset, got[first], want[first])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    small = want.shape[1] <= HEX_LIMIT
    record = {"drvtma_failure": FAILURE_FORMAT, "spec": spec.to_dict(), "coordinates": c[first].tolist(),
              "box_offset": int(box_offset), "boxes_differ": len(bad), "boxes": len(c), "detail": detail,
              "expected": want[first].tobytes().hex() if small else None,
              "got": got[first].tobytes().hex() if small else None, "picture": stem.name + ".svg"}
    json_path, svg_path = stem.with_suffix(".json"), stem.with_suffix(".svg")
    json_path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    svg_path.write_text(failure_svg(spec, c[first], box_offset, want[first], got[first]))
    raise AssertionError(f"{len(bad)} of {len(c)} boxes differ from the oracle; the first:\n{detail}\n"
                         f"reproducer: {json_path}\npicture (expected vs got): {svg_path}")
