"""A picture as drawing primitives (rectangles and texts in pixel units), drawn by `svg` and `png` alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .banks import BANKS, BankReport, bank_notes
from .grid import COLOURS, Cell, cells, check_choice
from .image import Picture
from .overlay import Overlay

if TYPE_CHECKING:
    from .failure import Difference

# Eight light colours (no red: red marks a wrong read); key mod 8 picks one, the period of the 128B swizzle.
PALETTE = ("#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#ffff99", "#8dd3c7", "#80b1d3", "#ccebc5")
FILL, PADDING, WRONG = "#bdbdbd", "#ffffff", "#d7191c"
CHAR_W, LINE_H, FONT = 6.6, 14, 11  # monospace advance, line height and size in pixels
MARGIN, OFFSET_W = 10, 52


@dataclass(frozen=True)
class Item:
    """Where a primitive stands, in pixels: a Rect's top-left corner, a Text's baseline start."""

    x: float
    y: float


@dataclass(frozen=True)
class Rect(Item):
    w: float
    h: float
    fill: str
    stroke: str = "#606060"
    width: float = 0.5
    dash: bool = False


@dataclass(frozen=True)
class Text(Item):
    text: str
    role: str  # "cell" (a cell's label: data-offset says which), "feed", "title", "note", "legend", "offset", "bank"
    offset: int = -1
    colour: str = "#000000"
    bold: bool = False


@dataclass(frozen=True)
class Scene:
    width: float
    height: float
    items: tuple

    def texts(self, role: str) -> list[Text]:
        return [t for t in self.items if isinstance(t, Text) and t.role == role]


def header(picture: Picture, *, with_spec: bool = True) -> list[str]:
    spec = picture.spec
    return [*(spec.describe().splitlines() if with_spec else ()),
            f"box at {picture.coords} (NumPy order); image at shared address {picture.base_offset} mod 1024, "
            f"{picture.image_bytes} B, {picture.pitch} B per line"]


def cell_fill(cell: Cell, colour: str) -> tuple[str, bool]:
    """The colour of a cell and whether its border is dashed (padding)."""
    kind = cell.kind
    if kind == "padding":
        return PADDING, True
    if kind == "fill":
        return FILL, False
    key = cell.key(colour)
    return (PALETTE[key % len(PALETTE)] if key >= 0 else FILL), False


def build(picture: Picture, *, unit: str = "chunk", colour: str = "row", over: Overlay | Difference | None = None,
          banks: tuple[BankReport, ...] = ()) -> Scene:
    """`over`: a wgmma overlay, or anything with its `wrong`, `feed_label`, `notes()` and `mark_label` (a
    failure's `show.failure.Difference`): marked cells get a red border, every cell its second line."""
    check_choice(colour, "colour", COLOURS)
    grid = cells(picture, unit)
    per_line = 2 if over else 1
    labels = [c.label for line in grid for c in line]
    feeds = {c.offset: over.feed_label(e.offset for e in c.elements) for line in grid for c in line} if over else {}
    longest = max([len(s) for s in labels] + [len(s) for s in feeds.values()] + [4])
    cw, ch = longest * CHAR_W + 8, per_line * LINE_H + 6
    items: list = []
    y: float = MARGIN + LINE_H
    for line in header(picture):
        items.append(Text(MARGIN, y, line, "title", bold=True))
        y += LINE_H
    y += 6
    for row in grid:
        items.append(Text(MARGIN, y + LINE_H, f"{row[0].offset:#06x}", "offset", colour="#606060"))
        for c in row:
            x = MARGIN + OFFSET_W + c.col * cw
            fill, dash = cell_fill(c, colour)
            wrong = over is not None and any(e.offset in over.wrong for e in c.elements)
            items.append(Rect(x, y, cw, ch, fill, WRONG if wrong else "#606060", 2.5 if wrong else 0.5, dash))
            items.append(Text(x + 4, y + LINE_H, c.label, "cell", c.offset))
            if over and feeds[c.offset]:
                items.append(Text(x + 4, y + 2 * LINE_H, feeds[c.offset], "feed", c.offset,
                                  WRONG if wrong else "#303030", bold=wrong))
        y += ch
    width: float = MARGIN * 2 + OFFSET_W + max(len(line) for line in grid) * cw if grid else 400
    y += 8
    notes = legend(picture, colour, unit, y, items, over.mark_label if over is not None else "wrong read")
    y = notes
    for line in _notes(over, banks):
        colour_ = WRONG if line.startswith("MISMATCH") else "#000000"
        items.append(Text(MARGIN, y + LINE_H, line, "note", colour=colour_, bold=colour_ == WRONG))
        y += LINE_H
    for report in banks:
        y, panel_w = bank_panel(report, y + 8, items)
        width = max(width, panel_w)
    width = max(width, MARGIN * 2 + CHAR_W * max(len(t.text) for t in items if isinstance(t, Text)))
    return Scene(width, y + MARGIN, tuple(items))


def bank_panel(report: BankReport, y: float, items: list) -> tuple[float, float]:
    """The worst warp request of a bank report as a grid: a column per bank, a row per wavefront, each cell the
    lanes whose words that bank serves in that wavefront (coloured by wavefront); returns (y below, width)."""
    acc = report.worst_request
    if not acc:
        return y, 0.0
    rows = max(a.wavefront for a in acc) + 1
    lanes = [[sorted({a.lane for a in acc if a.bank == b and a.wavefront == w}) for b in range(BANKS)]
             for w in range(rows)]
    texts = [[",".join(map(str, ls)) for ls in row] for row in lanes]
    cw = max(3, max(len(t) for row in texts for t in row)) * CHAR_W + 6
    items.append(Text(MARGIN, y + LINE_H, f"{report.pattern}: the worst request, {report.worst} wavefront(s) (ideal "
                      f"{report.ideal}): the lanes each bank serves, one row per wavefront", "bank", bold=True))
    y += LINE_H + 4
    x0 = MARGIN + OFFSET_W
    for b in range(BANKS):
        items.append(Text(x0 + b * cw + 2, y + LINE_H, f"b{b}", "bank", colour="#606060"))
    y += LINE_H + 2
    for w, row in enumerate(texts):
        items.append(Text(MARGIN, y + LINE_H, f"wf {w}", "bank", colour="#606060"))
        for b, text in enumerate(row):
            fill = PALETTE[w % len(PALETTE)] if text else PADDING
            items.append(Rect(x0 + b * cw, y, cw, LINE_H + 4, fill))
            if text:
                items.append(Text(x0 + b * cw + 3, y + LINE_H, text, "bank"))
        y += LINE_H + 4
    return y + 4, x0 + BANKS * cw + MARGIN


def legend(picture: Picture, colour: str, unit: str, y: float, items: list, mark: str = "wrong read") -> float:
    """Swatches: the palette's keys, fill, padding, a marked cell (`mark`); returns the y below them."""
    what = "box row" if colour == "row" else "chunk of its row (before the swizzle)"
    items.append(Text(MARGIN, y + LINE_H, f"legend: cell = one {'16-byte chunk' if unit == 'chunk' else 'element'}"
                      f" labelled with the global coordinates it holds (NumPy order, a..b = a run); colour = "
                      f"{what} mod 8", "legend"))
    y += LINE_H + 4
    x: float = MARGIN
    swatches = [(PALETTE[i], f"{i}", False) for i in range(len(PALETTE))]
    swatches += [(FILL, "fill (out of bounds)", False), (PADDING, "pad (never written)", True)]
    for fill, text, dash in swatches:
        items.append(Rect(x, y, 14, 12, fill, dash=dash))
        items.append(Text(x + 18, y + 10, text, "legend"))
        x += 18 + CHAR_W * len(text) + 12
    items.append(Rect(x, y, 14, 12, PADDING, WRONG, 2.5))
    items.append(Text(x + 18, y + 10, mark, "legend"))
    return y + 18


def _notes(over: Overlay | Difference | None, banks) -> list[str]:
    out = []
    if over is not None:
        out += over.notes()
    return out + bank_notes(banks)
