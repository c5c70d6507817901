"""`findings.plausibility`: whether 128 bytes could be a tensor map, before anything reports them as one (a scan of
a kernel's parameters meets many 128-byte windows). Every driver-encoded map of both corpora is accepted as written
by the driver; zero, random and sparse-word windows are refused; a device edit (stale derived words) stays plausible."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from drvtma.tma.maps.findings import near_miss, plausibility
from drvtma.tma.tiled.decode import ADDRESS, DERIVED_BOX_BYTES, GLOBAL_DIM, encode_bytes, put
from drvtma.tma.tiled.spec import TensorMapSpec

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("corpus", ["tensormap_corpus.json.gz", "im2col_corpus.json.gz"])
def test_every_driver_encoded_map_is_plausible_and_driver_written(corpus):
    entries = [e for e in json.loads(gzip.decompress((DATA / corpus).read_bytes()))["entries"] if "bytes" in e]
    verdicts = [plausibility(bytes.fromhex(e["bytes"])) for e in entries]
    wrong = [(e.get("label"), v.reasons) for e, v in zip(entries, verdicts) if not v.driver_written]
    # the one exception: the driver also encodes address 0 (a probe of the address field), which the verdict refuses
    # on purpose, so that an all-zero window is never a map
    assert len(entries) > 3000 and [w[1][0].split(":")[0] for w in wrong] in ([], ["null_address"]), wrong[:3]


def test_zero_and_random_windows_are_refused():
    assert not plausibility(bytes(128)).plausible
    rng = np.random.default_rng(3)
    assert not any(plausibility(rng.integers(0, 256, 128, np.uint8).tobytes()).plausible for _ in range(3000))
    # what kernel parameter buffers look like: mostly zeros, some small integers and pointers
    for _ in range(3000):
        words = np.zeros(16, np.uint64)
        picks = rng.integers(0, 16, rng.integers(1, 6))
        words[picks] = rng.choice([rng.integers(1, 4096), 0x7F00_0000_0000 + 256 * int(rng.integers(0, 1 << 20))])
        assert not plausibility(words.tobytes()).plausible, words


def test_a_device_edit_stays_plausible_and_a_stray_bit_does_not():
    spec = TensorMapSpec.create("float16", (64, 96), (16, 32), swizzle="64B")
    raw = int.from_bytes(encode_bytes(spec, 0x7F00_0000_1000), "little")
    edited = put(raw, DERIVED_BOX_BYTES, 12345).to_bytes(128, "little")  # as tensormap.replace leaves it: stale
    v = plausibility(edited)
    assert v.plausible and not v.driver_written
    stray = put(raw, GLOBAL_DIM[4], 7).to_bytes(128, "little")  # a dim slot past the rank: the driver writes 0
    v = plausibility(stray)
    assert not v.plausible and "stray_bits" in v.reasons[0]


def test_near_misses_are_maps_but_for_a_null_address_or_a_few_stray_bits_and_noise_is_none():
    """What the audit lists for a kernel that issues TMA with no map in its arguments: windows that are a map the
    driver would write but for a null address or a few bits it leaves clear; never a plausible map, zeros, random
    bytes or a parameter buffer's sparse words."""
    spec = TensorMapSpec.create("bfloat16", (300, 256), (64, 64), swizzle="128B")
    raw = int.from_bytes(encode_bytes(spec, 0x7F00_0000_1000), "little")
    assert near_miss(raw.to_bytes(128, "little")) is None  # a map: no miss
    null = put(raw, ADDRESS, 0).to_bytes(128, "little")
    assert not plausibility(null).plausible and "null address" in near_miss(null)
    stray = put(raw, GLOBAL_DIM[4], 3).to_bytes(128, "little")  # 2 bits in a dim slot past the rank
    assert "2 bit(s)" in near_miss(stray)
    assert near_miss(put(raw, GLOBAL_DIM[4], 0xFFFF).to_bytes(128, "little")) is None  # 16 bits: no map edited so
    assert near_miss(bytes(128)) is None
    rng = np.random.default_rng(4)
    assert not any(near_miss(rng.integers(0, 256, 128, np.uint8).tobytes()) for _ in range(3000))
    for _ in range(3000):
        words = np.zeros(16, np.uint64)
        words[rng.integers(0, 16, rng.integers(1, 6))] = rng.choice(
            [rng.integers(1, 4096), 0x7F00_0000_0000 + 256 * int(rng.integers(0, 1 << 20))])
        assert near_miss(words.tobytes()) is None, words
