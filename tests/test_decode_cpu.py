"""The decoder of the 128 bytes and the host model of tensormap.replace, on the CPU.

Three independent witnesses pin the layout: the driver (a committed corpus of driver-encoded maps, random and
one-parameter-at-a-time, tests/data/tensormap_corpus.json.gz), the device (the bytes the H200 published after each
device-side edit, tests/data/tensormap_replace_dumps.json) and ptxas (the bitfield inserts it emits for every
tensormap.replace field, read from the SASS).
"""

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drvtma.errors import TensorMapError
from drvtma.runtime import compiler, sass
from drvtma.testing import valid_specs
from drvtma.tma.maps.replace import (
    FIELDS,
    Edit,
    apply_all,
    apply_to_bytes,
    apply_to_spec,
    edits_to,
    ptxas_clears_small_tensor_bit,
)
from drvtma.tma.tiled import decode as D
from drvtma.tma.tiled.spec import TensorMapSpec

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def corpus():
    with gzip.open(DATA / "tensormap_corpus.json.gz", "rt") as f:
        return json.load(f)


def _specs(corpus, kind=None):
    for e in corpus["entries"]:
        if "bytes" in e and (kind is None or e["kind"] == kind):
            yield e, TensorMapSpec.from_dict(e["spec"]), bytes.fromhex(e["bytes"])


# ---------------------------------------------------------------------------------------------- the corpus

def test_corpus_is_large_and_covers_every_kind(corpus):
    random = list(_specs(corpus, "random"))
    assert len(random) >= 2000
    seen = Counter()
    for _, s, _ in random:
        seen.update([s.dtype.name, f"rank{s.rank}", f"il{int(s.interleave)}", f"sw{int(s.swizzle)}",
                     f"l2{int(s.l2_promotion)}", f"fill{int(s.oob_fill)}"])
    assert len(seen) == 13 + 5 + 3 + 4 + 4 + 2, sorted(seen)
    assert max(s.base_address for _, s, _ in random) >= 1 << 48  # wide addresses, not only small ones
    assert max(max(s.strides_bytes) for _, s, _ in random) >= 1 << 36  # strides that need the high nibble


def test_every_driver_map_decodes_to_its_spec_and_the_host_encoder_writes_its_bytes(corpus):
    wrong = []
    for e, spec, raw in _specs(corpus):
        got, address = D.decode(raw)
        if not D.same_map(got, spec) or address != spec.base_address or D.encode_bytes(spec) != raw:
            wrong.append(e.get("label") or e["spec"])
    assert not wrong, wrong[:5]


def test_the_driver_refuses_addresses_from_bit_57(corpus):
    refused = {e["label"] for e in corpus["entries"] if "refused" in e}
    assert refused == {f"address bit {b}" for b in range(57, 64)}


# Which field(s) each one-at-a-time probe may move (besides the derived words).
_PROBE_FIELDS = {
    "address": [D.ADDRESS], "global_dim": list(D.GLOBAL_DIM), "global_stride": list(D.STRIDE_LOW + D.STRIDE_HIGH),
    "box_dim": list(D.BOX_DIM), "element_stride": list(D.ELEMENT_STRIDE), "dtype": [D.ELEMTYPE, D.TF32_FLAG],
    "swizzle": [D.SWIZZLE, D.BOX_DIM[0]], "interleave": [D.INTERLEAVE, D.SWIZZLE, D.BOX_DIM[0]],
    "l2_promotion": [D.L2_PROMOTION], "oob_fill": [D.OOB_FILL],
}


def _mask(fields):
    m = 0
    for off, width in fields:
        m |= ((1 << width) - 1) << off
    return m


def test_one_parameter_at_a_time_moves_only_its_own_field(corpus):
    probes = [(e, raw) for e, _, raw in _specs(corpus, "probe")]
    base = int.from_bytes(probes[0][1], "little")
    derived = _mask([D.DERIVED_BOX_BYTES, D.DERIVED_SWIZZLE])
    checked = 0
    for e, raw in probes[1:]:
        kind = e["label"].split()[0]
        if kind not in _PROBE_FIELDS:
            continue
        moved = (int.from_bytes(raw, "little") ^ base) & ~derived
        assert moved & ~_mask(_PROBE_FIELDS[kind]) == 0, f"{e['label']} moved bits outside its field"
        checked += 1
    assert checked > 350


def test_derived_words_follow_the_drivers_formula(corpus):
    for _, spec, raw in _specs(corpus):
        f = D.fields(raw)
        assert (f.derived_box_bytes, f.derived_swizzle) == D.derived_words(spec)
        assert f.small_tensor_bit == 0 and f.swizzle_atomicity_bit == 0


# ---------------------------------------------------------------------------------------------- decode inputs

def test_decode_reads_hex_with_spaces_and_refuses_what_no_sm90_map_holds(corpus):
    e, spec, raw = next(_specs(corpus, "random"))
    spaced = " ".join(raw[i:i + 8].hex() for i in range(0, 128, 8))
    assert D.same_map(D.decode("0x" + spaced)[0], spec)
    with pytest.raises(TensorMapError, match="decode_size"):
        D.decode(raw[:64])
    v = int.from_bytes(raw, "little")
    for bad, rule in ((v | 1 << 700, "decode_unknown_bits"), (D.put(v, D.RANK, 6), "decode_rank"),
                      (D.put(v, D.ELEMTYPE, 13), "decode_elemtype"),
                      (D.put(D.put(v, D.ELEMTYPE, 9), D.TF32_FLAG, 1), "decode_elemtype")):
        with pytest.raises(TensorMapError, match=rule):
            D.decode(bad.to_bytes(128, "little"))


def test_decode_command_prints_json_that_reads_back(corpus, capsys):
    from drvtma.cli.main import main

    e, spec, raw = next(_specs(corpus, "random"))
    assert main(["decode", raw.hex(), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert int(out["address"], 16) == spec.base_address
    assert D.same_map(TensorMapSpec.from_dict(out["spec"]), spec)
    f32 = D.encode_bytes(TensorMapSpec.create("float32", (64, 64), (16, 32), base_address=1 << 20))
    bad = D.put(int.from_bytes(f32, "little"), D.BOX_DIM[0], 2).to_bytes(128, "little")  # 3 floats: 12 B rows
    assert main(["decode", bad.hex()]) == 1  # it lists a broken rule: exits as `drvtma check` does
    out, err = capsys.readouterr()
    assert "box_inner_bytes" in out and "derived words differ" in out
    assert err.strip() == "drvtma decode: 1 rule(s) broken: box_inner_bytes"


# ---------------------------------------------------------------------------------------------- replace model

def _random_edit(draw, spec):
    f = draw(st.sampled_from(FIELDS))
    r = spec.rank
    k = draw(st.integers(0, r - 1))
    if f == "global_address":
        return Edit(f, 16 * draw(st.integers(0, (1 << 53) - 1)))
    if f == "rank":
        return Edit.rank(draw(st.integers(1, r)))
    if f == "global_stride":
        return Edit(f, 16 * draw(st.integers(1, (1 << 36) - 1)), draw(st.integers(0, max(r - 2, 0)))) if r > 1 \
            else Edit("fill", 0)
    limits = {"box_dim": (1, 256), "global_dim": (1, (1 << 32) - 1), "element_stride": (1, 8), "elemtype": (0, 12),
              "interleave": (0, 2), "swizzle": (0, 3), "fill": (0, 1)}
    lo, hi = limits[f]
    return Edit(f, draw(st.integers(lo, hi)), k if f in ("box_dim", "global_dim", "element_stride") else 0)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), spec=valid_specs())
def test_the_byte_model_and_the_spec_model_of_an_edit_agree(data, spec):
    edit = _random_edit(data.draw, spec)
    try:
        want = apply_to_spec(spec, edit)
    except TensorMapError as exc:  # a tf32 map edited to a type the flag cannot pair with
        assert exc.rule == "replace_tf32_flag"
        with pytest.raises(TensorMapError, match="decode_elemtype"):
            D.decode(apply_to_bytes(D.encode_bytes(spec), edit))
        return
    got, address = D.decode(apply_to_bytes(D.encode_bytes(spec), edit))
    assert D.same_map(got, want) and address == want.base_address


@settings(max_examples=200, deadline=None)
@given(a=valid_specs(), b=valid_specs())
def test_edits_to_turn_one_map_into_another_of_the_same_rank(a, b):
    if a.rank != b.rank:
        b = a.replace(base_address=b.base_address)
    if a.dtype.name.startswith("tfloat32") and not b.dtype.name.startswith("tfloat32"):
        with pytest.raises(TensorMapError, match="replace_tf32_flag"):
            edits_to(a, b)
        return
    raw = apply_all(D.encode_bytes(a), edits_to(a, b))
    got, _ = D.decode(raw)
    assert D.same_map(got, b.replace(l2_promotion=a.l2_promotion))  # PTX has no L2-promotion field


def test_values_are_truncated_to_their_fields_and_checked_first():
    base = D.encode_bytes(TensorMapSpec.create("float32", (64, 64), (16, 32), base_address=1 << 20))
    raw = apply_all(base, [Edit.unchecked("box_dim", 0, 0), Edit.unchecked("box_dim", 257, 1),
                           Edit.unchecked("element_stride", 9, 0), Edit.unchecked("element_stride", 0, 1),
                           Edit.unchecked("global_dim", 0, 0), Edit.unchecked("global_stride", (1 << 41) + 24, 0)])
    f = D.fields(raw)
    assert f.box_dim[:2] == (256, 1) and f.element_strides[:2] == (1, 8) and f.global_dim[0] == 1 << 32
    assert f.global_strides[0] == 16
    for field, value, ord_ in (("box_dim", 0, 0), ("box_dim", 257, 1), ("element_stride", 9, 0),
                               ("global_dim", 0, 0), ("global_stride", 24, 0), ("global_address", 8, 0),
                               ("rank", 5, 0)):
        with pytest.raises(TensorMapError, match="replace_range"):
            Edit(field, value, ord_)
    with pytest.raises(TensorMapError, match="replace_ord"):
        Edit("global_stride", 16, 4)
    with pytest.raises(TensorMapError, match="replace_value"):
        Edit("elemtype", 13)


def test_ptx_codes_and_side_effects():
    spec = TensorMapSpec.create("tfloat32", (64, 64), (16, 32), base_address=1 << 20)
    assert apply_to_spec(spec, Edit.elemtype("float32")).dtype.name == "tfloat32"  # the tf32 flag stays
    assert apply_to_spec(spec, Edit.elemtype("float32_ftz")).dtype.name == "tfloat32_ftz"
    assert [Edit.elemtype(d).value for d in ("float32_ftz", "float64", "bfloat16")] == [8, 9, 10]
    assert Edit.rank(5).value == 4
    v = int.from_bytes(D.encode_bytes(spec), "little") | 1 << 85 | 1 << 86
    raw = v.to_bytes(128, "little")
    for cleared, bit85 in ((True, 0), (False, 1)):  # NVRTC 13.5's ptxas clears bit 85 with a new address, 13.0's not
        after_address = D.fields(apply_to_bytes(raw, Edit("global_address", 1 << 21), clears_small_tensor_bit=cleared))
        assert (after_address.small_tensor_bit, after_address.swizzle_atomicity_bit) == (bit85, 1)
    after_swizzle = D.fields(apply_to_bytes(raw, Edit("swizzle", 0)))
    assert (after_swizzle.small_tensor_bit, after_swizzle.swizzle_atomicity_bit) == (1, 0)
    assert ptxas_clears_small_tensor_bit((13, 5)) and not ptxas_clears_small_tensor_bit((13, 0))


def test_the_bytes_the_h200_published_after_each_edit_are_the_models():
    """Device-side edits on the H200 (NVRTC 13.0): 100 jobs, every field."""
    dumps = json.loads((DATA / "tensormap_replace_dumps.json").read_text())["replace"]
    assert {d["field"] for d in dumps} == set(FIELDS)
    for d in dumps:
        edits = [Edit(f, v, o) for f, o, v in d["edits"]]
        assert apply_all(bytes.fromhex(d["template"]), edits).hex() == d["published"], d["field"]


def test_job_and_edit_words_match_the_kernel():
    from drvtma.tma.maps.global_maps import JOB_WORDS, ReplaceJob

    spec = TensorMapSpec.create("float32", (64, 64), (16, 32), base_address=1 << 20)
    w = ReplaceJob([Edit("box_dim", 8, 1), Edit("global_address", 0x123456789A0)], spec, (-3, 8)).to_words()
    assert len(w) == JOB_WORDS and list(w[:6]) == [2, 2, spec.expect_tx_bytes, 1, 0, 8]
    assert int(w[6]) == (-3) & 0xFFFFFFFF
    assert list(w[16:24]) == [FIELDS.index("box_dim"), 1, 8, 0, 0, 0, 0x456789A0, 0x123]
    src = (compiler.cu_dir() / "tma/global_map.cu").read_text()
    assert f"kJobWords = {JOB_WORDS}" in src


# ---------------------------------------------------------------------------------------------- ptxas agrees

_FIELD_KERNELS = [("global_address", None, None), ("rank", None, None), ("box_dim", 0, None), ("box_dim", 3, None),
                  ("global_dim", 2, None), ("global_stride", 0, None), ("global_stride", 3, None),
                  ("element_stride", 4, None), ("elemtype", None, 9), ("elemtype", None, 11),
                  ("interleave", None, 2), ("swizzle", None, 3), ("fill", None, 1)]
_PTX_NAME = {"interleave": "interleave_layout", "swizzle": "swizzle_mode", "fill": "fill_mode"}


def _field_kernel_source() -> str:
    body = ['#include <drvtma/tensormap.cuh>']
    for i, (f, ord_, imm) in enumerate(_FIELD_KERNELS):
        name = _PTX_NAME.get(f, f)
        call = (f"tensormap_replace_{name}<{ord_}>(&m, v)" if ord_ is not None else
                f"tensormap_replace_{name}(&m, v)" if f in ("global_address", "rank") else
                f"tensormap_replace_{name}<{imm}>(&m)")
        body.append(f'extern "C" __global__ void k{i}(u64 v, u32* out) {{ __shared__ CUtensorMap m; '
                    f'reinterpret_cast<u32*>(&m)[threadIdx.x] = out[threadIdx.x]; __syncwarp(); '
                    f'if (threadIdx.x == 0) {{ {call}; }} __syncwarp(); '
                    f'out[threadIdx.x] = reinterpret_cast<u32*>(&m)[threadIdx.x]; }}')
    return "\n".join(body)


_OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(@!?P\d\s+)?([A-Z0-9_.]+)\s*([^;]*);")


def _sass_writes(text: str) -> dict[int, tuple[int, int]]:
    """{word index: (mask, value bits)} the predicated edit writes (value bits known for immediates only)."""
    const, masks, out = {}, {}, {}
    for m in _OP.finditer(text):
        op, args = m.group(2), [a.strip() for a in m.group(3).split(",")]
        if op == "IMAD.MOV.U32" and args[1:3] == ["RZ", "RZ"] and args[3].startswith("0x"):
            const[args[0]] = int(args[3], 16)
        elif op == "LOP3.LUT" and m.group(1) and args[2].startswith("0x"):
            imm, other, lut = int(args[2], 16), args[3], args[4]
            if lut == "0xd8":  # other ? imm : a  -> mask in a register constant, value immediate
                mask, value = const[other], imm & const[other]
            else:  # 0xb8: imm ? other : a -> mask immediate, value from a register (0 for RZ)
                mask, value = imm, 0 if other == "RZ" else imm & const.get(other, 0)
            prev = masks.get(args[0], (0, 0))
            masks[args[0]] = (prev[0] | mask, prev[1] | value)
        elif op in ("STS", "STS.64") and m.group(1):
            addr = re.match(r"\[UR\d+(?:\+0x([0-9a-f]+))?\]", args[0])
            word = int(addr.group(1) or "0", 16) // 4
            for j in range(2 if op == "STS.64" else 1):
                out[word + j] = masks.pop(args[1], (0xFFFFFFFF, None)) if j == 0 else (0xFFFFFFFF, None)
    return out


def _model_writes(f: str, ord_, imm) -> dict[int, tuple[int, int]]:
    """The same from apply_to_bytes: bits it sets from zeros or clears from ones, for extreme values."""
    values = [imm] if imm is not None else ([0, (1 << 64) - 1] if f in ("global_address", "global_stride")
                                            else [0, 1, 7] if f == "rank" else [0, 1])
    touched, ones = 0, (1 << 1024) - 1
    set_bits = 0
    for v in values:
        e = Edit.unchecked(f, v, ord_ or 0)
        from_zeros = int.from_bytes(apply_to_bytes(bytes(128), e), "little")
        from_ones = int.from_bytes(apply_to_bytes(ones.to_bytes(128, "little"), e), "little")
        touched |= from_zeros | (ones ^ from_ones)
        set_bits |= from_zeros
    out = {}
    for w in range(32):
        mask = (touched >> (32 * w)) & 0xFFFFFFFF
        if mask:
            out[w] = (mask, (set_bits >> (32 * w)) & 0xFFFFFFFF if imm is not None else None)
    return out


def test_ptxas_writes_exactly_the_fields_of_the_layout():
    cubin = compiler.compile_cubin(_field_kernel_source(), name="replace_fields_probe.cu")
    text = sass.disassemble(cubin)
    parts = re.split(r"\n\s*\.text\.(k\d+):", text)
    bodies = {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    for i, (f, ord_, imm) in enumerate(_FIELD_KERNELS):
        got = _sass_writes(bodies[f"k{i}"])
        want = _model_writes(f, ord_, imm)
        got = {w: (mask, value if imm is not None else None) for w, (mask, value) in got.items()}
        assert got == want, f"{f} ord={ord_} imm={imm}: ptxas writes {got}, the model {want}"


# ---------------------------------------------------------------------------------------------- kernels

def test_global_map_kernels_compile_with_fences_prefetch_and_edits():
    cubin = compiler.compile_cubin("tma/global_map.cu")
    load = sass.instructions(cubin, "global_map_load")
    assert "UTMACCTL.IV" in load and "UTMACCTL.PF" in load  # acquire invalidates, prefetch.tensormap
    assert all(f"UTMALDG.{r}D" in load for r in range(1, 6))
    const = sass.instructions(cubin, "const_map_load")
    assert "UTMACCTL.PF" in const and "UTMACCTL.IV" not in const  # a __constant__ map cannot be acquired
    edit = sass.instructions(cubin, "replace_load")
    assert "UTMACCTL.IV" in edit and sass.has_opcode(edit, "STS")  # replace is plain shared-memory bit edits
    # (tensormap.cp_fenceproxy has no opcode of its own in SASS: its opcodes are also in the load kernel, so
    # nothing here can say it is present; the GPU test of replace_load shows its effect)
    bench = sass.instructions(compiler.compile_cubin("tma/global_map_bench.cu"), "descriptor_bench")
    assert "UTMALDG.2D" in bench and "UTMACCTL.PF" in bench


def test_random_specs_of_the_corpus_generator_are_valid():
    from drvtma.testing.tensormaps import one_at_a_time_specs, random_spec

    rng = np.random.default_rng(1)
    assert all(random_spec(rng).is_valid() for _ in range(200))
    labels = [label for label, _ in one_at_a_time_specs()]
    assert len(labels) == len(set(labels)) > 400


def test_a_cuda_core_descriptor_is_read_through_compat(monkeypatch):
    """cuda.core has no public accessor for a TensorMapDescriptor's bytes: drvtma.compat reads them where cuda.core
    packs it as a kernel argument (a ParamHolder whose .ptr holds the map's address). A stand-in holder here."""
    import ctypes
    import sys
    from types import ModuleType

    from drvtma import compat

    raw = (ctypes.c_uint8 * 128)(*range(128))
    slot = ctypes.c_void_p(ctypes.addressof(raw))

    class ParamHolder:
        def __init__(self, args):
            assert type(args[0]).__name__ == "TensorMapDescriptor"
            self.ptr = ctypes.addressof(slot)

    class TensorMapDescriptor:
        pass

    holder = ModuleType("fake_kernel_arg_handler")
    holder.ParamHolder = ParamHolder
    monkeypatch.setitem(sys.modules, "fake_kernel_arg_handler", holder)
    monkeypatch.setattr(compat, "_PARAM_HOLDERS", ("no.such.module", "fake_kernel_arg_handler"))
    assert D.map_bytes(TensorMapDescriptor()) == bytes(range(128))
    monkeypatch.setattr(compat, "_PARAM_HOLDERS", ("no.such.module",))
    with pytest.raises(TypeError, match="no ParamHolder"):
        D.map_bytes(TensorMapDescriptor())
