"""The 128 bytes of an im2col map, on the CPU: 3,410 maps the H200's driver (580, CUDA 13.0) encoded with
cuTensorMapEncodeIm2col (tests/data/im2col_corpus.json.gz) decode to the arguments they were encoded from and
re-encode byte for byte; `drvtma decode` shows them; tensormap.replace's model edits what it can and refuses the rest.
"""

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from drvtma.errors import TensorMapError
from drvtma.tma.im2col import decode as I
from drvtma.tma.im2col.spec import CORNER_RANGE, Im2colParams, Im2colSpec
from drvtma.tma.maps.findings import explain
from drvtma.tma.maps.replace import FIELDS, Edit, apply_to_bytes, apply_to_spec
from drvtma.tma.tiled import decode as D

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def corpus():
    with gzip.open(DATA / "im2col_corpus.json.gz", "rt") as f:
        entries = json.load(f)["entries"]
    return [(Im2colParams(**{k: tuple(v) if isinstance(v, list) else v for k, v in e["params"].items()}),
             e["address"], bytes.fromhex(e["bytes"])) for e in entries]


def test_corpus_covers_every_rank_type_option_and_corner_extreme(corpus):
    assert len(corpus) == 3410
    seen = Counter()
    for p, _, _ in corpus:
        seen.update([f"rank{p.rank}", f"dt{p.dtype_enum}", f"il{p.interleave}", f"sw{p.swizzle}",
                     f"l2{p.l2_promotion}", f"fill{p.oob_fill}"])
        seen.update(f"r{p.rank}:{c}" for c in p.lower_corner + p.upper_corner if c in CORNER_RANGE[p.rank])
    assert len([k for k in seen if not k.startswith("r") or k.startswith("rank")]) == 3 + 13 + 3 + 4 + 4 + 2
    assert all(f"r{r}:{c}" in seen for r, ends in CORNER_RANGE.items() for c in ends)  # both ends of each range
    assert {p.channels_per_pixel for p, _, _ in corpus} >= {2, 256}
    assert {p.pixels_per_column for p, _, _ in corpus} >= {1, 1024}


def test_every_driver_map_decodes_to_its_arguments_and_re_encodes_byte_for_byte(corpus):
    wrong = []
    for p, address, raw in corpus:
        spec, got_address = I.decode_im2col(raw)
        if spec.tma_params() != p or got_address != address or I.encode_im2col_bytes(spec) != raw:
            wrong.append(p)
    assert not wrong, wrong[:3]


def test_the_mode_bit_and_the_field_positions(corpus):
    p, address, raw = next(e for e in corpus if e[0].rank == 4 and any(e[0].lower_corner))
    v = int.from_bytes(raw, "little")
    assert D.get(v, D.IM2COL_MODE) == 1 and D.fields(raw).im2col
    assert D.get(v, I.CHANNELS_PER_PIXEL) == p.channels_per_pixel - 1
    assert D.get(v, I.PIXELS_PER_COLUMN) == p.pixels_per_column - 1
    assert I.lower_corner_fields(3) == ((448, 16),) and I.upper_corner_fields(5) == ((464, 5), (469, 5), (474, 5))
    spec, _ = I.decode_im2col(raw)
    for field, at, new in ((I.lower_corner_fields(4)[0], "lower_corner", -128), (I.PIXELS_PER_COLUMN, None, 7)):
        moved, _ = I.decode_im2col(D.put(v, field, new).to_bytes(128, "little"))
        assert (moved.lower_corner[-1] == -128) if at else moved.pixels_per_column == 8
    tiled = D.encode_bytes(D.TensorMapSpec.create("f16", (8, 64), (8, 64), base_address=1 << 20))
    assert not D.fields(tiled).im2col


def test_each_decoder_refuses_the_other_mode_by_name(corpus):
    _, _, raw = corpus[0]
    with pytest.raises(TensorMapError, match=r"decode_im2col_map.*decode_im2col"):
        D.decode(raw)
    tiled = D.encode_bytes(D.TensorMapSpec.create("f16", (8, 64), (8, 64), base_address=1 << 20))
    with pytest.raises(TensorMapError, match=r"decode_tiled_map.*decode\.decode"):
        I.decode_im2col(tiled)
    v = int.from_bytes(raw, "little")
    for bad, rule in ((D.put(v, (500, 1), 1), "decode_unknown_bits"), (D.put(v, D.RANK, 1), "decode_rank")):
        with pytest.raises(TensorMapError, match=rule):
            I.decode_im2col(bad.to_bytes(128, "little"))


def test_explain_and_the_decode_command_show_the_mode_and_fields(corpus, capsys):
    from drvtma.cli.main import main

    p, address, raw = next(e for e in corpus if e[0].rank == 5 and any(e[0].upper_corner))
    report = explain(raw)
    assert report.mode == "im2col" and report.broken == [] and report.findings == []
    assert main(["decode", raw.hex()]) == 0
    out = capsys.readouterr().out
    assert "im2col mode" in out and "corners (D, H, W order)" in out and f"{p.pixels_per_column} pixels" in out
    assert main(["decode", raw.hex(), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["mode"] == "im2col" and Im2colSpec.from_dict(got["spec"]).tma_params() == p
    edited = D.put(int.from_bytes(raw, "little"), D.DERIVED_BOX_BYTES, 16).to_bytes(128, "little")
    assert [f.name for f in explain(edited).findings] == ["derived_words_differ"]


# ---------------------------------------------------------------------------------------------- replace model

def _shared_edits(spec: Im2colSpec):
    """An edit of every field an im2col map shares with a tiled one, each to a value a driver map could hold."""
    yield Edit("global_address", spec.base_address + 4096)
    yield Edit("global_dim", spec.shape[-2] + 1, ord=1)
    yield Edit("global_stride", spec.strides_bytes[-2] + 16 * 1024, ord=0)
    yield Edit("element_stride", 1 + spec.element_strides[-2] % 8, ord=1)
    yield Edit.elemtype("f32" if spec.itemsize == 4 else "f16" if spec.itemsize == 2 else "u8")
    yield Edit("swizzle", (int(spec.swizzle) + 1) % 4)
    yield Edit("fill", 0)
    yield Edit("interleave", int(spec.interleave))


def _without_derived(raw: bytes) -> int:
    v = int.from_bytes(raw, "little")
    return D.put(D.put(v, D.DERIVED_BOX_BYTES, 0), D.DERIVED_SWIZZLE, 0)


def test_shared_field_edits_write_what_the_driver_would_encode(corpus):
    """No corpus pair differs in one field alone, so the proof is by positions: the edited bytes are the host
    encoder's (byte-identical to the driver's on every corpus map) for the edited spec, derived words aside."""
    checked = Counter()
    for p, _, raw in corpus[::7]:
        spec, _ = I.decode_im2col(raw)
        for edit in _shared_edits(spec):
            want = apply_to_spec(spec, edit)
            if not want.is_valid():
                continue
            got = apply_to_bytes(raw, edit, clears_small_tensor_bit=False)
            assert _without_derived(got) == _without_derived(I.encode_im2col_bytes(want)), (p, edit)
            assert got[64:80] == raw[64:80]  # the derived words keep the driver's old values, as on a tiled map
            checked[edit.field] += 1
    assert set(checked) == set(FIELDS) - {"box_dim", "rank"}, checked


@pytest.mark.parametrize("edit", [Edit("box_dim", 16, ord=0), Edit("box_dim", 2, ord=1), Edit.rank(4)])
def test_box_and_rank_edits_of_an_im2col_map_are_refused_with_a_fix(corpus, edit):
    _, _, raw = corpus[0]
    spec, _ = I.decode_im2col(raw)
    for call in (lambda: apply_to_bytes(raw, edit), lambda: apply_to_spec(spec, edit)):
        with pytest.raises(TensorMapError, match=r"replace_im2col_field.*re-encode"):
            call()


def test_an_unchecked_box_edit_is_the_bare_insert_into_channels_per_pixel(corpus):
    _, _, raw = corpus[0]
    edited, _ = I.decode_im2col(apply_to_bytes(raw, Edit.unchecked("box_dim", 16, 0)))
    assert edited.channels_per_pixel == 16  # what ptxas's bitfield insert does to an im2col map's bits
