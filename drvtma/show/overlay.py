"""What a wgmma operand reads from a TMA image: for each k-step's descriptor, the (row, k) each cell feeds, and
where the image does not hold the element the instruction expects there.

Addresses come from `wgmma.oracle.element_addresses` (any descriptor, right or wrong); the element an address holds
comes from the TMA oracle's picture (`image.draw_image`); the element expected is the tile's (row, k) as
`wgmma.layout.tile_layout` describes the box: K-major boxes (panels, MN rows, K), MN-major (atoms, K rows, MN).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError, WgmmaError
from ..wgmma.descriptor import SmemDescriptor
from ..wgmma.dtypes import M, wgmma_type
from ..wgmma.layout import descriptor_for, tile_layout
from ..wgmma.oracle import element_addresses
from .image import Picture

# The wgmma type whose addresses a map of each element type is read as (addresses depend on the size only).
_READ_AS = {"BFLOAT16": "bf16", "FLOAT16": "f16", 4: "tf32", 2: "f16", 1: "e4m3"}


@dataclass
class Overlay:
    """Per image byte offset of an element, the (k-step, row, k) it feeds; the offsets read wrongly; why."""

    operand: str
    major: str
    descriptors: list[SmemDescriptor]
    feeds: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    wrong: set[int] = field(default_factory=set)
    first_mismatch: str = ""
    reads: int = 0  # elements read, all k-steps
    mark_label = "wrong read"  # the legend's word for a marked cell

    def notes(self) -> list[str]:
        """The lines under the picture: what the second line of a cell says, the descriptors, the verdict."""
        out = [f"wgmma operand {self.operand}, {self.major}-major: second line = k-step s, operand row r, k it "
               f"feeds; {len(self.descriptors)} descriptor(s):"]
        out += [f"  k-step {s}: {d.describe()}" for s, d in enumerate(self.descriptors)]
        out.append(f"MISMATCH: {len(self.wrong)} image element(s) read wrongly; first: {self.first_mismatch}"
                   if self.wrong else f"every one of the {self.reads} reads finds the element it expects")
        return out

    def feed_label(self, offsets) -> str:
        """Which (row, k) the elements at `offsets` feed: "s0 r3 k0-7" per k-step (rows or ks in a run)."""
        out = []
        items = sorted(f for o in offsets for f in self.feeds.get(o, ()))
        for s in sorted({f[0] for f in items}):
            rows = sorted({f[1] for f in items if f[0] == s})
            ks = sorted({f[2] for f in items if f[0] == s})
            out.append(f"s{s} " + (f"r{_span(rows)} k{_span(ks)}" if len(rows) == 1 or len(ks) == 1
                                   else f"{len(rows)}r x {len(ks)}k"))
        return " ".join(out)


def _span(values) -> str:
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def read_type(picture: Picture):
    spec = picture.spec
    return wgmma_type(_READ_AS.get(spec.dtype.name, _READ_AS[spec.itemsize]))


def overlay(picture: Picture, operand: str, major: str = "K", descriptors=None, *, n: int | None = None) -> Overlay:
    """The reads of operand "A" (64 rows) or "B" (`n` rows, default the tile's) over `picture`, by the descriptors
    `descriptor_for` gives for the image's own address (default) or by `descriptors` (one per k-step)."""
    if operand not in ("A", "B"):
        raise ArgumentError("show_option", "wgmma", operand, "use A or B")
    spec = picture.spec
    t = read_type(picture)
    lay = tile_layout(spec, major)
    rows = M if operand == "A" else (lay.mn_extent if n is None else n)
    if descriptors is None:
        descriptors = descriptor_for(spec, picture.base_offset, operand, major, n=rows)
    else:
        descriptors = [d if isinstance(d, SmemDescriptor) else SmemDescriptor.decode(d) for d in descriptors]
    if rows > lay.mn_extent:
        raise WgmmaError("box_rows", "box", spec.box, f"load at least {rows} MN elements for operand {operand}",
                         f"the tile holds {lay.mn_extent}")
    out = Overlay(operand, major, list(descriptors))
    r = np.arange(rows)[:, None]
    for s, desc in enumerate(out.descriptors):
        addresses = element_addresses(desc, t, rows, major) - picture.base_offset
        kk = s * t.k + np.arange(t.k)[None, :]
        expected = _expected(picture, lay, np.broadcast_to(r, addresses.shape), np.broadcast_to(kk, addresses.shape))
        for (i, j), off in np.ndenumerate(addresses):
            off = int(off)
            out.reads += 1
            out.feeds.setdefault(off, []).append((s, i, j))
            held = picture.element_at(off)
            want = expected[i][j]
            if held is not None and held.kind == "data" and held.coords == want:
                continue
            out.wrong.add(off)
            if not out.first_mismatch:
                out.first_mismatch = _words(operand, s, i, j, off, held, want, picture.image_bytes)
    return out


def _expected(picture: Picture, lay, r: np.ndarray, k: np.ndarray) -> list:
    """The global coordinates of tile element (row, k) for every read: the box's own index plus its corner."""
    spec = picture.spec
    inner = spec.box[-1]
    if lay.major == "K":  # box (panels, MN rows, K) or (MN rows, K)
        index: tuple[np.ndarray, ...] = (k // inner, r, k % inner)
    else:  # box (MN atoms, K rows, MN) or (K rows, MN)
        index = (r // inner, k, r % inner)
    if spec.rank == 2:
        index = index[1:]
    corner = picture.coords
    return [[tuple(int(corner[a] + index[a][i, j]) for a in range(spec.rank)) for j in range(r.shape[1])]
            for i in range(r.shape[0])]


def _words(operand, s, i, j, off, held, want, image_bytes) -> str:
    where = f"k-step {s}: {operand}[row {i}, k {j}] (tensor element {want})"
    if held is None:
        return f"{where} is read from byte {off}, outside the {image_bytes}-byte image"
    what = {"fill": "the out-of-bounds fill", "padding": "padding the load never writes"}.get(
        held.kind, f"tensor element {held.coords}")
    return f"{where} is read from image byte {off}, which holds {what}"

