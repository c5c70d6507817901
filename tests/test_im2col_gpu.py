"""im2col maps on the H200: the probe against the oracle bit for bit,
the order of the corner arrays, a filter base outside the bounding box (in a child process), and the two fuzz
campaigns (figures im2col_fuzz, im2col_encode_fuzz)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from drvtma.errors import TensorMapError
from drvtma.fuzz.campaign import bound_by, run_campaign
from drvtma.fuzz.coverage import MIN_HITS
from drvtma.fuzz.standard import standard
from drvtma.fuzz.targets import get_target
from drvtma.runtime.figures import record_figure
from drvtma.runtime.figures import record_test as record
from drvtma.testing.children import run_child
from drvtma.testing.im2col import build_im2col_loads, build_im2col_spec
from drvtma.testing.strategies import RngChooser
from drvtma.tma.im2col import oracle as oracle
from drvtma.tma.im2col.encode import encode_im2col
from drvtma.tma.im2col.probe import Im2colProbe, check_im2col_loads
from drvtma.tma.im2col.spec import Im2colSpec

pytestmark = pytest.mark.gpu

SEED = 25


@pytest.fixture(scope="module")
def probe(ctx):
    with Im2colProbe() as p:
        yield p


def _device_bytes(n: int, seed: int):
    from drvtma.runtime.driver import DeviceBuffer

    host = np.random.default_rng(seed).integers(0, 256, max(n, 16), dtype=np.uint8)
    return host, DeviceBuffer.from_array(host)


def _check(spec: Im2colSpec, coords, offsets, probe, seed=0, box_offset=0):
    host, buf = _device_bytes(spec.extent_bytes, seed)
    with buf:
        return check_im2col_loads(spec, host, coords, offsets, target=buf, box_offset=box_offset, probe=probe)


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_loads_match_the_oracle_bit_for_bit(ctx, probe, rank):
    ch = RngChooser(np.random.default_rng(SEED + rank))
    for i in range(40):
        spec = build_im2col_spec(ch, ranks=(rank,))
        coords, offsets = build_im2col_loads(ch, spec, 16)
        result = _check(spec, coords, offsets, probe, seed=i, box_offset=128 * (i % 4))
        assert result.ok, result.report


def test_the_probes_digests_are_the_hosts_of_its_images(ctx, probe):
    from drvtma.tma.im2col.encode import encode_im2col
    from drvtma.tma.tiled.oracle import image_digests

    ch = RngChooser(np.random.default_rng(SEED + 9))
    for i in range(24):
        spec = build_im2col_spec(ch, ranks=(3 + i % 3,))
        coords, offsets = build_im2col_loads(ch, spec, 16)
        host, buf = _device_bytes(spec.extent_bytes, i)
        with buf:
            pending = probe.launch(encode_im2col(spec, buf), coords, offsets, digests=True)
            digests = pending.digests()
            images = pending.wait()
        assert (digests == image_digests(images)).all(), spec.describe()


@pytest.mark.parametrize("shape, lower, upper", [((2, 6, 9, 16), (-2, 0), (0, -3)),
                                                 ((2, 4, 5, 6, 16), (-1, 0, -2), (0, -1, 1))])
def test_corner_arrays_go_to_the_driver_w_first(ctx, probe, shape, lower, upper):
    """Asymmetric corners: drvtma passes them reversed (W first, as CUTLASS and Triton do). If the H200 reads them
    the other way round, the oracle with the corners reversed matches instead, and the message says so."""
    spec = Im2colSpec.create("float16", shape, lower, upper, 16, 64)
    ch = RngChooser(np.random.default_rng(SEED))
    coords, offsets = build_im2col_loads(ch, spec, 32)
    result = _check(spec, coords, offsets, probe)
    if not result.ok:
        flipped = spec.replace(lower_corner=lower[::-1], upper_corner=upper[::-1])
        host, buf = _device_bytes(spec.extent_bytes, 0)
        with buf:
            from drvtma.tma.im2col.encode import encode_im2col

            got = probe.run(encode_im2col(spec, buf), coords, offsets, checked=False)
            try:
                agree = bool((got == oracle.im2col_images(flipped, host, coords, offsets, poison=0xA5A5A5A5,
                                                           image_bytes=got.shape[1])).all())
            except TensorMapError:  # the reversed corners make another box: some bases fall outside it
                agree = None
        pytest.fail(f"corner order: the W-first oracle differs; the reversed-corner oracle "
                    f"{'matches' if agree else 'differs too' if agree is False else 'cannot be asked'}\n{result.report}")
    record("im2col_corner_order", order="W first (driver order, as CUTLASS and Triton pass them)", ranks=[4, 5])


BASE_OUTSIDE_CHILD = r"""
import json, sys
import numpy as np
from drvtma.runtime import driver
from drvtma.tma.im2col.spec import Im2colSpec
from drvtma.tma.im2col.encode import encode_im2col
from drvtma.tma.im2col.probe import Im2colProbe
from drvtma.tma.im2col import oracle as oracle
driver.context()
spec = Im2colSpec.create("float16", (2, 6, 6, 16), (-1, -1), (-1, -1), 16, 8)  # box H, W in [-1, 4]
host = np.random.default_rng(1).integers(0, 256, spec.extent_bytes, dtype=np.uint8)
buf = driver.DeviceBuffer.from_array(host)
out = {}
for name, base in (("inside", (0, 4, 4, 0)), ("w_past_box", (0, 4, 5, 0)), ("w_far_past", (0, 0, 9, 0)),
                   ("h_below_box", (0, -2, 0, 0))):
    try:
        got = Im2colProbe().run(encode_im2col(spec, buf), [base], [(0, 0)], checked=False)[0]
        # what an oracle whose walk simply starts there would give (the bounds check skipped)
        c = np.asarray([base], np.int64); o = np.zeros((1, 2), np.int64)
        pos = oracle.walk(spec, c, o)[0]
        out[name] = {"result": "loaded", "positions_if_unclamped": pos[:, 1:].tolist(),
                     "image_hex": got[:spec.smem_bytes].tobytes().hex()}
    except Exception as exc:  # a fault: report it and stop (a sticky error ends the context)
        out[name] = {"result": f"{type(exc).__name__}: {exc}"[:300]}
        break
print("CHILD-RESULT " + json.dumps(out))
"""


def test_a_filter_base_outside_the_bounding_box(ctx):
    """The PTX ISA requires the base inside the box; drvtma refuses it (rule base_outside_box). What the H200 does
    with one is recorded here, in a child process (a sticky fault would end this one's context)."""
    try:
        proc = run_child(BASE_OUTSIDE_CHILD, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the child hung (killed after 120 s)")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CHILD-RESULT ")]
    assert lines, f"child exited {proc.returncode} without a result:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    out = json.loads(lines[-1].removeprefix("CHILD-RESULT "))
    record("im2col_base_outside_box", **{k: v["result"] for k, v in out.items()})
    assert out["inside"]["result"] == "loaded", out


@pytest.mark.parametrize("n_stride", [2, 3])
def test_the_walk_steps_n_by_its_element_stride(ctx, probe, n_stride):
    """Past the last pixel of an image the walk goes on in image n + N's element stride (not n + 1): a model that
    stepped by one was wrong on 885 of 7,182 loads on the H100 with strides 1..8, and only there."""
    spec = Im2colSpec.create("uint32", (7, 3, 4), (0,), (0,), 4, 10, element_strides=(n_stride, 1, 1))
    coords, offsets = [(0, 0, 0), (1, 2, 0), (5, 1, 0)], [(0,), (0,), (0,)]
    host, buf = _device_bytes(spec.extent_bytes, 3)
    with buf:
        got = probe.run(encode_im2col(spec, buf), coords, offsets)
        bound = spec.replace(base_address=buf.ptr)
    want = oracle.im2col_images(bound, host, coords, offsets, image_bytes=got.shape[1])
    one = oracle.im2col_images(bound.replace(element_strides=(1, 1, 1)), host, coords, offsets,
                               image_bytes=got.shape[1])
    assert (got == want).all(), "the walk into the next image does not step by N's element stride"
    assert (got != one).any(axis=1).all(), "every load here reaches another image: stepping by one must differ"


def _standard_campaign(name: str):
    """The target's standard campaign (drvtma.fuzz.standard), its coverage recorded and required."""
    target, std = get_target(name), standard(name)
    result = run_campaign(target, target.configure(), seed=std.seed, examples=std.examples, shrink=False)
    record_figure(result.coverage.figure())
    weak = result.coverage.unhit(MIN_HITS)
    assert not weak, f"{len(weak)} classes hit fewer than {MIN_HITS} times: {weak[:20]}"
    return result


def test_im2col_fuzz(ctx):
    result = _standard_campaign("im2col")
    labels = {}
    for key in result.by_label:
        kind, _, value = key.partition("=")
        labels.setdefault(kind, set()).add(value)
    details = "\n\n".join(f.outcome.detail for f in result.failures[:3])
    record("im2col_fuzz", loads=result.size, cases=result.cases, mismatches=result.mismatches,
           loads_per_second=round(result.size_per_second), ranks=sorted(int(r) for r in labels.get("rank", ())),
           swizzles=sorted(labels.get("swizzle", ())), fills=sorted(labels.get("fill", ())),
           dtypes=sorted(labels.get("dtype", ())), bound_by=bound_by(result.timing))
    assert result.mismatches == 0, f"{result.mismatches} of {result.cases} cases differ:\n{details}"


def test_im2col_encode_fuzz(ctx):
    result = _standard_campaign("im2col_encode")
    details = "\n".join(f.outcome.detail for f in result.failures[:10])
    record("im2col_encode_fuzz", specs=result.cases, disagreements=result.mismatches)
    for f in result.failures[:60]:  # each disagreement's spec comes back in the report, to settle the rule by
        spec = f.case
        record_figure({"test": "im2col_encode_disagreement", "detail": f.outcome.detail, "spec": spec.to_dict(),
                       "box_bounds": [list(b) for b in spec.box_bounds]})
    assert result.mismatches == 0, f"{result.mismatches} of {result.cases} specs disagree:\n{details}"
