"""drvtma show: every drawn label agrees with the oracles, the bank counts with a brute-force count, the command."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drvtma.errors import ArgumentError
from drvtma.show import PATTERNS, bank_report, build, draw_image, expand_label, overlay, svg_text, wavefronts
from drvtma.show.banks import requests
from drvtma.testing import load_cases
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.spec import SM90_SWIZZLES, OobFill, Swizzle, TensorMapSpec
from drvtma.wgmma.descriptor import WgmmaSwizzle
from drvtma.wgmma.layout import descriptor_for, spec_for_tile
from drvtma.wgmma.oracle import element_addresses, gather

SVG = "{http://www.w3.org/2000/svg}text"
POISONS = (0x5A5A5A5A, 0xA5A5A5A5)


def svg_texts(svg: str, role: str) -> dict[int, str]:
    """data-offset -> text of every <text> of that class (the picture as a reader's parser sees it)."""
    root = ET.fromstring(svg)
    return {int(t.get("data-offset")): t.text or "" for t in root.iter(SVG) if t.get("class") == role}


def in_bounds_count(spec: TensorMapSpec, c) -> int:
    steps = list(spec.element_strides)
    steps[-1] = 1
    return math.prod(sum(0 <= c[a] + j * steps[a] < spec.shape[a] for j in range(n))
                     for a, n in enumerate(spec.loaded_counts))


def check_labels(spec: TensorMapSpec, coords, base: int, unit: str, colour: str = "row", seed: int = 0) -> None:
    """Each cell's label, read back from the SVG, against the oracle's image of random global data."""
    pic = draw_image(spec, coords, base_offset=base)
    labels = svg_texts(svg_text(build(pic, unit=unit, colour=colour)), "cell")
    size = spec.itemsize
    step = 16 if unit == "chunk" else size
    assert sorted(labels) == list(range(0, pic.image_bytes, step))
    g = np.random.default_rng(seed).integers(0, 256, max(spec.extent_bytes, 16), dtype=np.uint8)
    images = [oracle.load_image(spec, g, coords, image_address=base, poison=p) for p in POISONS]
    fill = spec.dtype.nan_fill_bytes() if spec.oob_fill == OobFill.NAN else bytes(size)
    seen = []
    for off, text in labels.items():
        entries = expand_label(text, step // size)
        assert len(entries) == step // size, (off, text)
        for i, entry in enumerate(entries):
            at = slice(off + i * size, off + (i + 1) * size)
            got, other = images[0][at].tobytes(), images[1][at].tobytes()
            if entry == "pad":
                assert got != other, (off, text, "written, labelled pad")
                continue
            assert got == other, (off, text, "never written, labelled data")
            if entry == "fill":
                assert got == fill, (off, text)
                continue
            seen.append(entry)
            start = sum(x * s for x, s in zip(entry, spec.strides_bytes))
            raw = np.frombuffer(g[start:start + size].tobytes(), dtype=f"<u{size}")
            assert np.asarray(oracle.tma_load_convert(spec.dtype, raw)).astype(f"<u{size}").tobytes() == got, \
                (off, text)
    assert len(seen) == len(set(seen)) == in_bounds_count(spec, list(coords))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(load_cases(max_boxes=1, max_rank=3, max_dim=96, max_smem_bytes=4096, max_extent_bytes=1 << 20),
       st.sampled_from(range(0, 1024, 128)), st.sampled_from(("chunk", "element")),
       st.sampled_from(("row", "chunk")), st.integers(0, 1 << 16))
def test_labels_match_the_oracle(case, base, unit, colour, seed):
    spec, coords = case
    try:
        check_labels(spec, coords[0], base, unit, colour, seed)
    except ArgumentError as exc:  # overlapping strides (allow_overlap): one address, two coordinates
        assert exc.rule == "strides_overlap" and spec.allow_overlap


@pytest.mark.parametrize("swizzle", SM90_SWIZZLES)
@pytest.mark.parametrize("dtype,fill", [("bfloat16", "nan"), ("uint8", "zero"), ("float32", "nan"),
                                        ("float64", "zero")])
def test_every_swizzle_fill_and_element_stride(swizzle, dtype, fill):
    """The corners the random specs may miss: each swizzle, fills on both edges, strided outer axes."""
    size = {"bfloat16": 2, "uint8": 1, "float32": 4, "float64": 8}[dtype]
    span = max(16, {0: 16, 1: 32, 2: 64, 3: 128}[int(swizzle)])
    inner = span // size
    spec = TensorMapSpec.create(dtype, (5, 40, 3 * inner), (2, 12, inner), element_strides=(2, 3, 1),
                                swizzle=swizzle, oob_fill=fill)
    for coords, base in (((0, 0, 0), 0), ((3, -6, 2 * inner), 384), ((-1, 30, -inner), 896)):
        check_labels(spec, coords, base, "chunk")
        check_labels(spec, coords, base, "element")


def test_128b_base_offset_512_starts_at_chunk_4():
    pic = draw_image(TensorMapSpec.create("bfloat16", (64, 64), (64, 64), swizzle=3), base_offset=512)
    assert pic.elements[0].coords == (0, 32) and pic.elements[64 * 4].coords == (4, 0)


# ---------------------------------------------------------------------------------------------- wgmma overlay

def _tile_cases():
    for dtype in ("bf16", "tf32", "e4m3"):
        for major in ("K", "MN") if dtype == "bf16" else ("K",):
            for swizzle in (1, 2, 3):
                yield dtype, major, swizzle


@pytest.mark.parametrize("dtype,major,swizzle", list(_tile_cases()))
@pytest.mark.parametrize("base", [0, 512])
def test_overlay_against_the_wgmma_oracle(dtype, major, swizzle, base):
    """Right descriptors read every element they expect; a wrong swizzle is caught. The feed labels name exactly
    the k-steps whose addresses (wgmma.oracle) fall in each cell; wrong reads are where gather disagrees."""
    spec = spec_for_tile(dtype, major, swizzle, 64, 64 if dtype != "e4m3" else 128)
    pic = draw_image(spec, base_offset=base)
    right = overlay(pic, "B", major)
    assert not right.wrong and right.first_mismatch == ""
    wrong_swz = [replace(d, swizzle=WgmmaSwizzle((int(d.swizzle) % 3) + 1)) for d in right.descriptors]
    bad = overlay(pic, "B", major, wrong_swz)
    assert bad.wrong and "k-step" in bad.first_mismatch
    from drvtma.show.overlay import read_type

    t = read_type(pic)
    g = np.random.default_rng(1).integers(0, 256, spec.extent_bytes, dtype=np.uint8)
    image = oracle.load_image(spec, g, (0,) * spec.rank, image_address=base)
    for over in (right, bad):
        feeds = svg_texts(svg_text(build(pic, over=over)), "feed")
        for s, d in enumerate(over.descriptors):
            cells = {int(a) // 16 * 16 for a in (element_addresses(d, t, 64, major) - base).reshape(-1)
                     if 0 <= a < pic.image_bytes}
            assert cells == {off for off, text in feeds.items() if f"s{s} " in text + " "}
            addresses = element_addresses(d, t, 64, major) - base
            if addresses.min() < 0 or addresses.max() + t.itemsize > pic.image_bytes:
                assert over is bad and any(a < 0 or a >= pic.image_bytes for a in over.wrong)
                continue
            differs = gather(image, base, d, t, 64, major) != gather(image, base, right.descriptors[s], t, 64, major)
            assert {int(a) for a in addresses[differs]} <= over.wrong


# ---------------------------------------------------------------------------------------------- banks

def brute_force_wavefronts(addresses, width: int) -> int:
    """Serve a phase greedily: each wavefront gives every bank one pending word (all its readers at once)."""
    total = 0
    per = 128 // width
    for start in range(0, len(addresses), per):
        pending = {a // 4 + w for a in addresses[start:start + per] for w in range(width // 4)}
        while pending:
            served = {}
            for word in sorted(pending):
                served.setdefault(word % 32, word)
            pending -= set(served.values())
            total += 1
    return total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(load_cases(max_boxes=1, max_rank=3, max_dim=96, max_smem_bytes=8192, max_extent_bytes=1 << 20),
       st.sampled_from(range(0, 1024, 128)), st.sampled_from(PATTERNS))
def test_bank_counts_against_brute_force(case, base, pattern):
    spec, _ = case
    try:
        pic = draw_image(spec, base_offset=base)
    except ArgumentError as exc:
        assert exc.rule == "strides_overlap" and spec.allow_overlap
        return
    reqs, width = requests(pic, pattern)
    counts = [brute_force_wavefronts([int(a) for a in r], width) for r in reqs]
    assert [wavefronts(r, width) for r in reqs] == counts
    report = bank_report(pic, pattern)
    assert report.worst == max(counts) and report.requests == len(reqs)
    # the worst request drawn word by word: every lane's every word once, no bank serving two words at once
    acc = report.worst_request
    assert max(a.wavefront for a in acc) + 1 == report.worst
    lanes = len(reqs[counts.index(report.worst)])
    assert sorted(a.lane for a in acc) == sorted(i for i in range(lanes) for _ in range(width // 4))
    served = {}
    for a in acc:
        assert served.setdefault((a.bank, a.wavefront), a.address) == a.address and a.bank == a.address // 4 % 32


@pytest.mark.parametrize("inner,swizzle,ldmatrix,column", [
    (16, 0, 2, 8), (16, 1, 1, 4), (32, 0, 4, 16), (32, 2, 1, 4), (64, 0, 8, 32), (64, 3, 1, 4)])
def test_swizzle_spreads_ldmatrix(inner, swizzle, ldmatrix, column):
    """bf16 rows of 32, 64, 128 B: unswizzled, 8 rows' chunk c meet in 2, 4, 8 wavefronts (the rows 128 B apart
    share banks); the swizzle of the row's span spreads them over all 32 banks. A column of 32 rows: 4 at best."""
    pic = draw_image(TensorMapSpec.create("bfloat16", (64, inner), (64, inner), swizzle=swizzle))
    assert bank_report(pic, "ldmatrix").worst == ldmatrix
    assert bank_report(pic, "column").worst == column
    assert bank_report(pic, "row").worst == 1


def test_a_planted_drawing_bug_is_caught(monkeypatch):
    """The label check can fail: a drawer that ignored the swizzle draws labels the oracle's image refutes."""
    import types

    import drvtma.show.image as image

    def unswizzled(spec, *args, **kwargs):
        return oracle.load_image(spec.replace(swizzle=Swizzle.NONE) if spec.swizzle else spec, *args, **kwargs)

    monkeypatch.setattr(image, "oracle", types.SimpleNamespace(**{**vars(oracle), "load_image": unswizzled}))
    spec = TensorMapSpec.create("bfloat16", (64, 64), (16, 64), swizzle=Swizzle.B128)
    with pytest.raises(AssertionError):
        check_labels(spec, (0, 0), 0, "chunk")


# ---------------------------------------------------------------------------------------------- the command

def _run(*argv):
    import contextlib
    import io

    from drvtma.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


MAP = ("--dtype", "bf16", "--shape", "64,64", "--box", "64,64", "--swizzle", "128B")


def test_show_text_and_svg(tmp_path):
    status, out, _ = _run("show", *MAP, "--base-offset", "512")
    assert status == 0
    first = next(line for line in out.splitlines() if line.startswith("0x0000"))
    assert first.split()[1:3] == ["0,32..39", "0,40..47"]  # base offset 512: row 0 starts at chunk 4
    assert "ldmatrix: 64 warp request(s), wavefronts per request: worst 1" in out
    svg = tmp_path / "a.svg"
    status, out, _ = _run("show", *MAP, "--svg", str(svg), "--cells", "element", "--colour", "chunk")
    assert status == 0 and f"wrote {svg}" in out
    labels = svg_texts(svg.read_text(), "cell")
    assert len(labels) == 64 * 64 and labels[0] == "0,0"
    assert "legend" in svg.read_text()


def test_the_bank_picture_shows_which_lanes_each_bank_serves_in_each_wavefront(tmp_path):
    """bf16 rows of 128 B without swizzle: ldmatrix's 8 rows of one chunk sit in the same 4 banks, so those banks
    serve one lane per wavefront for 8 wavefronts; the picture's grid says exactly that."""
    svg = tmp_path / "b.svg"
    status, _, _ = _run("show", "--dtype", "bf16", "--shape", "64,64", "--box", "64,64", "--banks", "ldmatrix",
                        "--svg", str(svg))
    assert status == 0
    root = ET.fromstring(svg.read_text())
    texts = [t.text for t in root.iter(SVG) if t.get("class") == "bank"]
    assert texts[0].startswith("ldmatrix: the worst request, 8 wavefront(s) (ideal 1)")
    assert texts[1:33] == [f"b{b}" for b in range(32)]
    rows = [i for i, t in enumerate(texts) if t.startswith("wf ")]
    assert [texts[i] for i in rows] == [f"wf {w}" for w in range(8)]
    # each wavefront row: one lane, in banks 0-3 (chunk 0 of each row, 4 words)
    assert all(texts[i + 1:i + 5] == [str(w)] * 4 for w, i in enumerate(rows))


def test_show_wrong_swizzle_descriptor_exits_1(tmp_path):
    descs = ",".join(hex(replace(d, swizzle=WgmmaSwizzle.B64).encode()) for d in
                     descriptor_for(TensorMapSpec.create("bfloat16", (64, 64), (64, 64), swizzle=3), 0, "B", "K"))
    status, out, _ = _run("show", *MAP, "--wgmma", "B", "--descriptor", descs, "--banks", "none")
    assert status == 1
    assert "MISMATCH (! cells)" in out and "B[row 1, k 0]" in out and "!" in out
    assert _run("show", *MAP, "--wgmma", "B")[0] == 0


def test_check_show_draws_the_spec():
    status, out, _ = _run("check", "--dtype", "f32", "--shape", "8,8", "--box", "4,8", "--show")
    assert status == 0 and "0x0060 3,0..3 3,4..7" in out


def test_png_needs_matplotlib_or_draws(tmp_path):
    png = tmp_path / "a.png"
    status, out, err = _run("show", *MAP, "--png", str(png))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert status == 2 and "matplotlib" in err and len(err.strip().splitlines()) == 1
    else:
        assert status == 0 and png.read_bytes()[:4] == b"\x89PNG"


# The committed pictures (docs/tensormap.md shows them) and the commands that draw them: they must stay in step.
WRONG_SWIZZLE = "0x8000004000010000,0x8000004000010002,0x8000004000010004,0x8000004000010006"
PICTURES = {
    "bf16-128B-base512.svg": (*MAP, "--base-offset", "512", "--banks", "ldmatrix,column"),
    "wgmma-B-wrong-swizzle.svg": (*MAP, "--wgmma", "B", "--descriptor", WRONG_SWIZZLE, "--banks", "none"),
    "f32-64B-edge-fill.svg": ("--dtype", "f32", "--shape", "20,20", "--box", "8,8", "--swizzle", "64B",
                              "--at", "16,16", "--oob-fill", "nan", "--cells", "element", "--banks", "none"),
    # the README's (small enough to show as PNG renders, tests/support/screenshots.py)
    "bf16-16x64-128B-base512.svg": ("--dtype", "bf16", "--shape", "64,64", "--box", "16,64", "--swizzle", "128B",
                                    "--base-offset", "512", "--banks", "ldmatrix,column"),
    "wgmma-B16-wrong-swizzle.svg": ("--dtype", "bf16", "--shape", "64,64", "--box", "16,64", "--swizzle", "128B",
                                    "--wgmma", "B", "--descriptor", WRONG_SWIZZLE, "--banks", "none"),
}


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_committed_pictures_are_current(name, tmp_path):
    from pathlib import Path

    committed = Path(__file__).resolve().parents[1] / "docs" / "pictures" / name
    out = tmp_path / name
    _run("show", *PICTURES[name], "--svg", str(out))
    assert committed.read_text() == out.read_text(), f"redraw it: drvtma show {' '.join(PICTURES[name])} --svg ..."


def test_wrong_swizzle_descriptors_are_descriptor_for_with_64b():
    right = descriptor_for(TensorMapSpec.create("bfloat16", (64, 64), (64, 64), swizzle=3), 0, "B", "K")
    assert WRONG_SWIZZLE == ",".join(hex(replace(d, swizzle=WgmmaSwizzle.B64).encode()) for d in right)
