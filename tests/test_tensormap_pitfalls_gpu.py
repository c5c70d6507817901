"""Tensor-map pitfalls on the GPU, each pinned with what the H200 did: maps rewritten without the acquire fence
(host and device writers, loads still in flight), misaligned global maps, invalid device edits, bit 85.

Faults and hangs are kept in child processes; every wait is bounded. Figures go to DRVTMA_REPORT_JSONL.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from drvtma.runtime.figures import record_test as record
from drvtma.testing.children import run_child
from drvtma.tma.tiled.decode import fields
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.spec import TensorMapSpec

pytestmark = [pytest.mark.gpu, pytest.mark.needs("tensormap_replace")]

ROOT = Path(__file__).resolve().parents[1]
POOL_BYTES = 16 << 20
SEED = 15  # the conftest's `pool` fixture reads both


def _tagged(buf, offset, n_words, tag):
    words = (np.arange(n_words, dtype=np.uint32) & 0xFFFF) | np.uint32(tag << 16)
    buf.upload(words, offset)


def test_rewrites_without_the_acquire_fence(pool, runner):
    """A slot rewritten with a new map: by the host between launches (acquire .sys or not), and by the device
    inside a kernel (acquire .gpu or not, after load 1 completed or while it may be in flight). Fenced cases must
    read the new map; how often the unfenced ones read the old one is recorded."""
    from drvtma.tma.maps.global_maps import MapSlots

    buf, host = pool
    spec_a = TensorMapSpec.from_buffer(buf, "uint32", (256, 64), (64, 64), offset_bytes=8 << 20)
    spec_b = spec_a.replace(base_address=spec_a.base_address + (2 << 20))
    _tagged(buf, 8 << 20, 256 * 64, 0xAAAA)
    _tagged(buf, 10 << 20, 256 * 64, 0xBBBB)
    a, b = encode_tiled(spec_a, buf), encode_tiled(spec_b, buf)
    coords = [(64 * (i % 4), 0) for i in range(132)]
    host_side = {}
    try:
        with MapSlots(1) as slots:
            for fence in ("sys", "gpu", "none"):
                stale = 0
                for it in range(60):
                    m, s, tag = (a, spec_a, 0xAAAA) if it % 2 == 0 else (b, spec_b, 0xBBBB)
                    slots.write(0, m)
                    img = runner.load_global(slots.address(0), s, coords, fence=fence)
                    stale += int(((img.view(np.uint32)[:, 0] >> 16) != tag).sum())
                host_side[fence] = [stale, 60 * len(coords)]
        record(test="tensormap_host_rewrite", stale_ctas=host_side)
        device_side = {}
        for in_flight in (False, True):
            for acquire in (True, False):
                tot = np.zeros((2, 3), dtype=np.int64)
                for _ in range(20):
                    tot += runner.rewrite_probe(a, b, spec_a, (0, 0), blocks=264, in_flight=in_flight,
                                                acquire=acquire).sum(axis=0, dtype=np.int64)
                device_side[f"in_flight={in_flight} acquire={acquire}"] = tot.tolist()
    finally:
        buf.upload(host[8 << 20:12 << 20], 8 << 20)
    words = 64 * 64 * 264 * 20
    record(test="tensormap_device_rewrite", words_load1_load2_A_B_other=device_side, words_per_case=words)
    # what docs/tensormap.md says the H200 does (if it now does otherwise, the H200 wins: change the doc)
    assert all(host_side[f][0] == 0 for f in ("sys", "gpu", "none")), f"a host rewrite read a stale map: {host_side}"
    for in_flight in (False, True):
        fenced = device_side[f"in_flight={in_flight} acquire=True"]
        assert fenced == [[words, 0, 0], [0, words, 0]], f"device rewrite + .gpu acquire: {fenced}"
        unfenced = device_side[f"in_flight={in_flight} acquire=False"]
        assert unfenced == [[words, 0, 0], [words, 0, 0]], f"device rewrite, no acquire: the old map? {unfenced}"


CHILD = r"""
import json, sys
import numpy as np
job = json.loads(sys.argv[1])
from drvtma.runtime import driver
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.maps.global_maps import POISON, GlobalMapRunner, MapSlots, ReplaceJob
from drvtma.tma.maps.replace import Edit
from drvtma.tma.tiled.spec import TensorMapSpec
host = np.random.default_rng(5).integers(0, 256, 1 << 20, dtype=np.uint8)
buf = driver.DeviceBuffer.from_array(host)
runner = GlobalMapRunner(defines={"DRVTMA_WAIT_TIMEOUT_NS": "200000000ull"})
spec = TensorMapSpec.from_buffer(buf, "float32", (100, 128), (16, 32))
tmap = encode_tiled(spec, buf)
coords = [(8, 32)] * 4
want = oracle.load_images(spec, host, coords, image_bytes=oracle.image_bytes_for(spec), poison=POISON)
try:
    if job["kind"] == "offset":
        with MapSlots(1, offset=job["offset"]) as slots:
            slots.write(0, tmap)
            got = runner.load_global(slots.address(0), spec, coords, check=False)
            driver.synchronize()
            out = {"result": "ok" if np.array_equal(got, want) else "wrong data"}
    elif job["kind"] == "box":
        # The kernel expects the bytes of the box it asked for; the 8-bit field holds another box.
        edit = Edit.unchecked("box_dim", job["value"], 1)
        intended = spec.replace(box=(job["value"], 32))
        res = runner.replace_load(tmap, [ReplaceJob([edit], intended, (8, 32))], raise_timeouts=False,
                                  image_bytes=256 * 128)
        driver.synchronize()
        out = {"result": "timeout" if res.timeouts else "ok", "timeouts": res.timeouts}
    else:
        raw = bytearray(tmap.to_bytes())
        raw[job["bit"] // 8] ^= 1 << (job["bit"] % 8)
        with MapSlots(1) as slots:
            slots.write(0, bytes(raw))
            got = runner.load_global(slots.address(0), spec, coords)
            driver.synchronize()
            out = {"result": "ok" if np.array_equal(got, want) else "wrong data"}
except Exception as exc:
    out = {"result": type(exc).__name__, "detail": str(exc)[:300]}
print(json.dumps(out))
"""


def _child(job: dict) -> dict:
    proc = run_child(CHILD, json.dumps(job), timeout=90)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"child exited {proc.returncode} without a result:\n{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}"
    return json.loads(lines[-1])


def test_map_alignment_in_child_processes(ctx):
    """Every placement drvtma's rule accepts (multiples of 64 B) must load right; what 32 and 16 B do is recorded."""
    from drvtma.tma.maps.global_maps import MAP_ALIGNMENT

    seen = {o: _child({"kind": "offset", "offset": o}) for o in (0, 64, 32, 16)}
    record(test="tensormap_global_alignment", **{f"offset_{o}": r["result"] for o, r in seen.items()})
    for o, r in seen.items():
        if o % MAP_ALIGNMENT == 0:
            assert r["result"] == "ok", f"a map at +{o} B (allowed by MAP_ALIGNMENT={MAP_ALIGNMENT}) gave {r}"
        else:  # docs/tensormap.md: the launch ends in a CudaError below the driver's 64 B
            assert r["result"] == "CudaError", f"a map at +{o} B: {r}"


def test_invalid_box_edits_time_out_instead_of_hanging(ctx):
    """Box 512 is stored as 256 (8-bit field): a kernel expecting 512 rows' bytes waits forever, unless bounded."""
    out = {v: _child({"kind": "box", "ord": 1, "value": v}) for v in (512, 300)}
    record(test="tensormap_replace_invalid_box", box_512=out[512], box_300=out[300])
    for v, r in out.items():
        assert r["result"] == "timeout", f"box {v}: expected a bounded timeout, got {r}"


def test_small_tensor_bit_85_on_hopper(ctx):
    """Bit 85, which CUTLASS and Triton clear on drivers <= 13.1: never set by the sm_90 driver (the round trip
    counts it); setting it by hand on a 50 KB tensor is recorded (child process)."""
    from drvtma.runtime.driver import DeviceBuffer

    with DeviceBuffer(100 * 128 * 4) as buf:
        small = encode_tiled(TensorMapSpec.from_buffer(buf, "float32", (100, 128), (16, 32)), buf)
        assert fields(small).small_tensor_bit == 0
    out = _child({"kind": "bit", "bit": 85})
    record(test="tensormap_bit85", driver_sets_it=0, set_by_hand=out["result"])
    assert out["result"] == "ok", out  # docs/tensormap.md: setting it by hand changed nothing in the loads
