"""The picture of a failed load: the box's image as the oracle lays it out (labels from `draw_image`), every cell
whose bytes differ between what was expected and what came back marked, its bytes spelled out on a second line.

The fuzz reproducers, `drvtma repro` and the pytest plugin's `tma_check` write it beside their JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError
from ..tma.tiled.spec import TensorMapSpec
from .image import SWIZZLE_PERIOD, Picture, draw_image
from .scene import build
from .svg import svg_text


@dataclass
class Difference:
    """Per element offset of the picture whose bytes differ, the second line its cell shows; the notes."""

    wrong: set[int] = field(default_factory=set)
    text: dict[int, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    mark_label = "differs (expected != got)"

    def feed_label(self, offsets) -> str:
        hits = [self.text[o] for o in offsets if o in self.text]
        return (hits[0] + (f" +{len(hits) - 1}" if len(hits) > 1 else "")) if hits else ""

    def notes(self) -> list[str]:
        return self.lines


def as_bytes(value, name: str) -> np.ndarray:
    """Image bytes from a NumPy array, bytes or a hex string."""
    if isinstance(value, str):
        try:
            return np.frombuffer(bytes.fromhex(value), np.uint8)
        except ValueError:
            raise ArgumentError("show_option", name, value[:40], "give the image's bytes as hex") from None
    return np.ascontiguousarray(value).view(np.uint8).reshape(-1)


def _held(picture: Picture, offset: int) -> str:
    e = picture.element_at(offset)
    if e is None:
        return "outside the box"
    return {"fill": "the out-of-bounds fill", "padding": "padding"}.get(e.kind, f"tensor element {e.coords}")


def difference(picture: Picture, box_offset: int, expected, got) -> Difference:
    """Compare two images of the probe (the box `box_offset` bytes in) over the picture's cells."""
    want, have = as_bytes(expected, "expected"), as_bytes(got, "got")
    if want.size != have.size:
        raise ArgumentError("show_option", "got", f"{have.size} bytes", f"give {want.size} bytes, as expected has")
    size = picture.spec.itemsize
    out = Difference()
    diff = np.flatnonzero(want != have)
    inside = [int(p) - box_offset for p in diff if 0 <= int(p) - box_offset < picture.image_bytes]
    for rel in inside:
        start = rel // size * size
        if start in out.wrong:
            continue
        out.wrong.add(start)
        e, g = (want[box_offset + start:box_offset + start + size], have[box_offset + start:box_offset + start + size])
        out.text[start] = f"e:{e[::-1].tobytes().hex()} g:{g[::-1].tobytes().hex()}"  # little-endian element values
    out.lines.append("FAILURE: labels = what the oracle puts in each cell; a red cell's bytes differ, its second "
                     "line = expected (e) and got (g) element values in hex, little-endian")
    if diff.size:
        p = int(diff[0])
        rel = p - box_offset
        out.lines.append(f"MISMATCH: {diff.size} byte(s) differ in {len(out.wrong)} element(s) of the box"
                         + (f" and {diff.size - len(inside)} byte(s) outside it" if diff.size > len(inside) else "")
                         + f"; first: image byte {p} (box byte {rel}, which holds {_held(picture, rel)}): "
                         f"expected 0x{int(want[p]):02x}, got 0x{int(have[p]):02x}")
    else:
        out.lines.append("no difference: expected and got agree")
    return out


def failure_svg(spec: TensorMapSpec, coords, box_offset: int, expected, got, *, unit: str = "chunk") -> str:
    """The SVG of one failed box: `expected` and `got` are the probe's whole image (bytes, array or hex), the box
    written `box_offset` bytes in (the image 1024-byte aligned, so the swizzle phase is `box_offset` mod 1024)."""
    picture = draw_image(spec, coords, base_offset=int(box_offset) % SWIZZLE_PERIOD)
    return svg_text(build(picture, unit=unit, over=difference(picture, int(box_offset), expected, got)))
