"""Pictures where failures are reported, without a GPU: a planted oracle bug makes a fuzz campaign (the oracle stands
in for the device) and a user's pytest test (through the plugin's `tma_check`) fail, and each leaves an SVG beside
its JSON reproducer whose marked cells are exactly the differing ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from test_fuzz_cpu import swap_two_bytes

from drvtma.cli.main import main
from drvtma.errors import ArgumentError
from drvtma.fuzz import loads as fuzz_loads
from drvtma.show.scene import WRONG
from drvtma.testing import check_images
from drvtma.testing.children import child_env
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.spec import TensorMapSpec

NS = "{http://www.w3.org/2000/svg}"


def marked(svg_path: Path) -> dict[int, str]:
    """Cell offset -> second line of every cell the picture marks (red text), and the legend holds the mark."""
    root = ET.parse(svg_path).getroot()
    texts = list(root.iter(f"{NS}text"))
    assert any(t.text == "differs (expected != got)" for t in texts if t.get("class") == "legend")
    assert any(r.get("stroke") == WRONG for r in root.iter(f"{NS}rect"))
    return {int(t.get("data-offset")): t.text for t in texts
            if t.get("class") == "feed" and t.get("fill") == WRONG}


def differing_cells(expected: bytes, got: bytes, box_offset: int) -> set[int]:
    diff = np.flatnonzero(np.frombuffer(expected, np.uint8) != np.frombuffer(got, np.uint8))
    return {(int(p) - box_offset) // 16 * 16 for p in diff}


def check_cells(svg_path: Path, expected_hex: str, got_hex: str, box_offset: int, itemsize: int) -> None:
    want, have = bytes.fromhex(expected_hex), bytes.fromhex(got_hex)
    cells = marked(svg_path)
    assert set(cells) == differing_cells(want, have, box_offset)
    for off, text in cells.items():  # the cell's first differing element, its bytes as expected and as got
        e, g = re.match(r"e:([0-9a-f]+) g:([0-9a-f]+)", text).groups()
        first = next(p for p in range(off, off + 16) if want[box_offset + p] != have[box_offset + p])
        start = box_offset + first // itemsize * itemsize
        assert bytes.fromhex(e)[::-1] == want[start:start + itemsize]
        assert bytes.fromhex(g)[::-1] == have[start:start + itemsize]


def test_a_failing_fuzz_case_leaves_its_picture_beside_the_reproducer(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(fuzz_loads, "expected_images", swap_two_bytes(fuzz_loads.expected_images))
    out = tmp_path / "out"
    rc = main(["fuzz", "loads", "--examples", "12", "--seed", "5", "--fake-device", "--quiet", "--out", str(out),
               "--no-db", "--max-shrinks", "1"])
    text = capsys.readouterr().out
    assert rc == 1
    svgs = sorted(out.glob("repro-*.svg"))
    assert len(svgs) == 1 and f"picture: {svgs[0]}" in text, text  # the first failing case's
    path = svgs[0].with_suffix(".json")
    d = json.loads(path.read_text())
    assert d["picture"] == svgs[0].name
    spec = TensorMapSpec.from_dict(d["case"]["spec"])
    check_cells(svgs[0], d["result"]["expected"], d["result"]["got"], d["case"]["box_offset"], spec.itemsize)
    # drvtma repro draws the replayed failure beside the file it was given
    svgs[0].unlink()
    assert main(["repro", str(path), "--fake-device"]) == 1
    assert f"picture: {svgs[0]}" in capsys.readouterr().out and svgs[0].exists()
    check_cells(svgs[0], d["result"]["expected"], d["result"]["got"], d["case"]["box_offset"], spec.itemsize)


PLUGIN_TEST = '''
import numpy as np
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.spec import TensorMapSpec

def test_my_loads(tma_check):
    spec = TensorMapSpec.create("bfloat16", (64, 64), (16, 64), swizzle=3).replace(base_address=1 << 20)
    g = np.random.default_rng(1).integers(0, 256, 64 * 64 * 2, dtype=np.uint8)
    coords = [[0, 0], [16, 0], [48, 0]]
    got = oracle.load_images(spec, g, coords, box_offset=256)  # stands in for what the device wrote
    want = got.copy()  # the planted oracle bug: two elements of the second box swapped
    want[1, [256 + 2, 256 + 3, 256 + 130, 256 + 131]] = want[1, [256 + 130, 256 + 131, 256 + 2, 256 + 3]]
    tma_check(spec, coords, got, got)  # agreeing images pass
    tma_check(spec, coords, got, want, box_offset=256)
'''


def test_a_failing_plugin_test_leaves_its_picture_beside_the_reproducer(tmp_path):
    (tmp_path / "test_user.py").write_text(PLUGIN_TEST)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "drvtma.testing.plugin", "--basetemp", str(tmp_path / "bt"), str(tmp_path / "test_user.py")],
                          capture_output=True, text=True, cwd=tmp_path, env=child_env(), timeout=120)
    out = proc.stdout
    assert "1 failed" in out and "1 of 3 boxes differ" in out, out
    svg = Path(re.search(r"picture \(expected vs got\): (\S+\.svg)", out).group(1))
    repro = Path(re.search(r"reproducer: (\S+\.json)", out).group(1))
    assert svg.parent == repro.parent and svg.stem == repro.stem == "test_my_loads"
    d = json.loads(repro.read_text())
    assert d["coordinates"] == [16, 0] and d["picture"] == svg.name
    check_cells(svg, d["expected"], d["got"], d["box_offset"], 2)


def test_check_images_passes_agreeing_images_and_names_wrong_shapes(tmp_path):
    spec = TensorMapSpec.create("uint8", (8, 32), (8, 32)).replace(base_address=1 << 20)
    g = np.arange(256, dtype=np.uint8)
    img = oracle.load_images(spec, g, [[0, 0]])
    assert check_images(spec, [[0, 0]], img, img, out=tmp_path) is None and not list(tmp_path.iterdir())
    with pytest.raises(ArgumentError, match="got"):
        check_images(spec, [[0, 0]], img[:, :16], img, out=tmp_path)
