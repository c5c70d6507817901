"""The image as a grid of cells (16-byte chunks or elements) with their labels; `expand_label` reads one back."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArgumentError
from .image import Element, Picture

UNITS = ("chunk", "element")
COLOURS = ("row", "chunk")  # colour a data cell by its box row, or by the chunk of the row it came from
CHUNK = 16


@dataclass(frozen=True)
class Cell:
    """One drawn cell: image line and column, its byte offset, the element slots it covers and its label."""

    line: int
    col: int
    offset: int
    elements: tuple[Element, ...]
    label: str

    @property
    def kind(self) -> str:
        kinds = {e.kind for e in self.elements}
        return kinds.pop() if len(kinds) == 1 else "mixed"

    def key(self, colour: str) -> int:
        """The colour key of its first data element (-1: none)."""
        for e in self.elements:
            if e.kind == "data":
                return e.box_row if colour == "row" else e.chunk
        return -1


def check_choice(value, parameter: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ArgumentError("show_option", parameter, value, f"use one of {', '.join(choices)}")
    return value


def label(elements) -> str:
    """Runs of the cell's elements: "3,8..15" (consecutive inner coordinates), "fill", "pad", "fill*2" (part)."""
    runs: list[list] = []
    for e in elements:
        last = runs[-1] if runs else None
        if last and e.kind == last[0] and (e.kind != "data" or (
                e.coords[:-1] == last[1][-1].coords[:-1] and e.coords[-1] == last[1][-1].coords[-1] + 1)):
            last[1].append(e)
        else:
            runs.append([e.kind, [e]])
    out = []
    for kind, items in runs:
        if kind == "data":
            head = ",".join(str(v) for v in items[0].coords)
            out.append(head if len(items) == 1 else f"{head}..{items[-1].coords[-1]}")
        else:
            word = "fill" if kind == "fill" else "pad"
            out.append(word if len(runs) == 1 else f"{word}*{len(items)}")
    return " ".join(out)


def expand_label(text: str, count: int) -> list:
    """The inverse of `label`: one entry per element, a coordinate tuple or "fill" / "pad"."""
    out: list = []
    for run in text.split(" "):
        word, _, n = run.partition("*")
        if word in ("fill", "pad"):
            out += [word] * (int(n) if n else count)
            continue
        head, _, last = run.partition("..")
        coords = tuple(int(v) for v in head.split(","))
        stop = int(last) if last else coords[-1]
        out += [coords[:-1] + (k,) for k in range(coords[-1], stop + 1)]
    return out


def cells(picture: Picture, unit: str = "chunk") -> list[list[Cell]]:
    """Lines of `picture.pitch` bytes, each a list of cells of 16 B (unit "chunk") or one element."""
    check_choice(unit, "unit", UNITS)
    size = picture.spec.itemsize
    step = CHUNK if unit == "chunk" else size
    per = step // size
    lines: list[list[Cell]] = []
    for start in range(0, picture.image_bytes, picture.pitch):
        row = []
        for col, off in enumerate(range(start, min(start + picture.pitch, picture.image_bytes), step)):
            els = picture.elements[off // size: off // size + per]
            row.append(Cell(len(lines), col, off, els, label(els)))
        lines.append(row)
    return lines
