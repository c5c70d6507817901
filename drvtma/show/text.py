"""A picture as compact terminal text: one line of cells per image line, the spec and a key above."""

from __future__ import annotations

from .banks import BankReport, bank_notes
from .grid import cells
from .image import Picture
from .overlay import Overlay
from .scene import header


def text_form(picture: Picture, *, unit: str = "chunk", over: Overlay | None = None,
              banks: tuple[BankReport, ...] = (), with_spec: bool = True) -> str:
    """Cells as their labels (`!` marks a wrong wgmma read); the (row, k) each cell feeds is only in the SVG.
    `with_spec=False` leaves out the spec's description (for a caller that printed it already)."""
    grid = cells(picture, unit)
    marks = [[("!" if over and any(e.offset in over.wrong for e in c.elements) else "") + c.label for c in line]
             for line in grid]
    w = max((len(m) for line in marks for m in line), default=4)
    out = header(picture, with_spec=with_spec)
    out.append(f"cells: {'16-byte chunks' if unit == 'chunk' else 'elements'}, each the global coordinates it "
               "holds (a..b: a run of the innermost axis); fill: out of bounds; pad: never written")
    out += [f"{line[0].offset:#06x} " + " ".join(m.ljust(w) for m in ms).rstrip() for line, ms in zip(grid, marks)]
    if over is not None:
        out += [f"wgmma {over.operand} k-step {s}: {d.describe()}" for s, d in enumerate(over.descriptors)]
        out.append(f"MISMATCH (! cells): {len(over.wrong)} element(s); first: {over.first_mismatch}" if over.wrong
                   else f"wgmma {over.operand}: every one of the {over.reads} reads finds the element it expects")
    out += bank_notes(banks)
    return "\n".join(out)
