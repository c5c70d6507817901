"""Tensor maps on the H200: validator vs driver, loads vs the oracle bit for bit, misaligned coordinates fault.

Sizes come from the environment: DRVTMA_FUZZ_SPECS (default 500), DRVTMA_FUZZ_BOXES (default 2000),
DRVTMA_FUZZ_SEED (default 1). Each test prints one JSON line of counts and seconds, and appends it to the file
named by DRVTMA_REPORT_JSONL when that is set.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from drvtma import oracle
from drvtma.dtypes import FLOAT_DTYPES
from drvtma.errors import CudaError, TensorMapError
from drvtma.tensormap import (TmaParams, TensorMapSpec, driver_should_accept, encode_tiled, encode_unchecked,
                              validate_all)
from drvtma.testing import ADDRESS_BASE, RngChooser, build_any_spec, build_coordinates, build_valid_spec

pytestmark = pytest.mark.gpu

FUZZ_SPECS = int(os.environ.get("DRVTMA_FUZZ_SPECS", "500"))
FUZZ_BOXES = int(os.environ.get("DRVTMA_FUZZ_BOXES", "2000"))
SEED = int(os.environ.get("DRVTMA_FUZZ_SEED", "1"))
POOL_BYTES = 64 << 20
ROOT = Path(__file__).resolve().parents[1]


def record(test: str, **fields) -> None:
    line = json.dumps({"test": test, **fields}, sort_keys=True)
    print(line)
    path = os.environ.get("DRVTMA_REPORT_JSONL")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


@pytest.fixture(scope="module")
def pool(ctx):
    """64 MiB of random bytes on the device, and the same bytes on the host."""
    from drvtma.driver import DeviceBuffer

    host = np.random.default_rng(SEED).integers(0, 256, POOL_BYTES, dtype=np.uint8)
    buf = DeviceBuffer.from_array(host)
    yield buf, host
    buf.close()


@pytest.fixture(scope="module")
def probe(ctx):
    from drvtma.probe import LoadProbe

    p = LoadProbe()
    yield p
    p.close()


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
        accepted, why = _driver_accepts(spec.replace(base_address=address).tma_params(), address)
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


# ---- (b) loads are bit-exact

def _load_case(ch, buf, host):
    big = ch.chance(0.05)
    spec = build_valid_spec(ch, interleave=False, address=False, max_dim=ch.choice([8, 40, 300]),
                            max_smem_bytes=200 * 1024 if big else ch.choice([2048, 16384, 49152]),
                            max_extent_bytes=8 << 20)
    align = ch.choice([16, 16, 128, 1024])
    offset = ch.integer(0, (POOL_BYTES - spec.extent_bytes - 1024) // align) * align
    spec = spec.replace(base_address=buf.ptr + offset)
    box_offset = 128 * ch.integer(0, 7)
    return spec, offset, box_offset


def test_loads_match_the_oracle_bit_for_bit(pool, probe):
    from drvtma.probe import check_loads

    buf, host = pool
    ch = RngChooser(np.random.default_rng(SEED + 1))
    start = time.perf_counter()
    boxes = specs = 0
    failures, seen = [], Counter()
    while boxes < FUZZ_BOXES:
        spec, offset, box_offset = _load_case(ch, buf, host)
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


@pytest.mark.parametrize("dtype", [d.name for d in FLOAT_DTYPES])
def test_float_types_copy_raw_bits_and_nan_fill_as_predicted(pool, probe, dtype):
    """Pins the fill and the raw copy for every float type (f64, tf32 and the FTZ types were not yet seen)."""
    from drvtma.driver import DeviceBuffer
    from drvtma.probe import check_loads

    spec = TensorMapSpec.create(dtype, (6, 32), (8, 32), oob_fill="nan")
    # Denormals, NaN payloads, infinities and random bits: FTZ or TF32 rounding would change some of them.
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, spec.extent_bytes, dtype=np.uint8)
    data[: spec.itemsize * 4] = 0
    data[0] = 1  # element 0: the smallest denormal
    with DeviceBuffer.from_array(data) as dev:
        result = check_loads(spec.replace(base_address=dev.ptr), data, [(2, 0), (-3, 0), (100, 0)], probe=probe)
    record("float_raw_bits_and_nan_fill", dtype=dtype, ok=result.ok)
    assert result.ok, result.report


def test_swizzled_load_from_a_16_byte_aligned_global_address(pool, probe):
    """The Programming Guide asks 128 B for swizzled maps; the driver takes 16 B. What does the load do?"""
    from drvtma.probe import check_loads

    buf, host = pool
    spec = TensorMapSpec.create("float16", (40, 200), (16, 64), swizzle="128B")
    for offset in (16, 48, 80, 112):
        spec_at = spec.replace(base_address=buf.ptr + 4096 + offset)
        result = check_loads(spec_at, host[4096 + offset:], [(0, 0), (5, 64), (30, 160), (-3, -8)], 256,
                             probe=probe)
        assert result.ok, result.report


def test_replace_address_moves_the_loads(pool, probe):
    from drvtma.driver import DeviceBuffer

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
    from drvtma.driver import DeviceBuffer, synchronize
    from drvtma.errors import CudaError
    from drvtma.tensormap import TensorMapSpec, encode_tiled
    spec = TensorMapSpec.create("float32", (8, 64), (4, 32))
    data = DeviceBuffer(spec.extent_bytes)
    tmap = encode_tiled(spec, data)
    kernel = load_module("load_probe.cu").kernel("load_probe")
    coords = DeviceBuffer.from_array(np.array([[C0, 0, 0, 0, 0]], dtype=np.int32))
    images, status = DeviceBuffer(1024), StatusBuffer()
    try:
        kernel.launch(tmap, 2, coords, 0, 512, spec.expect_tx_bytes, 0, images, status,
                      grid=(1, 1, 1), block=(128, 1, 1), shared_mem=512 + 1024)
        synchronize()
        print("RESULT NO_FAULT timeouts", int(status.read()["timeouts"]))
    except CudaError as exc:
        print("RESULT", exc.name)
""")


def _run_child(c0: int) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _FAULT_SCRIPT.replace("C0", str(c0))], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)
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
    assert faulted in ("CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_MISALIGNED_ADDRESS",
                       "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED"), faulted
