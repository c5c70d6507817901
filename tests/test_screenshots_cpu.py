"""The pictures looked at as a person would: headless Chromium (`.ci/run` installs it from Debian's packages)
renders a tiled image, a descriptor overlay with a mismatch and a failure picture to PNG screenshots; each must
show something, show the cells in the SVG's colours, and hold the legend. The README shows those renders."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from drvtma.show.scene import PALETTE, WRONG

from support.screenshots import README_PICTURES, ROOT, browser, decode_png, failure_example, screenshot, svg_size

# Chromium starts and renders for each picture (seconds each): `-m slow`, with the rest of the heavy tests.
pytestmark = pytest.mark.slow

PICTURES = ROOT / "docs" / "pictures"
NS = "{http://www.w3.org/2000/svg}"
MARKED = {"bf16-16x64-128B-base512": False, "wgmma-B16-wrong-swizzle": True, "load-failure": True}
MAX_PNG_BYTES = 300 << 10


def rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)


def near(pixels: np.ndarray, colour: str, tolerance: int = 10) -> np.ndarray:
    return (np.abs(pixels[..., :3].astype(np.int16) - rgb(colour)) <= tolerance).all(axis=-1)


def test_the_failure_picture_is_current():
    redraw = "redraw it: python tests/support/screenshots.py"
    assert (PICTURES / "load-failure.svg").read_text() == failure_example(), redraw


def test_png_decoder_reads_every_filter():
    import struct
    import zlib

    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    rows, prior = [], np.zeros(21, np.int16)
    for y, kind in enumerate([0, 1, 2, 3, 4]):  # encode each row with another filter, the decoder must undo it
        line = img[y].reshape(-1).astype(np.int16)
        left = np.concatenate([np.zeros(3, np.int16), line[:-3]])
        upleft = np.concatenate([np.zeros(3, np.int16), prior[:-3]])
        p = left + prior - upleft
        pa, pb, pc = abs(p - left), abs(p - prior), abs(p - upleft)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prior, upleft))
        pred = [0, left, prior, (left + prior) // 2, paeth][kind]
        rows.append(bytes([kind]) + ((line - pred) & 0xFF).astype(np.uint8).tobytes())
        prior = line

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 7, 5, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
    assert (decode_png(png) == img).all()


@pytest.mark.parametrize("name", README_PICTURES)
def test_readme_shows_the_renders(name):
    png = PICTURES / f"{name}.png"
    assert f"](docs/pictures/{name}.png)" in (ROOT / "README.md").read_text()
    assert png.stat().st_size < MAX_PNG_BYTES
    h, w = decode_png(png.read_bytes()).shape[:2]
    assert (w, h) == svg_size((PICTURES / f"{name}.svg").read_text()), "re-render: python tests/support/screenshots.py"


@pytest.mark.parametrize("name", README_PICTURES)
def test_a_screenshot_shows_the_cells_the_marks_and_the_legend(name, tmp_path):
    if browser() is None:
        pytest.skip("no chromium on PATH (apt-get install -y chromium): the pictures are not looked at")
    svg = PICTURES / f"{name}.svg"
    size = screenshot(svg, tmp_path / "shot.png")
    shot = decode_png((tmp_path / "shot.png").read_bytes())
    assert shot.shape[:2] == size[::-1]
    # not blank: many colours, spread over the picture
    assert shot[..., :3].std() > 20 and len(np.unique(shot[..., :3].reshape(-1, 3), axis=0)) > 50
    root = ET.parse(svg).getroot()
    # the cells are drawn in the SVG's colours: a corner inside each rectangle, clear of its label
    cells = [r for r in root.iter(f"{NS}rect") if r.get("fill") in PALETTE and float(r.get("width")) > 20]
    hits = [near(shot[int(float(r.get("y")) + float(r.get("height")) - 3), int(float(r.get("x")) + 3)],
                 r.get("fill")) for r in cells]
    assert cells and np.mean(hits) > 0.95
    # marked cells (a wrong read, a differing byte) show red above the legend (its swatch is red too); else none
    legend = [t for t in root.iter(f"{NS}text") if t.get("class") == "legend"]
    red = near(shot[:int(min(float(t.get("y")) for t in legend)) - 14], WRONG, 40).sum()
    assert (red > 100) if MARKED[name] else (red == 0)
    # the legend is on it: its line lies inside the screenshot and has text and every swatch colour in it
    y = max(float(t.get("y")) for t in legend)
    assert y + 4 < shot.shape[0] and max(float(t.get("x")) for t in legend) < shot.shape[1]
    band = shot[int(y) - 12:int(y) + 4]
    assert (band[..., :3].min(axis=-1) < 100).sum() > 200  # dark text pixels
    assert all(near(band, c).any() for c in PALETTE)
    assert re.search(r"legend: cell = one", ET.tostring(root, encoding="unicode"))
