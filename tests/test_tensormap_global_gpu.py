"""Tensor maps beyond the parameter bank on the GPU: the decoder against the driver, maps in global and constant
memory, device-side edits (tensormap.replace) against the host model and the oracle, and the pitfalls.

DRVTMA_DECODE_SPECS sets the round trip's size (default 100000). Risky cases run in child processes.
"""

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from drvtma import settings
from drvtma.errors import TensorMapError
from drvtma.fuzz.coverage import Coverage
from drvtma.fuzz.coverage.decode import MODEL as DECODE_COVERAGE
from drvtma.runtime.figures import record_figure
from drvtma.runtime.figures import record_test as record
from drvtma.testing import RngChooser, build_coordinates, build_valid_spec
from drvtma.testing.tensormaps import random_spec
from drvtma.tma.maps.findings import plausibility
from drvtma.tma.maps.global_maps import POISON
from drvtma.tma.maps.replace import FIELDS, Edit, apply_all, apply_to_spec
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.decode import decode, encode_bytes, fields, same_map
from drvtma.tma.tiled.encode import encode_tiled, encode_unchecked
from drvtma.tma.tiled.spec import Interleave, Swizzle, TensorMapSpec

pytestmark = [pytest.mark.gpu, pytest.mark.needs("tensormap_replace")]

ROOT = Path(__file__).resolve().parents[1]
DECODE_SPECS = settings.DECODE_SPECS.get()
COVERAGE_BUDGET = 40000  # gpu-check's: from here on every coverage class must be hit
POOL_BYTES = 32 << 20
SEED = 14
DUMPS = settings.REPLACE_DUMPS.get()  # where to write the device's edits (CPU test data)


def _in_pool(ch, buf, spec, align=16):
    offset = ch.integer(0, (POOL_BYTES - spec.extent_bytes - 4096) // align) * align
    return spec.replace(base_address=buf.ptr + offset)


def _load_spec(ch, buf, **kw):
    spec = build_valid_spec(ch, interleave=False, address=False, max_dim=ch.choice([8, 40, 300]),
                            max_smem_bytes=ch.choice([2048, 16384]), max_extent_bytes=4 << 20, **kw)
    return _in_pool(ch, buf, spec, ch.choice([16, 128]))


def _host_bytes(host, buf, spec):
    return host[spec.base_address - buf.ptr:]


# ---------------------------------------------------------------------------------------------- the decoder

def test_decode_round_trip_of_driver_encoded_maps(ctx):
    """Random valid specs (every dtype, rank, interleave, swizzle, L2 promotion and fill, random addresses)
    encoded by the driver decode back exactly, and the host encoder writes the driver's bytes."""
    rng = np.random.default_rng(SEED)
    start = time.perf_counter()
    mismatches, host_mismatches, not_driver_written, bit85, seen, specs = [], 0, 0, 0, Counter(), []
    for _ in range(DECODE_SPECS):
        spec = random_spec(rng)
        specs.append(spec)
        raw = encode_unchecked(spec.tma_params(), spec.base_address).to_bytes()
        got, address = decode(raw)
        if not same_map(got, spec) or address != spec.base_address:
            mismatches.append((spec.to_dict(), got.to_dict()))
        host_mismatches += encode_bytes(spec) != raw
        not_driver_written += not plausibility(raw).driver_written
        bit85 += fields(raw).small_tensor_bit
        seen.update([spec.dtype.name, f"rank{spec.rank}", f"il{int(spec.interleave)}", f"sw{int(spec.swizzle)}",
                     f"l2{int(spec.l2_promotion)}", f"fill{int(spec.oob_fill)}"])
    seconds = round(time.perf_counter() - start, 1)
    record(test="decode_roundtrip", specs=DECODE_SPECS, mismatches=len(mismatches), host_encode_mismatches=host_mismatches,
           small_tensor_bit_set=bit85, seconds=seconds, kinds=len(seen), not_driver_written=not_driver_written)
    cov = Coverage("decode_roundtrip", DECODE_COVERAGE.universe())
    cov.add(DECODE_COVERAGE.count(specs))
    record_figure(cov.figure())
    assert not mismatches, f"{len(mismatches)} maps decode wrongly, first: {mismatches[:2]}"
    assert host_mismatches == 0
    assert not_driver_written == 0, "findings.plausibility refused maps the driver wrote"
    if DECODE_SPECS >= COVERAGE_BUDGET:  # smaller runs record the coverage figure without asserting it
        assert not cov.unhit(), f"the round trip never reached these classes:\n{cov.summary()}"
    assert len(seen) == 13 + 5 + 3 + 4 + 4 + 2, f"not every kind was drawn: {sorted(seen)}"


class _Cai:
    """A device array view for cuda.core (only __cuda_array_interface__)."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr, "version": 3,
                                         "strides": None}


def test_cuda_core_descriptors_decode_to_the_spec_asked_for(pool):
    cc = pytest.importorskip("cuda.core")
    buf, _ = pool
    try:
        from cuda.core import StridedMemoryView
    except ImportError:
        from cuda.core.utils import StridedMemoryView
    try:
        from cuda.core import TensorMapSwizzle
    except ImportError:  # cuda.core 1.2 keeps the enums in its tensor-map module
        from cuda.core._tensor_map import TensorMapSwizzle

    cc.Device(0).set_current()
    cases = [("<f4", (100, 128), (16, 32), TensorMapSwizzle.NONE, Swizzle.NONE),
             ("<f2", (64, 64, 64), (4, 8, 64), TensorMapSwizzle.SWIZZLE_128B, Swizzle.B128),
             ("|u1", (1000,), (64,), TensorMapSwizzle.SWIZZLE_64B, Swizzle.B64),
             ("<f8", (3, 4, 5, 6, 16), (1, 2, 3, 4, 4), TensorMapSwizzle.SWIZZLE_32B, Swizzle.B32)]
    checked = 0
    for typestr, shape, box, cc_swizzle, swizzle in cases:
        cai = _Cai(buf.ptr + 4096, shape, typestr)
        make = getattr(StridedMemoryView, "from_cuda_array_interface", None)
        view = make(cai, -1) if make else StridedMemoryView(cai, -1)
        desc = view.as_tensor_map(box, swizzle=cc_swizzle)
        spec, address = decode(desc)
        want = TensorMapSpec.create(np.dtype(typestr), shape, box, swizzle=swizzle, base_address=buf.ptr + 4096)
        assert same_map(spec, want), f"cuda.core map decodes to {spec.to_dict()}, asked for {want.to_dict()}"
        assert address == buf.ptr + 4096
        checked += 1
    record(test="decode_cuda_core", maps=checked, mismatches=0, version=cc.__version__)


TRITON_CHILD = r"""
import ctypes, json, sys
job = json.loads(sys.argv[1])
from cuda.bindings import driver as cu  # encoding needs a current context
cu.cuInit(0)
cu.cuCtxSetCurrent(cu.cuDevicePrimaryCtxRetain(cu.cuDeviceGet(0)[1])[1])
from triton.backends.nvidia.driver import CudaUtils
utils = CudaUtils()
fill = getattr(utils, "fill_tma_descriptor_tiled", None) or utils.fill_tma_descriptor  # 3.6: the latter
out = []
for ptr, swizzle, elem_size, elem_type, block, shape, strides in job:
    m = fill(ptr, swizzle, elem_size, elem_type, block, shape, strides, 0)
    where = id(m) + type(m).__basicsize__ - 128  # PyCUtensorMap ends with its 128-byte-aligned CUtensorMap
    assert where % 128 == 0, "unexpected PyCUtensorMap layout"
    raw = ctypes.string_at(where, 128)
    out.append(raw.hex())
print(json.dumps(out))
"""


def test_triton_descriptors_decode(pool):
    """Triton's host descriptors (fill_tma_descriptor_tiled, in a clean child: it compiles its own helper)."""
    buf, _ = pool
    cases = [(buf.ptr + 8192, 0, 4, 7, [16, 32], [100, 128], [128, 1], ("float32", (100, 128), (16, 32))),
             (buf.ptr + 8192, 0, 2, 6, [8, 64], [64, 64], [64, 1], ("float16", (64, 64), (8, 64)))]
    job = json.dumps([c[:7] for c in cases])
    try:
        proc = subprocess.run([sys.executable, "-c", TRITON_CHILD, job], capture_output=True, text=True, timeout=45,
                              cwd="/tmp")
    except subprocess.TimeoutExpired:
        pytest.skip("Triton's helper did not build within 45 s")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    if not lines:
        record(test="decode_triton", result="triton unavailable", detail=proc.stderr[-300:])
        pytest.skip(f"Triton's host descriptor path is unavailable here: {proc.stderr[-400:]}")
    maps = json.loads(lines[-1])
    bits = []
    for raw, case in zip(maps, cases):
        dtype, shape, box = case[7]
        spec, address = decode(raw)
        want = TensorMapSpec.create(dtype, shape, box, base_address=case[0])
        diffs = {k: (v, want.to_dict().get(k)) for k, v in spec.to_dict().items() if want.to_dict().get(k) != v}
        # Triton picks its own L2 promotion; everything else must be what was asked for.
        assert set(diffs) <= {"l2_promotion"}, f"Triton's map decodes to {spec.to_dict()}: {diffs}"
        bits.append(fields(raw).small_tensor_bit)
        driver = encode_unchecked(spec.tma_params(), address).to_bytes()
        assert driver.hex() == raw, "Triton's bytes differ from the driver's for the same arguments"
    record(test="decode_triton", maps=len(maps), mismatches=0, small_tensor_bit=bits)


# ---------------------------------------------------------------------------------------------- maps in memory

def test_global_and_constant_maps_load_like_by_value_maps(pool, runner):
    """Maps in global memory (acquire .sys / .gpu / none, with and without prefetch.tensormap) and in __constant__
    memory load what the oracle says."""
    from drvtma.tma.maps.global_maps import MapSlots

    buf, host = pool
    ch = RngChooser(np.random.default_rng(SEED + 3))
    modes = [(f, p) for f in ("sys", "gpu", "none") for p in (False, True)]
    boxes, bad = 0, Counter()
    with MapSlots(1) as slots:
        for _ in range(12):
            spec = _load_spec(ch, buf)
            tmap = encode_tiled(spec, buf)
            coords = [build_coordinates(ch, spec) for _ in range(24)]
            want = oracle.load_images(spec, _host_bytes(host, buf, spec), coords,
                                      image_bytes=oracle.image_bytes_for(spec), poison=POISON)
            slots.write(0, tmap)
            for fence, prefetch in modes:
                got = runner.load_global(slots.address(0), spec, coords, fence=fence, prefetch=prefetch)
                bad[f"global fence={fence} prefetch={prefetch}"] += int((got != want).any(axis=1).sum())
            runner.write_const_map(tmap)  # a new __constant__ map before each spec's launches
            for prefetch in (False, True):
                got = runner.load_const(spec, coords, prefetch=prefetch)
                bad[f"const prefetch={prefetch}"] += int((got != want).any(axis=1).sum())
            boxes += len(coords) * (len(modes) + 2)
    record(test="global_map_loads", boxes=boxes, mismatches=sum(bad.values()), bad_by_mode=dict(bad),
           modes=[f"global fence={f} prefetch={p}" for f, p in modes] + ["const", "const prefetch"])
    assert sum(bad.values()) == 0, dict(bad)


def test_map_address_rule():
    from drvtma.tma.maps.global_maps import check_map_address

    check_map_address(0x7F0000000040)
    with pytest.raises(TensorMapError, match="map_alignment"):
        check_map_address(0x7F0000000020)


# ---------------------------------------------------------------------------------------------- device edits

def _propose(ch, buf, field, host):
    """(template spec, edits, expected spec) for one field; the edited map is valid and inside the pool."""
    for _ in range(200):
        t = _load_spec(ch, buf) if field != "interleave" else _in_pool(ch, buf, build_valid_spec(
            ch, address=False, max_dim=40, max_smem_bytes=16384, max_extent_bytes=4 << 20), 32)
        r = t.rank
        k = ch.integer(0, r - 1)
        if field == "global_address":
            e = [Edit(field, _in_pool(ch, buf, t, ch.choice([16, 256])).base_address)]
        elif field == "rank":
            if r == 1:
                continue
            e = [Edit.rank(ch.integer(1, r - 1))]
        elif field == "box_dim":
            e = [Edit(field, ch.integer(1, 256), k)]
        elif field == "global_dim":
            e = [Edit(field, ch.integer(1, t.shape[r - 1 - k]), k)]
        elif field == "global_stride":
            if r == 1:
                continue
            k = ch.integer(0, r - 2)
            e = [Edit(field, t.strides_bytes[r - 2 - k] + 16 * ch.integer(0, 64), k)]
        elif field == "element_stride":
            e = [Edit(field, ch.integer(1, 8), k)]
        elif field == "elemtype":
            e = [Edit("elemtype", ch.integer(0, 12))]
        elif field == "interleave":
            e = [Edit(field, ch.integer(0, 2))]
        elif field == "swizzle":
            e = [Edit(field, ch.integer(0, 3))]
        else:
            e = [Edit("fill", 1 - int(t.oob_fill))]
        try:
            want = t
            for edit in e:
                want = apply_to_spec(want, edit)
        except (TensorMapError, ValueError):
            continue
        if want.is_valid() and want.extent_bytes + (want.base_address - buf.ptr) <= POOL_BYTES \
                and want.smem_bytes <= 64 << 10:
            return t, e, want
    raise AssertionError(f"no valid edit of {field} found")


def test_tensormap_replace_every_field_matches_the_host_model_and_the_oracle(pool, runner):
    """For every field: edit a driver-encoded template in shared memory, publish (cp_fenceproxy), acquire, load.
    The published bytes must be the host model's (apply_to_bytes) exactly, decode to the model's spec, and the
    loads must match the oracle (interleaved maps: the loads of the driver's own map of that spec)."""
    from drvtma.tma.maps.global_maps import ReplaceJob
    from drvtma.tma.tiled.probe import LoadProbe

    buf, host = pool
    ch = RngChooser(np.random.default_rng(SEED + 4))
    probe = LoadProbe()  # a cross-check when a load disagrees with the oracle
    per_field = Counter()
    bytes_bad, loads_bad, driver_differs, jobs_run = [], [], Counter(), 0
    dumps = []
    for field in FIELDS:
        for _ in range(10):
            t, edits, want = _propose(ch, buf, field, host)
            tmap = encode_tiled(t, buf)
            # The oracle models non-interleaved loads only: interleaved results are checked by their bytes.
            loadable = want.interleave == Interleave.NONE
            coords = [build_coordinates(ch, want) for _ in range(6)] if loadable else [()] * 2
            jobs = [ReplaceJob(edits, want if loadable else None, c) for c in coords]
            res = runner.replace_load(tmap, jobs)
            expected = apply_all(tmap.to_bytes(), edits)
            for p in res.published:
                if p.tobytes() != expected:
                    bytes_bad.append((field, t.to_dict(), [e.to_words().tolist() for e in edits],
                                      p.tobytes().hex(), expected.hex()))
            got_spec, _ = decode(res.published[0].tobytes())
            if not same_map(got_spec, want):
                bytes_bad.append((field, "decodes to", got_spec.to_dict(), want.to_dict()))
            if loadable:
                ref = oracle.load_images(want, _host_bytes(host, buf, want), coords, image_bytes=res.images.shape[1],
                                         poison=POISON)
                nbad = int((res.images != ref).any(axis=1).sum())
                if nbad:
                    loads_bad.append((field, t.to_dict(), want.to_dict(), nbad))
                    # Is it the edit or the oracle? The driver's own map of the same spec, by value.
                    loads_bad[-1] += (int((probe.run(encode_tiled(want, buf), coords,
                                                     image_bytes=res.images.shape[1]) != ref).any(axis=1).sum()),)
            driver = encode_tiled(want, buf).to_bytes()
            differ = int.from_bytes(driver, "little") ^ int.from_bytes(res.published[0].tobytes(), "little")
            driver_differs[field] += differ != 0 and not _only_derived(differ)
            per_field[field] += len(jobs)
            jobs_run += len(jobs)
            dumps.append({"field": field, "template": tmap.to_bytes().hex(),
                          "edits": [[e.field, e.ord, e.value] for e in edits],
                          "published": res.published[0].tobytes().hex(), "driver": driver.hex()})
    probe.close()
    if DUMPS:
        Path(DUMPS).write_text(json.dumps({"replace": dumps}))
    record(test="tensormap_replace", fields=sorted(per_field), jobs=jobs_run, mismatches=len(bytes_bad) + len(loads_bad),
           bytes_mismatches=len(bytes_bad), load_mismatches=len(loads_bad),
           differs_from_driver_beyond_derived_words=sum(driver_differs.values()))
    assert not bytes_bad, f"{len(bytes_bad)} published maps differ from the host model: {bytes_bad[:3]}"
    assert not loads_bad, f"{len(loads_bad)} loads through edited maps differ: {loads_bad[:3]}"
    assert sorted(per_field) == sorted(FIELDS)


def _only_derived(diff: int) -> bool:
    """True when the bits differing from the driver's map are only in the derived words (and bit 85)."""
    from drvtma.tma.tiled.decode import DERIVED_BOX_BYTES, DERIVED_SWIZZLE, SMALL_TENSOR_BIT

    mask = 0
    for off, width in (DERIVED_BOX_BYTES, DERIVED_SWIZZLE, SMALL_TENSOR_BIT):
        mask |= ((1 << width) - 1) << off
    return diff & ~mask == 0


def test_a_map_built_from_zeros_loads_like_the_drivers(pool, runner):
    """Every field set on the device over 128 zero bytes (as Triton does): the derived words stay zero, and the
    loads still match the oracle, so the hardware does not read them."""
    from drvtma.tma.maps.global_maps import ReplaceJob

    buf, host = pool
    ch = RngChooser(np.random.default_rng(SEED + 5))
    bad = 0
    for _ in range(8):
        spec = _load_spec(ch, buf)
        p = spec.tma_params()
        edits = [Edit("global_address", spec.base_address), Edit.rank(spec.rank), Edit.elemtype(spec.dtype),
                 Edit("swizzle", int(spec.swizzle)), Edit("fill", int(spec.oob_fill)), Edit("interleave", 0)]
        for k in range(spec.rank):
            edits += [Edit("global_dim", p.global_dim[k], k), Edit("box_dim", p.box_dim[k], k),
                      Edit("element_stride", p.element_strides[k], k)]
        edits += [Edit("global_stride", s, k) for k, s in enumerate(p.global_strides[:spec.rank - 1])]
        zeros = bytes(128)
        raw = zeros
        for i in range(0, len(edits), 8):  # at most 8 edits per job: chain the launches
            chunk = edits[i:i + 8]
            last = i + 8 >= len(edits)
            coords = [build_coordinates(ch, spec) for _ in range(4)] if last else [()]
            jobs = [ReplaceJob(chunk, spec if last else None, c, from_zeros=(i == 0)) for c in coords]
            res = runner.replace_load(raw, jobs)
            raw = res.published[0].tobytes()
        assert raw == apply_all(zeros, edits)
        # PTX has no L2-promotion field: a map built from zeros keeps none.
        assert raw == _with_derived(encode_bytes(spec.replace(l2_promotion=0)), 0, 0), \
            "a zero-built map differs from the driver's map beyond the derived words"
        want = oracle.load_images(spec, _host_bytes(host, buf, spec), coords, image_bytes=res.images.shape[1],
                                  poison=POISON)
        bad += int((res.images != want).any(axis=1).sum())
    record(test="tensormap_from_zeros", maps=8, mismatches=bad, derived_words="zero, unread by loads")
    assert bad == 0


def _with_derived(raw: bytes, box_bytes: int, marker: int) -> bytes:
    from drvtma.tma.tiled.decode import DERIVED_BOX_BYTES, DERIVED_SWIZZLE, put

    v = int.from_bytes(raw, "little")
    return put(put(v, DERIVED_BOX_BYTES, box_bytes), DERIVED_SWIZZLE, marker).to_bytes(128, "little")


def test_tf32_flag_survives_an_elemtype_edit_to_f32(pool, runner):
    """tensormap.replace.elemtype 7 (f32) on a tf32 map leaves the tf32 flag: the loads keep rounding."""
    from drvtma.tma.maps.global_maps import ReplaceJob

    buf, host = pool
    spec = TensorMapSpec.from_buffer(buf, "tfloat32", (64, 64), (16, 32), offset_bytes=1 << 20)
    tmap = encode_tiled(spec, buf)
    edited = apply_to_spec(spec, Edit.elemtype("float32"))
    assert edited.dtype.name == "tfloat32"
    coords = [(0, 0), (8, 32), (48, 32)]
    res = runner.replace_load(tmap, [ReplaceJob([Edit.elemtype("float32")], edited, c) for c in coords])
    rounding = oracle.load_images(edited, _host_bytes(host, buf, edited), coords, image_bytes=res.images.shape[1],
                                  poison=POISON)
    plain = oracle.load_images(edited.replace(dtype="float32"), _host_bytes(host, buf, edited), coords,
                               image_bytes=res.images.shape[1], poison=POISON)
    assert (plain != rounding).any(), "random data should contain words tf32 rounding changes"
    assert np.array_equal(res.images, rounding), "the edited map did not keep rounding to tf32"
    record(test="tensormap_replace_tf32_flag", result="elemtype f32 on a tf32 map keeps tf32 rounding")


def test_out_of_range_edits_are_refused_here_and_truncated_on_the_device(pool, runner):
    from drvtma.tma.maps.global_maps import ReplaceJob

    buf, _ = pool
    spec = TensorMapSpec.from_buffer(buf, "float32", (64, 64), (16, 32))
    tmap = encode_tiled(spec, buf)
    for field, value in (("box_dim", 0), ("box_dim", 257), ("element_stride", 9), ("global_dim", 0)):
        with pytest.raises(TensorMapError, match="replace_range"):
            Edit(field, value, 1)
    edits = [Edit.unchecked("box_dim", 0, 0), Edit.unchecked("box_dim", 257, 1),
             Edit.unchecked("element_stride", 9, 0), Edit.unchecked("element_stride", 0, 1)]
    res = runner.replace_load(tmap, [ReplaceJob(edits)])
    raw = res.published[0].tobytes()
    assert raw == apply_all(tmap.to_bytes(), edits)
    f = fields(raw)
    assert (f.box_dim[:2], f.element_strides[:2]) == ((256, 1), (1, 8))
    record(test="tensormap_replace_truncation", box_0=256, box_257=1, element_stride_9=1, element_stride_0=8)
