"""The NumPy model of tiled loads: invariants and an element-by-element reference (CPU only)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drvtma.errors import TensorMapError
from drvtma.testing import DrawChooser, build_coordinates, build_misaligned_coordinates, load_cases
from drvtma.tma.dtypes import FLOAT32, FLOAT_DTYPES, TF32_DTYPES
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.spec import OobFill, Swizzle, TensorMapSpec

POISON = 0xDEADBEEF
MAX_EXTENT = 1 << 16


def _global_bytes(spec: TensorMapSpec, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, spec.extent_bytes, dtype=np.uint8)


def _tf32_reference(word: int) -> int:
    """tf32 load conversion of one fp32 word, written from the field layout (independent of the oracle's)."""
    sign, exponent, mantissa = word >> 31, (word >> 23) & 0xFF, word & 0x7FFFFF
    if exponent == 0xFF and mantissa:
        return 0x7FFFE000
    kept, dropped = mantissa >> 13, mantissa & 0x1FFF
    if dropped > 0x1000 or (dropped == 0x1000 and kept & 1):
        kept += 1  # kept == 0x400 carries into the exponent (0xFF: infinity)
    return (sign << 31) | ((exponent << 23) + (kept << 13))


def _reference_box(spec, global_bytes, coords):
    """Element by element, straight from the model's text: one Python loop per element."""
    s, fill = spec.itemsize, (spec.dtype.nan_fill_bytes() if spec.oob_fill == OobFill.NAN else bytes(spec.itemsize))
    steps = list(spec.element_strides)
    steps[-1] = 1
    out = bytearray()
    for j in itertools.product(*(range(n) for n in spec.loaded_counts)):
        g = [c + jk * e for c, jk, e in zip(coords, j, steps)]
        if all(0 <= gk < n for gk, n in zip(g, spec.shape)):
            off = sum(gk * st_ for gk, st_ in zip(g, spec.strides_bytes))
            element = bytes(global_bytes[off:off + s])
            if spec.dtype in TF32_DTYPES:
                element = _tf32_reference(int.from_bytes(element, "little")).to_bytes(4, "little")
            out += element
        else:
            out += fill
    return bytes(out)


small_cases = load_cases(max_boxes=3, max_dim=12, max_smem_bytes=4096, max_extent_bytes=MAX_EXTENT, max_rank=4)
cases = load_cases(max_boxes=6, max_dim=64, max_smem_bytes=32768, max_extent_bytes=MAX_EXTENT)


@settings(max_examples=300)
@given(small_cases)
def test_box_values_match_the_element_by_element_reference(case):
    spec, coords = case
    g = _global_bytes(spec)
    values = oracle.box_values(spec, g, coords)
    for i, c in enumerate(coords):
        assert values[i].tobytes() == _reference_box(spec, g, c)


@pytest.mark.slow
@settings(max_examples=500)
@given(cases, st.sampled_from([0, 128, 256, 384, 512, 896]))
def test_image_writes_tx_bytes_inside_the_footprint_and_leaves_the_rest_poisoned(case, box_offset):
    spec, coords = case
    g = _global_bytes(spec)
    images = oracle.load_images(spec, g, coords, box_offset=box_offset, poison=POISON)
    assert images.shape == (len(coords), oracle.image_bytes_for(spec, box_offset))
    written = oracle.box_row_addresses(spec, box_offset).reshape(-1)
    assert written.size == spec.expect_tx_bytes == len(np.unique(written))
    assert written.min() >= box_offset and written.max() < box_offset + spec.smem_bytes
    untouched = np.ones(images.shape[1], dtype=bool)
    untouched[written] = False
    poison_bytes = np.frombuffer(np.uint32(POISON).tobytes() * (images.shape[1] // 4), dtype=np.uint8)
    assert (images[:, untouched] == poison_bytes[untouched]).all()
    values = oracle.box_values(spec, g, coords).reshape(len(coords), -1).view(np.uint8)
    assert (images[:, written] == values).all()


@settings(max_examples=300)
@given(cases)
def test_boxes_entirely_outside_are_all_fill(case):
    spec, _ = case
    coords = [tuple(-(b * e) - 16 for b, e in zip(spec.box, spec.element_strides))]
    coords = [tuple(c // 16 * 16 for c in coords[0])]
    values = oracle.box_values(spec, _global_bytes(spec), coords)
    fill = spec.dtype.nan_fill_bytes() if spec.oob_fill == OobFill.NAN else bytes(spec.itemsize)
    assert values.tobytes() == fill * (values.size)


@pytest.mark.parametrize("dtype", [d.name for d in FLOAT_DTYPES])
def test_nan_fill_is_the_repeated_0x7ff7_pattern(dtype):
    spec = TensorMapSpec.create(dtype, (4, 64), (2, 64), oob_fill="nan")
    values = oracle.box_values(spec, np.zeros(spec.extent_bytes, np.uint8), [(100, 0)])
    assert values.tobytes() == b"\xf7\x7f" * (values.nbytes // 2)
    if dtype == "float32":
        assert int(values.reshape(-1)[0]) == 0x7FF77FF7


def test_tf32_nan_fill_is_written_as_is_not_rounded():
    # 0x7FF77FF7 is a NaN that rounding would turn into 0x7FFFE000; the engine writes the fill unconverted [seen].
    for dtype in TF32_DTYPES:
        spec = TensorMapSpec.create(dtype, (2, 4), (4, 4), oob_fill="nan")
        g = np.array([0x3F801001, 0x7FC00000, 0x3F800000, 0x00001001] * 2, dtype=np.uint32).view(np.uint8)
        values = oracle.box_values(spec, g, [(0, 0)])[0]
        assert values[:2].tolist() == [[0x3F802000, 0x7FFFE000, 0x3F800000, 0x00002000]] * 2
        assert (values[2:] == 0x7FF77FF7).all()


# ---- tf32 conversion on load (H200, driver 580.159.04: input word -> shared-memory word)

_TF32_SEEN = [
    # the low 13 mantissa bits round to nearest, ties to even
    (0x3F800001, 0x3F800000), (0x3F800FFF, 0x3F800000), (0x3F801000, 0x3F800000), (0x3F801001, 0x3F802000),
    (0x3F801FFF, 0x3F802000), (0x3F802FFF, 0x3F802000), (0x3F803000, 0x3F804000), (0x3F803001, 0x3F804000),
    # denormals round and are not flushed (TFLOAT32_FTZ included)
    (0x00000001, 0x00000000), (0x00000FFF, 0x00000000), (0x00001000, 0x00000000), (0x00001001, 0x00002000),
    (0x00003000, 0x00004000),
    # carries propagate into the exponent
    (0x807FFFFF, 0x80800000), (0x007FF000, 0x00800000), (0x00800FFF, 0x00800000), (0x00801000, 0x00800000),
    # overflow to infinity
    (0x7F7FFFFF, 0x7F800000), (0x7F7FF000, 0x7F800000),
    # every NaN becomes one canonical NaN, sign dropped; infinities stay
    (0x7FC00000, 0x7FFFE000), (0x7F800001, 0x7FFFE000), (0x7FBFFFFF, 0x7FFFE000), (0xFFC01234, 0x7FFFE000),
    (0x7F801000, 0x7FFFE000), (0x7F800000, 0x7F800000), (0xFF800000, 0xFF800000),
]
# The same rounding was seen for negative numbers (0xBF80....) and near the top (0x7F00....).
_TF32_SEEN += [(prefix | (a & 0xFFFF), prefix | (b & 0xFFFF)) for prefix in (0xBF800000, 0x7F000000)
               for a, b in _TF32_SEEN[:8]]


@pytest.mark.parametrize("dtype", [d.name for d in TF32_DTYPES])
def test_tf32_load_conversion_matches_what_the_h200_wrote(dtype):
    words = np.array([a for a, _ in _TF32_SEEN], dtype=np.uint32)
    got = oracle.tma_load_convert(dtype, words)
    assert got.dtype == np.uint32
    bad = [f"{a:08x} -> {int(g):08x}, seen {b:08x}" for (a, b), g in zip(_TF32_SEEN, got) if int(g) != b]
    assert not bad, bad


@pytest.mark.parametrize("dtype", ["float32", "float32_ftz", "uint32", "int32"])
def test_other_4_byte_types_load_their_bits_unchanged(dtype):
    words = np.array([a for a, _ in _TF32_SEEN], dtype=np.uint32)
    assert (oracle.tma_load_convert(dtype, words) == words).all()


@pytest.mark.slow
@settings(max_examples=1000)
@given(st.lists(st.integers(0, (1 << 32) - 1), min_size=1, max_size=64))
def test_tf32_load_conversion_matches_the_field_by_field_reference(words):
    got = oracle.tma_load_convert("tfloat32", np.array(words, dtype=np.uint32))
    assert got.tolist() == [_tf32_reference(w) for w in words]
    assert (got & 0x1FFF == 0).all()
    assert (oracle.tma_load_convert("tfloat32", got) == got).all()  # tf32 values load unchanged


def test_zero_fill_is_exact_per_element_at_a_partial_edge():
    spec = TensorMapSpec.create("float32", (3, 10), (4, 16))
    g = np.arange(30, dtype=np.float32).view(np.uint8)
    values = oracle.box_values(spec, g, [(1, 0)])[0].view(np.float32)
    assert (values[:2, :10] == np.arange(10, 30, dtype=np.float32).reshape(2, 10)).all()
    assert (values[:2, 10:] == 0).all() and (values[2:] == 0).all()


@settings(max_examples=500)
@given(st.sampled_from([Swizzle.B32, Swizzle.B64, Swizzle.B128]), st.integers(0, 64), st.integers(1, 16))
def test_swizzle_is_a_permutation_of_16_byte_chunks_within_its_span(swizzle, start_line, lines):
    span = {Swizzle.B32: 32, Swizzle.B64: 64, Swizzle.B128: 128}[swizzle]
    base = start_line * 128
    addresses = np.arange(base, base + lines * 128 * 8)
    out = oracle.swizzle_addresses(addresses, swizzle)
    assert sorted(out.tolist()) == addresses.tolist()  # a permutation of the region
    assert ((out & 15) == (addresses & 15)).all()  # bytes stay inside their chunk, in order
    assert ((out // span) == (addresses // span)).all()  # chunks stay inside their span-sized row
    assert (oracle.swizzle_addresses(out, swizzle) == addresses).all()  # an involution


def test_swizzle_128b_known_addresses():
    # Row r of a 128B-swizzled box (pitch 128) has chunk k at chunk k ^ (r & 7).
    for r in range(16):
        for k in range(8):
            assert oracle.swizzle_addresses(r * 128 + k * 16, Swizzle.B128) == r * 128 + ((k ^ (r & 7)) * 16)


def test_swizzle_follows_the_absolute_address_not_the_box():
    spec = TensorMapSpec.create("uint8", (8, 128), (8, 128), swizzle="128B")
    at0 = oracle.box_row_addresses(spec, 0)
    at128 = oracle.box_row_addresses(spec, 128) - 128
    assert not (at0 == at128).all()
    # Shifting by one 128-byte line shifts the XOR pattern by one row.
    assert (at128[:7] == at0[1:8] - 128).all()
    assert (oracle.box_row_addresses(spec, 1024) - 1024 == at0).all()


def test_padding_under_swizzle_is_not_written():
    spec = TensorMapSpec.create("float32", (4, 8), (4, 8), swizzle="128B")  # 32 B rows, 128 B pitch
    assert spec.row_pitch_bytes == 128 and spec.smem_bytes == 512 and spec.expect_tx_bytes == 128
    image = oracle.load_image(spec, np.zeros(spec.extent_bytes, np.uint8), (0, 0), poison=POISON)
    assert (image.view(np.uint32) == POISON).sum() == (512 - 128) // 4


def test_expect_tx_counts_elements_not_the_unstrided_box():
    spec = TensorMapSpec.create("float32", (64, 64), (8, 8), element_strides=(3, 1))
    assert spec.loaded_counts == (3, 8) and spec.expect_tx_bytes == 96


# ---- coordinates

@settings(max_examples=300)
@given(st.data())
def test_misaligned_inner_coordinates_are_refused(data):
    spec, _ = data.draw(load_cases(max_boxes=1, dtypes=[d for d in FLOAT_DTYPES if d.itemsize < 16]))
    coords = build_misaligned_coordinates(DrawChooser(data.draw), spec)
    with pytest.raises(TensorMapError) as info:
        oracle.check_load_coordinates(spec, [coords])
    assert info.value.rule == "coord_alignment" and "fault" in str(info.value)


@pytest.mark.slow
@settings(max_examples=300)
@given(st.data())
def test_generated_coordinates_are_accepted(data):
    spec, coords = data.draw(load_cases(max_boxes=4))
    coords.append(build_coordinates(DrawChooser(data.draw), spec))
    assert oracle.check_load_coordinates(spec, coords).shape == (len(coords), spec.rank)


def test_coordinate_rules():
    spec = TensorMapSpec.create(FLOAT32, (8, 64), (4, 32))
    assert oracle.check_load_coordinates(spec, [(-3, -4), (0, 8)]).shape == (2, 2)
    for coords, rule in [((0, 1), "coord_alignment"), ((0, -1), "coord_alignment"), ((1 << 31, 0), "coord_range"),
                         ((0, 0, 0), "coord_rank")]:
        with pytest.raises(TensorMapError) as info:
            oracle.check_load_coordinates(spec, [coords])
        assert info.value.rule == rule


def test_oracle_refuses_unaligned_shared_destinations_and_interleave():
    spec = TensorMapSpec.create("uint8", (8, 32), (4, 32))
    with pytest.raises(TensorMapError, match="smem_alignment"):
        oracle.load_image(spec, np.zeros(spec.extent_bytes, np.uint8), (0, 0), box_offset=64)
    il = TensorMapSpec.create("uint8", (4, 8, 32), (1, 2, 16), interleave="16B")
    with pytest.raises(TensorMapError, match="oracle_interleave"):
        oracle.load_image(il, np.zeros(il.extent_bytes, np.uint8), (0, 0, 0))


def _digest_by_hand(image: bytes) -> int:
    """write_image_digest as cu/include/drvtma/image.cuh writes it, in Python integers (no NumPy)."""
    from drvtma.tma.tiled.oracle import DIGEST_MUL1, DIGEST_MUL2, DIGEST_STEP

    mask, total = (1 << 64) - 1, 0
    for i in range(len(image) // 8):
        x = int.from_bytes(image[8 * i:8 * i + 8], "little") ^ ((i * DIGEST_STEP) & mask)
        x ^= x >> 33
        x = (x * DIGEST_MUL1) & mask
        x ^= x >> 33
        x = (x * DIGEST_MUL2) & mask
        x ^= x >> 33
        total = (total + x) & mask
    return total


def test_image_digests_are_the_kernels_and_any_change_moves_them():
    """The host's digests (what oracle workers send instead of images) are the probes' write_image_digest: the
    constants read from its header, the arithmetic done again in Python integers; a flipped bit anywhere, two
    swapped words or a poison word moved change the digest."""
    import re

    from drvtma.runtime.compiler import cu_dir
    from drvtma.tma.tiled.oracle import DIGEST_MUL1, DIGEST_MUL2, DIGEST_STEP, image_digests

    header = (cu_dir() / "include" / "drvtma" / "image.cuh").read_text()
    constants = {k: int(v, 16) for k, v in re.findall(r"#define DRVTMA_DIGEST_(\w+) 0x([0-9A-Fa-f]+)ull", header)}
    assert constants == {"STEP": DIGEST_STEP, "MUL1": DIGEST_MUL1, "MUL2": DIGEST_MUL2}
    rng = np.random.default_rng(11)
    images = rng.integers(0, 256, (6, 2064), np.uint8)
    digests = image_digests(images)
    assert digests.dtype == np.uint64 and [int(d) for d in digests] == [_digest_by_hand(i.tobytes()) for i in images]
    for _ in range(200):
        changed = images[0].copy()
        bit = int(rng.integers(0, changed.size * 8))
        changed[bit // 8] ^= 1 << (bit % 8)
        assert image_digests(changed[None])[0] != digests[0]
    words = images[1].view(np.uint64).copy()
    words[[3, 200]] = words[[200, 3]]
    assert image_digests(words.view(np.uint8)[None])[0] != digests[1]
    poisoned = np.full((2, 1024), 0xA5, np.uint8)
    poisoned[0, 0:16], poisoned[1, 16:32] = 7, 7  # the same bytes, one chunk apart
    a, b = image_digests(poisoned)
    assert a != b
