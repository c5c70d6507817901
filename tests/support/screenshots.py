"""Pictures looked at as a person would: an SVG rendered to a PNG screenshot by headless Chromium, and the PNG read
back with a small decoder (zlib and NumPy, no new dependency) so a test can see whether anything is drawn.

`python tests/support/screenshots.py` renders the committed docs/pictures/*.svg to the PNGs the README shows.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BROWSERS = ("chromium", "chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
# Rendered to PNG and shown by the README: a tiled image, a descriptor overlay with a mismatch, a failure picture.
README_PICTURES = ("bf16-16x64-128B-base512", "wgmma-B16-wrong-swizzle", "load-failure")


def browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def svg_size(svg: str) -> tuple[int, int]:
    w, h = re.search(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg).groups()
    return int(w), int(h)


def screenshot(svg_path: Path, png_path: Path, timeout: float = 120) -> tuple[int, int]:
    """Render `svg_path` at its own size into `png_path` (a fresh browser profile each time); its (width, height)."""
    w, h = svg_size(Path(svg_path).read_text())
    with tempfile.TemporaryDirectory(prefix="drvtma-chromium-") as profile:
        proc = subprocess.run([browser(), *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png_path}",
                               f"--window-size={w},{h}", Path(svg_path).resolve().as_uri()],
                              capture_output=True, text=True, timeout=timeout)
    if proc.returncode or not Path(png_path).exists():
        raise RuntimeError(f"chromium exit {proc.returncode}: {proc.stderr[-2000:]}")
    return w, h


def _paeth_row(line: bytearray, prior: bytes, bpp: int) -> None:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prior[i], prior[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF


def _unfilter(kind: int, line: bytearray, prior: bytes, bpp: int) -> None:
    if kind == 1:
        for i in range(bpp, len(line)):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:
        line[:] = ((np.frombuffer(line, np.uint8).astype(np.uint16) + np.frombuffer(prior, np.uint8)) & 0xFF
                   ).astype(np.uint8).tobytes()
    elif kind == 3:
        for i in range(len(line)):
            line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + prior[i]) // 2) & 0xFF
    elif kind == 4:
        _paeth_row(line, prior, bpp)
    elif kind:
        raise ValueError(f"PNG filter {kind}")


def decode_png(data: bytes) -> np.ndarray:
    """(height, width, channels) uint8 of an 8-bit, non-interlaced grey, RGB or RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, head = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    w, h, depth, colour, _, _, interlace = head
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour]
    if depth != 8 or interlace:
        raise ValueError(f"PNG depth {depth}, interlace {interlace}: not decoded here")
    raw, stride = zlib.decompress(idat), w * channels
    prior, rows = bytes(stride), []
    for y in range(h):
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        _unfilter(raw[y * (stride + 1)], line, prior, channels)
        rows.append(bytes(line))
        prior = rows[-1]
    return np.frombuffer(b"".join(rows), np.uint8).reshape(h, w, channels)


def failure_example() -> str:
    """The failure picture: a bf16 16 x 64 box (128B swizzle) at 512 mod 1024, where the device swapped the first
    two 16-byte chunks of box row 2 (what a wrong swizzle phase does)."""
    from drvtma.show.failure import failure_svg
    from drvtma.tma.tiled import oracle
    from drvtma.tma.tiled.spec import TensorMapSpec

    spec = TensorMapSpec.create("bfloat16", (64, 64), (16, 64), swizzle=3).replace(base_address=1 << 20)
    want = oracle.load_images(spec, np.arange(64 * 64, dtype=np.uint16).view(np.uint8), [[0, 0]], box_offset=512)[0]
    got = want.copy()
    got[512 + 256:512 + 272], got[512 + 272:512 + 288] = want[512 + 272:512 + 288], want[512 + 256:512 + 272]
    return failure_svg(spec, (0, 0), 512, want, got)


def main() -> int:
    if browser() is None:
        print("no chromium: apt-get install -y chromium", file=sys.stderr)
        return 1
    (ROOT / "docs" / "pictures" / "load-failure.svg").write_text(failure_example())
    for name in README_PICTURES:
        svg = ROOT / "docs" / "pictures" / f"{name}.svg"
        png = svg.with_suffix(".png")
        screenshot(svg, png)
        print(f"{png}: {png.stat().st_size} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
