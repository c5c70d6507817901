"""Tensor maps on the H200: validator vs driver (and the driver's box-size limit), loads vs the oracle bit for bit
(tf32 rounding, special float values), misaligned coordinates fault.

Sizes come from the environment: DRVTMA_FUZZ_SPECS (default 500), DRVTMA_FUZZ_BOXES (default 2000),
DRVTMA_FUZZ_SEED (default 1). Each test prints one JSON line of counts and seconds, and appends it to the file
named by DRVTMA_REPORT_JSONL when that is set.
"""

from __future__ import annotations

import dataclasses
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from drvtma import settings
from drvtma.errors import CudaError, TensorMapError
from drvtma.runtime.figures import record_test as record
from drvtma.testing import (
    ADDRESS_BASE,
    RngChooser,
    build_any_spec,
    build_coordinates,
    build_valid_spec,
    special_float_bits,
)
from drvtma.testing.children import run_child
from drvtma.tma.dtypes import FLOAT_DTYPES, TF32_DTYPES
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.encode import encode_tiled, encode_unchecked
from drvtma.tma.tiled.rules import driver_box_bytes, driver_should_accept, validate_all
from drvtma.tma.tiled.spec import DRIVER_BOX_BYTES_LIMIT, SMEM_PER_BLOCK_OPTIN_SM90, TensorMapSpec, TmaParams

pytestmark = pytest.mark.gpu

FUZZ_SPECS = settings.FUZZ_SPECS.get()
FUZZ_BOXES = settings.FUZZ_BOXES.get()
SEED = settings.FUZZ_SEED.get()
POOL_BYTES = 64 << 20
ROOT = Path(__file__).resolve().parents[1]



@pytest.fixture(scope="module")
def probe(ctx):
    from drvtma.tma.tiled.probe import LoadProbe

    with LoadProbe() as p:
        yield p


# ---- (a) validator and driver agree

def _driver_accepts(params: TmaParams, address: int) -> tuple[bool, str]:
    try:
        encode_unchecked(params, address)
        return True, ""
    except CudaError as exc:
        return False, exc.name


def test_validator_and_driver_agree(pool):
    buf, _ = pool
    ch = RngChooser(np.random.default_rng(SEED))
    start = time.perf_counter()
    disagreements, outcomes, checked = [], Counter(), 0
    while checked < FUZZ_SPECS:
        spec = build_any_spec(ch)
        errors = validate_all(spec)
        if any(e.rule == "rank_mismatch" for e in errors):
            continue  # not expressible to the driver (it would read past a short list)
        checked += 1
        address = buf.ptr + (spec.base_address - ADDRESS_BASE) % (1 << 20)
        expected = driver_should_accept(errors)
        accepted, why = _driver_accepts(spec.tma_params(), address)  # the address is not part of the params
        rules = sorted({e.rule for e in errors}) or ["valid"]
        outcomes[("accept" if accepted else "reject") + ":" + "+".join(rules)] += 1
        if accepted != expected:
            disagreements.append(f"driver {'accepted' if accepted else 'refused (' + why + ')'}, validator "
                                 f"expected {'accept' if expected else 'refuse'}; rules {rules}\n{spec.to_dict()}")
    # Packed Blackwell types: enum values the validator cannot even build a spec for.
    for enum in (13, 14, 15):
        params = dataclasses.replace(TensorMapSpec.create("uint8", (64, 128), (8, 128)).tma_params(),
                                     dtype_enum=enum)
        accepted, _ = _driver_accepts(params, buf.ptr)
        checked += 1
        if accepted:
            disagreements.append(f"driver accepted data type {enum} on sm_90")
    seconds = time.perf_counter() - start
    record("validator_and_driver_agree", specs=checked, disagreements=len(disagreements), seconds=round(seconds, 3),
           seed=SEED, outcomes=dict(sorted(outcomes.items())))
    assert not disagreements, f"{len(disagreements)} of {checked} disagree; first ones:\n" + "\n\n".join(
        disagreements[:10])


# ---- the driver's box-size limit (rule box_bytes; drvtma's own smem_budget is separate)

SEEN_BOX_ACCEPTED, SEEN_BOX_REFUSED = 229376, 245760  # float64 boxes, H200, driver 580.159.04


def test_driver_refuses_boxes_over_its_box_bytes_limit(pool):
    """The two float64 3D boxes seen on the H200: 14 x 64 x 32 x 8 B accepted, 15 x 64 x 32 x 8 B refused."""
    buf, _ = pool
    accepted = TensorMapSpec.create("float64", (256, 256, 32), (14, 64, 32))
    refused = accepted.replace(box=(15, 64, 32))
    assert (driver_box_bytes(accepted), driver_box_bytes(refused)) == (SEEN_BOX_ACCEPTED, SEEN_BOX_REFUSED)
    ok, why = _driver_accepts(accepted.tma_params(), buf.ptr)
    assert ok, f"the driver refused a {SEEN_BOX_ACCEPTED} B box ({why})"
    ok, why = _driver_accepts(refused.tma_params(), buf.ptr)
    record("driver_box_limit_seen_points", accepted_bytes=SEEN_BOX_ACCEPTED, refused_bytes=SEEN_BOX_REFUSED,
           refusal=why)
    assert not ok, f"the driver accepted a {SEEN_BOX_REFUSED} B box"


def _factors(n: int, count: int) -> tuple[int, ...] | None:
    """`count` factors of n, each 1..256, or None."""
    if count == 0:
        return () if n == 1 else None
    for d in range(min(256, n), 0, -1):
        rest = _factors(n // d, count - 1) if n % d == 0 else None
        if rest is not None:
            return (d,) + rest
    return None


def _uint8_box(nbytes: int) -> tuple[int, ...] | None:
    """A rank-5 uint8 box (NumPy order) of exactly `nbytes`: a 16..256 B row, outer axes <= 256; None if none."""
    for row in range(256, 15, -16):
        outer = _factors(nbytes // row, 4) if nbytes % row == 0 else None
        if outer is not None:
            return outer + (row,)
    return None


def _uint8_box_spec(nbytes: int, **options) -> TensorMapSpec:
    box = _uint8_box(nbytes)
    return TensorMapSpec.create("uint8", box, box, **options)


def _bisect_box_limit(address: int) -> tuple[int, int]:
    """(largest accepted, smallest refused) uint8 box bytes between the two seen points, to 16 B."""
    sizes = [n for n in range(SEEN_BOX_ACCEPTED, SEEN_BOX_REFUSED + 1, 16) if _uint8_box(n)]
    lo, hi = 0, len(sizes) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _driver_accepts(_uint8_box_spec(sizes[mid]).tma_params(), address)[0]:
            lo = mid
        else:
            hi = mid
    return sizes[lo], sizes[hi]


def test_driver_box_limit_is_box_bytes_not_the_footprint(pool):
    """The driver's box limit (loaded elements <= 228 KiB, rule box_bytes) where it differs from drvtma's own
    footprint rule (smem_budget: padded rows <= 227 KiB, which the driver does not enforce)."""
    buf, _ = pool
    limit = SMEM_PER_BLOCK_OPTIN_SM90
    cases = {
        "box of exactly the block limit": _uint8_box_spec(limit),
        "box 16 B over the block limit": _uint8_box_spec(limit + 16),
        "box of exactly the driver limit": _uint8_box_spec(DRIVER_BOX_BYTES_LIMIT),
        "box 48 B over the driver limit": _uint8_box_spec(DRIVER_BOX_BYTES_LIMIT + 48),
        # boxDim product 8 MiB, but element strides 8 load 32 x 32 rows of 128 B (the fuzz saw such boxes pass)
        "element strides load 128 KiB of an 8 MiB box": TensorMapSpec.create(
            "float32", (256, 256, 32), (256, 256, 32), element_strides=(8, 8, 1)),
        # 32 KiB of data in 16 B rows, each padded to the 128 B swizzle pitch: 256 KiB of shared memory
        "swizzle padding takes 32 KiB of data to 256 KiB": TensorMapSpec.create(
            "float32", (8, 256, 4), (8, 256, 4), swizzle="128B"),
        # loads ignore the dim-0 element stride (32 B rows, 464,896 B of shared memory) but the driver's count
        # halves it (232,448 B): accepted
        "dim-0 element stride 2 halves the driver's count": TensorMapSpec.create(
            "uint8", (limit // 1024, 64, 32), (limit // 1024, 64, 32), element_strides=(1, 1, 2)),
    }
    outcomes, wrong = {}, []
    for name, spec in cases.items():
        expected = driver_should_accept(validate_all(spec))
        accepted, why = _driver_accepts(spec.tma_params(), buf.ptr)
        outcomes[name] = {"box_bytes": driver_box_bytes(spec), "footprint": spec.smem_bytes,
                          "driver": "accepted" if accepted else why}
        if accepted != expected:
            wrong.append(f"{name}: drvtma counts {driver_box_bytes(spec)} B and expects the driver to "
                         f"{'accept' if expected else 'refuse'}; it {'accepted' if accepted else 'refused'}")
    largest, smallest = _bisect_box_limit(buf.ptr)
    record("driver_box_limit", limit=DRIVER_BOX_BYTES_LIMIT, largest_accepted=largest, smallest_refused=smallest,
           cases=outcomes)
    assert not wrong, "\n".join(wrong)
    assert largest <= DRIVER_BOX_BYTES_LIMIT < smallest, (f"uint8 boxes: the driver accepts {largest} B and refuses "
                                                         f"{smallest} B; DRIVER_BOX_BYTES_LIMIT needs updating")


# ---- (b) loads are bit-exact

def _load_case(ch, buf):
    big = ch.chance(0.05)
    spec = build_valid_spec(ch, interleave=False, address=False, max_dim=ch.choice([8, 40, 300]),
                            max_smem_bytes=200 * 1024 if big else ch.choice([2048, 16384, 49152]),
                            max_extent_bytes=8 << 20)
    align = ch.choice([16, 16, 128, 1024])
    offset = ch.integer(0, (POOL_BYTES - spec.extent_bytes - 1024) // align) * align
    spec = spec.replace(base_address=buf.ptr + offset)
    box_offset = 128 * ch.integer(0, 7)
    return spec, offset, box_offset


@pytest.mark.timing  # records boxes per second
def test_loads_match_the_oracle_bit_for_bit(pool, probe):
    from drvtma.tma.tiled.probe import check_loads

    buf, host = pool
    ch = RngChooser(np.random.default_rng(SEED + 1))
    start = time.perf_counter()
    boxes = specs = 0
    failures, seen = [], Counter()
    while boxes < FUZZ_BOXES:
        spec, offset, box_offset = _load_case(ch, buf)
        n = min(ch.integer(8, 64), FUZZ_BOXES - boxes)
        coords = [build_coordinates(ch, spec) for _ in range(n)]
        result = check_loads(spec, host[offset:offset + spec.extent_bytes], coords, box_offset,
                             poison=ch.integer(0, (1 << 32) - 1), probe=probe)
        boxes += n
        specs += 1
        seen.update([f"{spec.dtype.name}", f"rank{spec.rank}", f"swizzle{spec.swizzle_span_bytes}",
                     f"fill_{spec.oob_fill.name.lower()}"])
        if not result.ok:
            failures.append(result.report)
    seconds = time.perf_counter() - start
    record("loads_match_oracle", boxes=boxes, specs=specs, mismatched_specs=len(failures),
           seconds=round(seconds, 3), boxes_per_s=round(boxes / seconds), seed=SEED + 1, coverage=dict(seen))
    assert not failures, f"{len(failures)} of {specs} specs had mismatching loads:\n\n" + "\n\n".join(failures[:3])


def test_the_probes_digests_are_the_hosts_of_its_images(pool, probe):
    """What a campaign with oracle workers compares: the kernel's digest of each image (write_image_digest) is
    oracle.image_digests of the image it wrote, and the images are the oracle's, over random maps and boxes."""
    buf, host = pool
    ch = RngChooser(np.random.default_rng(SEED + 7))
    for _ in range(40):
        spec, offset, box_offset = _load_case(ch, buf)
        coords = [build_coordinates(ch, spec) for _ in range(ch.integer(1, 48))]
        poison = ch.integer(0, (1 << 32) - 1)
        pending = probe.launch(encode_tiled(spec), coords, box_offset=box_offset, poison=poison, digests=True)
        digests = pending.digests()
        images = pending.wait()
        want = oracle.load_images(spec, host[offset:offset + spec.extent_bytes], coords, box_offset=box_offset,
                                  image_bytes=images.shape[1], poison=poison)
        assert (images == want).all() and (digests == oracle.image_digests(images)).all(), spec.describe()


@pytest.mark.parametrize("dtype", [d.name for d in FLOAT_DTYPES])
def test_float_types_load_random_bits_and_nan_fill_as_modelled(pool, probe, dtype):
    """The fill and the in-bounds bits for every float type: copied, except tf32 which rounds (oracle)."""
    from drvtma.runtime.driver import DeviceBuffer
    from drvtma.tma.tiled.probe import check_loads

    spec = TensorMapSpec.create(dtype, (6, 32), (8, 32), oob_fill="nan")
    # Random bits (among them NaN and infinity patterns by chance) and the smallest denormal: FTZ or TF32
    # rounding would change some of them; test_float_loads_of_special_values_are_bit_exact places each on purpose.
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, spec.extent_bytes, dtype=np.uint8)
    data[: spec.itemsize * 4] = 0
    data[0] = 1  # element 0: the smallest denormal
    with DeviceBuffer.from_array(data) as dev:
        result = check_loads(spec.replace(base_address=dev.ptr), data, [(2, 0), (-3, 0), (100, 0)], probe=probe)
    record("float_raw_bits_and_nan_fill", dtype=dtype, ok=result.ok)
    assert result.ok, result.report


@pytest.mark.parametrize("dtype", [d.name for d in FLOAT_DTYPES])
def test_float_loads_of_special_values_are_bit_exact(probe, dtype):
    """Ties (even and odd), carries, overflow, NaNs, infinities, denormals and signs, between NaN-filled rows.

    tf32 types round (oracle.tma_load_convert, pinned on the CPU to what the H200 wrote); the rest copy bits.
    """
    from drvtma.runtime.driver import DeviceBuffer

    words = special_float_bits(dtype)
    per_row = 128 // words.itemsize
    rows = -(-len(words) // per_row)
    table = np.zeros(rows * per_row, dtype=words.dtype)
    table[:len(words)] = words
    spec = TensorMapSpec.create(dtype, (rows, per_row), (rows + 2, per_row), oob_fill="nan")
    coords = [(-1, 0)]  # a filled row, the table, a filled row
    with DeviceBuffer.from_array(table) as dev:
        image = probe.run(encode_tiled(spec, dev), coords)[0]
    got = image[:spec.smem_bytes].view(table.dtype).reshape(rows + 2, per_row)
    want = oracle.box_values(spec, table.view(np.uint8), coords)[0]
    loaded = np.full_like(got, 0)
    loaded[1:-1] = table.reshape(rows, per_row)
    digits = 2 * words.itemsize
    bad = [f"row {r - 1}, column {c}: {'fill' if r in (0, rows + 1) else f'{int(loaded[r, c]):0{digits}x}'} -> "
           f"got {int(got[r, c]):0{digits}x}, oracle {int(want[r, c]):0{digits}x}"
           for r, c in zip(*np.nonzero(got != want))]
    changed = int((got[1:-1] != loaded[1:-1]).sum())
    record("float_special_values", dtype=dtype, words=len(words), changed_by_load=changed, mismatches=len(bad))
    assert not bad, f"{len(bad)} of {got.size} elements differ from the oracle:\n" + "\n".join(bad[:20])
    if spec.dtype not in TF32_DTYPES:
        assert changed == 0


def test_swizzled_load_from_a_16_byte_aligned_global_address(pool, probe):
    """The Programming Guide asks 128 B for swizzled maps; the driver takes 16 B. What does the load do?"""
    from drvtma.tma.tiled.probe import check_loads

    buf, host = pool
    spec = TensorMapSpec.create("float16", (40, 200), (16, 64), swizzle="128B")
    for offset in (16, 48, 80, 112):
        spec_at = spec.replace(base_address=buf.ptr + 4096 + offset)
        result = check_loads(spec_at, host[4096 + offset:], [(0, 0), (5, 64), (30, 160), (-3, -8)], 256,
                             probe=probe)
        assert result.ok, result.report


def test_replace_address_moves_the_loads(pool, probe):
    from drvtma.runtime.driver import DeviceBuffer

    buf, host = pool
    spec = TensorMapSpec.create("uint32", (16, 64), (4, 16))
    tmap = encode_tiled(spec, buf)
    other = np.arange(16 * 64, dtype=np.uint32)
    with DeviceBuffer.from_array(other) as dev:
        tmap.replace_address(dev)
        assert tmap.address == dev.ptr
        images = probe.run(tmap, [(4, 16)])
        want = oracle.load_images(spec, other.view(np.uint8), [(4, 16)], image_bytes=images.shape[1],
                                  poison=0xA5A5A5A5)
        assert (images == want).all()
    with pytest.raises(TensorMapError):
        tmap.replace_address(buf.ptr + 8)


def test_encode_refusal_lists_every_argument(ctx):
    spec = TensorMapSpec.create("float32", (4, 250), (2, 32), strides_bytes=(1000, 4), base_address=1 << 40)
    with pytest.raises(TensorMapError):
        encode_tiled(spec)
    with pytest.raises(CudaError) as info:
        encode_tiled(spec, validate=False)
    text = str(info.value)
    assert "CUDA_ERROR_INVALID_VALUE" in text and "globalStrides=[1000]" in text and "boxDim=[32, 2]" in text


# ---- (c) misaligned inner coordinates

_FAULT_SCRIPT = textwrap.dedent("""
    import numpy as np
    from drvtma import StatusBuffer, load_module
    from drvtma.runtime.driver import DeviceBuffer, synchronize
    from drvtma.errors import CudaError
    from drvtma.tma.tiled.spec import TensorMapSpec
    from drvtma.tma.tiled.encode import encode_tiled
    spec = TensorMapSpec.create("float32", (8, 64), (4, 32))
    data = DeviceBuffer(spec.extent_bytes)
    tmap = encode_tiled(spec, data)
    kernel = load_module("tma/load_probe.cu").kernel("load_probe")
    coords = DeviceBuffer.from_array(np.array([[C0, 0, 0, 0, 0]], dtype=np.int32))
    images, status = DeviceBuffer(1024), StatusBuffer()
    try:
        kernel.launch(tmap, 2, coords, 0, 512, spec.expect_tx_bytes, 0, images, 0, status,
                      grid=(1, 1, 1), block=(128, 1, 1), shared_mem=512 + 1024)
        synchronize()
        print("RESULT NO_FAULT timeouts", int(status.read()["timeouts"]))
    except CudaError as exc:
        print("RESULT", exc.name)
""")


def _run_child(c0: int) -> str:
    proc = run_child(_FAULT_SCRIPT.replace("C0", str(c0)), timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert lines, f"child exited {proc.returncode} without a result:\n{proc.stdout}\n{proc.stderr}"
    return lines[-1].split(" ", 1)[1]


def test_misaligned_inner_coordinate_is_refused_here_and_faults_in_a_child(pool, probe):
    buf, _ = pool
    spec = TensorMapSpec.create("float32", (8, 64), (4, 32))
    tmap = encode_tiled(spec, buf)
    for c0 in (1, -1, 2, 3):
        with pytest.raises(TensorMapError) as info:
            probe.run(tmap, [(0, c0)])
        assert info.value.rule == "coord_alignment"
    start = time.perf_counter()
    aligned = _run_child(4)
    faulted = _run_child(1)
    record("misaligned_coordinate_faults", aligned_child=aligned, misaligned_child=faulted,
           seconds=round(time.perf_counter() - start, 3))
    assert aligned.startswith("NO_FAULT timeouts 0"), aligned
    assert faulted == "CUDA_ERROR_ILLEGAL_INSTRUCTION", faulted  # what the H200 (driver 580) answered
