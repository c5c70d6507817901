"""Stores and reductions without a GPU: the oracle against slow references, reduction semantics, validation, SASS."""

import bisect
import itertools
import math
import warnings
from fractions import Fraction
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drvtma.errors import StoreStraddleWarning, TensorMapError
from drvtma.runtime import compiler, sass
from drvtma.tma import stores as S
from drvtma.tma.dtypes import ALL_DTYPES, BFLOAT16, FLOAT16, FLOAT32, INT32, INT64, UINT32, UINT64
from drvtma.tma.stores import probe as P
from drvtma.tma.tiled.spec import TensorMapSpec

from support.struct_layout import compile_layout_check

seeds = st.integers(0, 2**32 - 1)
store_dtypes = st.sampled_from(S.STORE_DTYPES)


def small_case(seed: int) -> S.StoreCase:
    return S.random_store_case(np.random.default_rng(seed), max_box_bytes=2048, max_extent_bytes=16384,
                               straddle_reductions=True)


# ---------------------------------------------------------------------------------------------- straddle

@given(dt=store_dtypes, inner=st.integers(1, 600), box_chunks=st.integers(1, 16), start_chunk=st.integers(0, 40))
def test_straddle_writes_exactly_the_rest_of_the_last_chunk(dt, inner, box_chunks, start_chunk):
    unit = 16 // dt.itemsize
    box = min(box_chunks * unit, 256 // unit * unit)
    spec = TensorMapSpec.create(dt, (inner,), (box,))
    c0 = start_chunk * unit
    written = c0 + S.store_targets(spec, (c0,)).box_index[0]
    beyond = written[written >= inner]
    last_chunk = (inner - 1) * dt.itemsize // 16
    # every element written past the edge shares the 16-byte chunk of the last in-bounds element
    assert all(g * dt.itemsize // 16 == last_chunk for g in beyond)
    assert len(beyond) * dt.itemsize < 16
    # and every box element of that chunk past the edge is written
    chunk_end = (last_chunk + 1) * 16 // dt.itemsize
    want = [g for g in range(max(inner, c0), min(chunk_end, c0 + box))]
    assert sorted(beyond.tolist()) == want
    if inner * dt.itemsize % 16 == 0:
        assert beyond.size == 0
    # in-bounds elements of the box are all written
    assert set(range(c0, min(c0 + box, inner))) <= set(written.tolist())


def test_straddle_example_fp16_row_of_13():
    # 13 fp16 = 26 B: the chunk [16, 32) holds element 12, so elements 13, 14, 15 are written too, 16.. are not.
    spec = TensorMapSpec.create("float16", (2, 13), (2, 32), strides_bytes=(64, 2))
    cols = S.store_targets(spec, (0, 0)).box_index[1].ravel()
    assert cols.tolist() == list(range(16))
    assert S.inner_write_limit(spec) == 16


# ---------------------------------------------------------------------------------------------- oracle vs reference

def _swizzle_scalar(address: int, swizzle: int) -> int:
    mask = {0: 0, 1: 1, 2: 3, 3: 7}[int(swizzle)]
    return address ^ (((address >> 7) & mask) << 4)


def reference_store(memory: np.ndarray, base: int, spec, coords, image: np.ndarray, smem_offset: int) -> set:
    """One element at a time, straight from the model's words. Returns the byte offsets it wrote."""
    s, r = spec.itemsize, spec.rank
    counts = spec.loaded_counts
    limit = math.ceil(spec.shape[-1] * s / 16) * 16 // s
    touched = set()
    for j in itertools.product(*(range(n) for n in counts)):
        g = [coords[k] + j[k] * (spec.element_strides[k] if k < r - 1 else 1) for k in range(r)]
        if any(g[k] >= spec.shape[k] for k in range(r - 1)) or g[-1] >= limit:
            continue
        row = 0
        for k in range(r - 1):
            row = row * counts[k] + j[k]
        off = base + sum(g[k] * spec.strides_bytes[k] for k in range(r))
        for b in range(s):
            logical = row * spec.row_pitch_bytes + j[-1] * s + b
            memory[off + b] = image[_swizzle_scalar(logical + smem_offset, spec.swizzle) - smem_offset]
            touched.add(off + b)
    return touched


@given(seed=seeds)
def test_vectorised_store_oracle_matches_the_element_by_element_reference(seed):
    case = small_case(seed)
    spec, rng = case.spec, np.random.default_rng(seed)
    base = 64
    memory = rng.integers(0, 256, base + spec.extent_bytes + 64, dtype=np.uint8)
    image = rng.integers(0, 256, spec.smem_bytes, dtype=np.uint8)
    want = memory.copy()
    touched = reference_store(want, base, spec, case.coords, image, case.smem_offset)
    got = memory.copy()
    targets = S.apply_store(got, base, spec, case.coords, S.box_from_smem(spec, image, case.smem_offset))
    np.testing.assert_array_equal(got, want)
    assert targets.count * spec.itemsize == len(touched)


@given(seed=seeds)
def test_nothing_outside_in_bounds_rows_and_the_straddle_changes(seed):
    case = small_case(seed)
    spec = case.spec
    rng = np.random.default_rng(seed)
    memory = rng.integers(0, 256, spec.extent_bytes + 128, dtype=np.uint8)
    box = rng.integers(0, 256, math.prod(spec.loaded_counts) * spec.itemsize, dtype=np.uint8).view(spec.dtype.numpy)
    after = memory.copy()
    targets = S.apply_store(after, 0, spec, case.coords, box, case.op)
    changed = np.flatnonzero(after != memory)
    # every changed byte and every target element lies in an in-bounds row, at most 15 bytes past its inner edge
    for off in np.concatenate([changed, targets.byte_offsets.ravel()]):
        rem, idx = int(off), []
        for stride in spec.strides_bytes[:-1]:
            idx.append(rem // stride)
            rem %= stride
        assert all(i < n for i, n in zip(idx, spec.shape[:-1]))
        assert rem < math.ceil(spec.shape[-1] * spec.itemsize / 16) * 16


@given(seed=seeds, offset=st.sampled_from([0, 128, 256, 384, 512, 640, 768, 896]))
def test_smem_layout_round_trips_and_swizzle_stays_inside_each_128_byte_row(seed, offset):
    spec = small_case(seed).spec
    rng = np.random.default_rng(seed)
    box = rng.integers(0, 256, math.prod(spec.loaded_counts) * spec.itemsize, dtype=np.uint8).view(spec.dtype.numpy)
    image = S.smem_from_box(spec, box, offset)
    back = S.box_from_smem(spec, image, offset)
    assert back.shape == spec.loaded_counts and back.tobytes() == box.tobytes()
    offs = S.smem_byte_offsets(spec, offset).ravel()
    assert len(set(offs.tolist())) == offs.size and offs.min() >= 0 and offs.max() < spec.smem_bytes
    counts = spec.loaded_counts
    rows = np.arange(math.prod(counts[:-1]))[:, None] * spec.row_pitch_bytes
    logical = (rows + np.arange(counts[-1] * spec.itemsize)[None, :]).ravel()
    assert np.array_equal((offs + offset) >> 7, (logical + offset) >> 7)  # XOR touches bits 4..6 only
    assert np.array_equal(offs & 15, logical & 15)  # 16-byte chunks move whole
    unswizzled = np.array([_swizzle_scalar(int(o) + offset, spec.swizzle) - offset for o in offs])
    assert np.array_equal(unswizzled, logical)  # the scalar rule, applied again, undoes it
    if spec.swizzle == 0:
        assert np.array_equal(offs, logical)


def test_swizzle_128b_example_second_row_swaps_chunks():
    spec = TensorMapSpec.create("float32", (8, 32), (8, 32), swizzle="128B")
    offs = S.smem_byte_offsets(spec, 0)
    assert offs[1, 0, 0] == 128 + 16 and offs[1, 4, 0] == 128  # row 1: chunk c lands at c ^ 1
    assert S.smem_byte_offsets(spec, 128)[0, 0, 0] == 16  # shifted base: row 0 sees row 1's pattern


# ---------------------------------------------------------------------------------------------- reductions

def test_integer_add_wraps():
    assert S.reduce_values("add", UINT32, np.uint32([0xFFFFFFFF]), np.uint32([2]))[0] == 1
    assert S.reduce_values("add", INT32, np.int32([2**31 - 1]), np.int32([1]))[0] == -2**31
    assert S.reduce_values("add", UINT64, np.uint64([2**64 - 1]), np.uint64([1]))[0] == 0


@given(old=st.integers(0, 2**32 - 1), src=st.integers(0, 2**32 - 1))
def test_inc_and_dec_are_ptxs_wrapping_counters(old, src):
    inc = int(S.reduce_values("inc", UINT32, np.uint32([old]), np.uint32([src]))[0])
    dec = int(S.reduce_values("dec", UINT32, np.uint32([old]), np.uint32([src]))[0])
    assert inc == (0 if old >= src else old + 1)
    assert dec == (src if old == 0 or old > src else old - 1)
    assert inc <= src and dec <= src  # "a result in the range [0..x]", x the source value (PTX ISA)


def test_inc_dec_wrap_examples():
    r = lambda op, o, s: int(S.reduce_values(op, UINT32, np.uint32([o]), np.uint32([s]))[0])  # noqa: E731
    assert [r("inc", o, 3) for o in (0, 1, 2, 3, 9)] == [1, 2, 3, 0, 0]
    assert [r("dec", o, 3) for o in (0, 1, 3, 4)] == [3, 0, 2, 3]


def test_min_max_signedness_follows_the_map_type():
    assert S.reduce_values("min", INT32, np.int32([-1]), np.int32([0]))[0] == -1
    assert S.reduce_values("min", UINT32, np.uint32([0xFFFFFFFF]), np.uint32([0]))[0] == 0
    assert S.reduce_values("max", INT64, np.int64([-5]), np.int64([-7]))[0] == -5


@given(a=st.integers(0, 2**64 - 1), b=st.integers(0, 2**64 - 1), op=st.sampled_from(["and", "or", "xor"]),
       dt=st.sampled_from([UINT32, INT32, UINT64, INT64]))
def test_bitwise_ops_act_on_the_bits(a, b, op, dt):
    bits = 8 * dt.itemsize
    a, b = a % (1 << bits), b % (1 << bits)
    ua, ub = np.array([a], f"u{dt.itemsize}").view(dt.numpy), np.array([b], f"u{dt.itemsize}").view(dt.numpy)
    with mock.patch.dict(S.REDUCE_DTYPES, {op: S.REDUCE_DTYPES[op] + (INT64,)}):  # the oracle models INT64 too
        got = int(S.reduce_values(op, dt, ua, ub).view(f"u{dt.itemsize}")[0])
    assert got == {"and": a & b, "or": a | b, "xor": a ^ b}[op]


def _finite_table(carrier_bits_to_float):
    """All finite values of a 16-bit float format, sorted, with their bits; plus the overflow point as inf."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    with np.errstate(invalid="ignore"):  # signalling NaN patterns
        vals = carrier_bits_to_float(bits.astype(np.uint16))
    ok = np.isfinite(vals)
    pairs = sorted((Fraction(float(v)), int(b)) for v, b in zip(vals[ok], bits[ok]) if not (v == 0 and b & 0x8000))
    return pairs


_F16 = _finite_table(lambda b: b.view(np.float16).astype(np.float64))
_BF16 = _finite_table(lambda b: (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64))


def _round_nearest_even(x: Fraction, table, inf_bits: int) -> int:
    keys = [v for v, _ in table]
    top = keys[-1]
    overflow = top + (top - keys[-2]) / 2  # half an ulp past the largest finite value rounds to inf (even)
    if abs(x) >= overflow:
        return inf_bits | (0x8000 if x < 0 else 0)
    i = bisect.bisect_left(keys, x)
    cands = [table[k] for k in (i - 1, i) if 0 <= k < len(table)]
    best = min(cands, key=lambda vb: (abs(vb[0] - x), vb[1] & 1))
    return best[1]


def finite16(exp_mask: int):
    """16-bit patterns of finite values (the exponent field not all ones), built without filtering."""
    return st.integers(0, 0xFFFF).map(lambda b: b if (b & exp_mask) != exp_mask else b & ~(exp_mask & (exp_mask >> 1)))


@given(a=finite16(0x7C00), b=finite16(0x7C00))
def test_f16_add_rounds_once_to_nearest_even_and_keeps_subnormals(a, b):
    fa, fb = (np.array([v], np.uint16).view(np.float16) for v in (a, b))
    exact = Fraction(float(fa[0])) + Fraction(float(fb[0]))
    got = int(S.reduce_values("add", FLOAT16, fa, fb).view(np.uint16)[0])
    want = _round_nearest_even(exact, _F16, 0x7C00)
    if exact == 0:
        assert got & 0x7FFF == 0
    else:
        assert got == want


@given(a=finite16(0x7F80), b=finite16(0x7F80))
def test_bf16_add_rounds_once_to_nearest_even(a, b):
    ua, ub = np.array([a], np.uint16), np.array([b], np.uint16)
    to_f = lambda u: Fraction(float((u.astype(np.uint32) << 16).view(np.float32)[0]))  # noqa: E731
    exact = to_f(ua) + to_f(ub)
    got = int(S.reduce_values("add", BFLOAT16, ua, ub)[0])
    if exact == 0:
        assert got & 0x7FFF == 0
    else:
        assert got == _round_nearest_even(exact, _BF16, 0x7F80)


def test_f32_tensor_add_keeps_subnormals_as_the_h200_does():
    """Unlike the documented non-tensor bulk reduce, the tensor f32 add keeps subnormals [seen on the H200]."""
    bits = lambda *v: np.array(v, np.uint32).view(np.float32)  # noqa: E731
    r = S.reduce_values("add", FLOAT32, bits(0x1, 0x7FFFFF, 0x80000001), bits(0x1, 0x1, 0x7FFFFF))
    assert r.view(np.uint32).tolist() == [0x2, 0x800000, 0x7FFFFE]
    big = np.float32(1.5)
    assert S.reduce_values("add", FLOAT32, np.float32([big]), np.float32([big]))[0] == 3.0


def test_float_min_max_nan_and_signed_zero_rules():
    h = lambda *v: np.array(v, np.float16)  # noqa: E731
    nan = np.float16("nan")
    r = S.reduce_values("min", FLOAT16, h(nan, 1.0, nan, 0.0, -0.0), h(2.0, nan, nan, -0.0, 0.0))
    assert r[0] == 2.0 and r[1] == 1.0 and r.view(np.uint16)[2] == 0x7FFF
    assert np.signbit(r[3]) and np.signbit(r[4])
    r = S.reduce_values("max", FLOAT16, h(0.0, -0.0), h(-0.0, 0.0))
    assert not np.signbit(r[0]) and not np.signbit(r[1])
    bf = np.array([0x3F80, 0xBF80], np.uint16)  # 1.0, -1.0
    assert S.reduce_values("min", BFLOAT16, bf, bf[::-1]).tolist() == [0xBF80, 0xBF80]


# ---------------------------------------------------------------------------------------------- validation

def test_reduction_dtype_table_is_the_ptx_isa_one_less_what_faults():
    """The PTX ISA's table, except b64 bitwise ops through INT64 maps, which fault on the H200 [seen]."""
    table = {"add": {"uint32", "int32", "uint64", "float32", "float16", "bfloat16"},
             "min": {"uint32", "int32", "uint64", "int64", "float16", "bfloat16"},
             "inc": {"uint32"}, "dec": {"uint32"}, "and": {"uint32", "int32", "uint64"}}
    table["max"], table["or"], table["xor"] = table["min"], table["and"], table["and"]
    for op in S.REDUCE_OPS:
        for dt in ALL_DTYPES:
            if dt.name in table[op]:
                S.check_reduction(op, dt)
            else:
                with pytest.raises(TensorMapError) as info:
                    S.check_reduction(op, dt)
                assert info.value.rule == "reduce_dtype" and op in str(info.value)
    with pytest.raises(TensorMapError, match="uint64 map"):
        S.check_reduction("add", INT64)
    with pytest.raises(TensorMapError, match="faults on the H200"):
        S.check_reduction("xor", INT64)
    with pytest.raises(TensorMapError) as info:
        S.check_reduction("mul", UINT32)
    assert info.value.rule == "reduce_op"


@given(dt=store_dtypes, axis=st.integers(0, 2), steps=st.integers(1, 2**27))
def test_negative_store_coordinates_are_refused(dt, axis, steps):
    unit = 16 // dt.itemsize
    spec = TensorMapSpec.create(dt, (4, 4, 8 * unit), (2, 2, unit))
    coords = [0, 0, 0]
    coords[axis] = -steps * (unit if axis == 2 else 1)  # inner ones 16-byte aligned: only the sign is wrong
    with pytest.raises(TensorMapError) as info:
        S.check_store_coordinates(spec, coords)
    assert info.value.rule == "store_negative_coordinate" and info.value.parameter == f"coords[{axis}]"


@given(dt=st.sampled_from([d for d in S.STORE_DTYPES if d.itemsize < 16]), c=st.integers(0, 10_000))
def test_inner_coordinate_must_sit_on_a_16_byte_boundary(dt, c):
    spec = TensorMapSpec.create(dt, (4, 4096), (2, 16 // dt.itemsize))
    if c * dt.itemsize % 16:
        with pytest.raises(TensorMapError) as info:
            S.check_store_coordinates(spec, (0, c))
        assert info.value.rule == "coord_alignment"  # the same rule as for loads: both fault the context
    else:
        assert S.check_store_coordinates(spec, (1, c)) == (1, c)


def test_straddling_store_map_warns_with_its_own_category():
    spec = TensorMapSpec.create("float32", (4, 5), (4, 8), strides_bytes=(32, 4))
    with pytest.warns(StoreStraddleWarning, match="12 B after it"):
        S.check_store_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        S.check_store_spec(TensorMapSpec.create("float32", (4, 8), (4, 8)))


def test_store_spec_checks_the_map_rules_and_the_reduction():
    with pytest.raises(TensorMapError) as info:
        S.check_store_spec(TensorMapSpec.create("uint8", (4, 64), (2, 16)), "add")
    assert info.value.rule == "reduce_dtype"
    with pytest.raises(TensorMapError) as info:
        S.check_store_spec(TensorMapSpec.create("float32", (4, 64), (2, 3)))
    assert info.value.rule == "box_inner_bytes"
    with pytest.raises(TensorMapError) as info:
        S.check_store_spec(TensorMapSpec.create("uint8", (2, 4, 64), (1, 1, 32), interleave="16B"))
    assert info.value.rule == "store_interleave"


def test_bulk_store_rules():
    S.check_bulk_store(32, 16)
    for off, n, rule in ((8, 16, "bulk_alignment"), (0, 24, "bulk_size"), (0, 0, "bulk_size")):
        with pytest.raises(TensorMapError) as info:
            S.check_bulk_store(off, n)
        assert info.value.rule == rule


def test_case_smem_offset_must_be_128_aligned():
    case = S.StoreCase(TensorMapSpec.create("float32", (4, 8), (4, 8)), (0, 0), "store", 64)
    with pytest.raises(TensorMapError) as info:
        S.check_case(case)
    assert info.value.rule == "smem_alignment"


# ---------------------------------------------------------------------------------------------- the fuzz generator

@given(seed=seeds)
def test_random_cases_are_valid_and_respect_their_limits(seed):
    case = S.random_store_case(np.random.default_rng(seed))
    S.check_case(case)
    assert case.spec.smem_bytes <= 32768 and case.spec.extent_bytes <= 1 << 18
    if case.op != S.STORE:
        assert case.spec.shape[-1] * case.spec.itemsize % 16 == 0  # reduction straddles have their own test


def test_random_cases_cover_the_space():
    rng = np.random.default_rng(7)
    cases = [S.random_store_case(rng) for _ in range(600)]
    assert {c.spec.rank for c in cases} == {1, 2, 3, 4, 5}
    assert {int(c.spec.swizzle) for c in cases} == {0, 1, 2, 3}
    assert {c.op for c in cases} == {S.STORE, *S.REDUCE_OPS}
    assert {c.spec.dtype for c in cases} == set(S.STORE_DTYPES)
    counts = [S.store_targets(c.spec, c.coords).count for c in cases]
    full = [math.prod(c.spec.loaded_counts) for c in cases]
    assert sum(n == 0 for n in counts) > 20  # boxes entirely past an edge
    assert sum(0 < n < f for n, f in zip(counts, full)) > 100  # partly out of bounds
    assert sum(any(e > 1 for e in c.spec.element_strides) for c in cases) > 50
    assert sum(c.smem_offset > 0 for c in cases) > 50
    assert sum(c.spec.shape[-1] * c.spec.itemsize % 16 != 0 for c in cases) > 50


def test_fuzz_values_for_float_reductions_stay_ordinary():
    rng = np.random.default_rng(3)
    for dt in (FLOAT32, FLOAT16):
        a, b = S.random_values(dt, "add", 5000, rng), S.random_values(dt, "add", 5000, rng)
        r = S.reduce_values("add", dt, a, b).astype(np.float64)
        assert np.all(np.isfinite(r)) and np.all((r == 0) | (np.abs(r) >= np.finfo(dt.numpy).tiny))
    a, b = S.random_values(BFLOAT16, "add", 5000, rng), S.random_values(BFLOAT16, "add", 5000, rng)
    r = (S.reduce_values("add", BFLOAT16, a, b).astype(np.uint32) << 16).view(np.float32)
    assert np.all(np.isfinite(r)) and np.all((r == 0) | (np.abs(r) >= np.finfo(np.float32).tiny))
    inc_old, inc_src = S.random_values(UINT32, "inc", 2000, rng), S.random_values(UINT32, "inc", 2000, rng)
    assert 0.1 < np.mean(inc_old >= inc_src) < 0.9  # both branches of the wrap happen


# ---------------------------------------------------------------------------------------------- kernels

def test_store_probe_sass_shows_tensor_stores_reductions_and_the_fences():
    cubin = compiler.compile_cubin("tma/store_probe.cu")
    ops = sass.instructions(cubin, "store_probe")
    for rank in range(1, 6):
        assert f"UTMASTG.{rank}D" in ops
        for op in S.REDUCE_OPS:
            assert f"UTMAREDG.{rank}D.{op.upper()}" in ops
    assert "FENCE.VIEW.ASYNC.S" in ops  # fence.proxy.async.shared::cta
    assert "UTMACCTL.IV" in ops  # the tensormap acquire invalidates the descriptor cache
    assert sass.has_opcode(ops, "DEPBAR")  # bulk wait_group
    bulk = sass.instructions(cubin, "bulk_store_probe")
    assert "UBLKCP.G.S" in bulk and not sass.has_opcode(bulk, "UTMASTG")


def test_job_layouts_match_the_cuda_structs():
    compile_layout_check((compiler.cu_dir() / "tma/store_probe.cu").read_text(),
                         {"StoreJob": P.STORE_JOB_DTYPE, "BulkStoreJob": P.BULK_JOB_DTYPE}, "store_job_layout.cu")


def test_roundtrip_kernels_issue_tma_loads_and_stores():
    cubin = compiler.compile_cubin("tma/roundtrip_store.cu")
    tma = sass.instructions(cubin, "tma_roundtrip")
    assert "UTMALDG.2D" in tma and "UTMASTG.2D" in tma and "FENCE.VIEW.ASYNC.S" in tma
    plain = sass.instructions(cubin, "plain_roundtrip")
    assert not any(op.startswith(("UTMA", "UBLK")) for op in plain)


# ---- the batch runner's plumbing, with the GPU played by the oracle (no device)

class _FakeGpu:
    """Device buffers as NumPy arrays at fake addresses, maps that remember their spec and address, and a
    store_probe "kernel" that does what each job says: read the box from the uploaded image at the job's offset,
    store it where the job's map points."""

    def __init__(self, skip_case: int | None = None, stray: tuple = ()):
        self.buffers, self.allocations, self.maps, self.skip_case = {}, 0, [], skip_case
        self.digest_launches, self.downloads = 0, []  # (bytes) of each download
        self.stray = stray  # offsets into the batch's buffer the "kernel" also flips: stray writes
        gpu = self

        class Buffer:
            def __init__(self, nbytes):
                gpu.allocations += 1
                self.nbytes, self.ptr = int(nbytes), (1 << 32) * gpu.allocations  # apart: no two overlap
                self.data = np.full(self.nbytes, 0xEE, np.uint8)  # stale bytes, not zeros
                self.closed = False
                gpu.buffers[self.ptr] = self

            def upload(self, arr, offset=0):
                raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
                self.data[offset:offset + raw.size] = raw

            def download(self, dtype=np.uint8, shape=None, offset=0, into=None):
                n = int(np.prod(shape)) * np.dtype(dtype).itemsize
                gpu.downloads.append(n)
                got = self.data[offset:offset + n].view(dtype).reshape(shape)
                if into is None:
                    return got.copy()
                out = into.array(dtype, shape)
                out[...] = got
                return out

            def close(self):
                self.closed = True

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.close()

        self.Buffer = Buffer

    def encode(self, spec, address, validate=True):
        self.maps.append((spec, address))
        index = len(self.maps) - 1
        return mock.Mock(to_bytes=lambda: index.to_bytes(8, "little") + bytes(120))

    def module(self):
        gpu = self

        def launch(maps_buf, jobs_buf, img_buf, n, **kw):
            jobs = jobs_buf.data[:n * P.STORE_JOB_DTYPE.itemsize].view(P.STORE_JOB_DTYPE)
            for i in range(n):
                if i == gpu.skip_case:
                    continue
                spec, address = gpu.maps[int.from_bytes(maps_buf.data[128 * i:128 * i + 8].tobytes(), "little")]
                job = jobs[i]
                image = img_buf.data[job["image_offset"]:job["image_offset"] + job["image_bytes"]]
                box = S.box_from_smem(spec, image, int(job["smem_offset"]))
                coords = tuple(reversed([int(c) for c in job["coords"][:job["rank"]]]))  # TMA order -> NumPy
                op = next(name for name, code in P.OP_CODES.items() if code == job["op"])
                memory = next(b for b in gpu.buffers.values() if b.ptr <= address < b.ptr + b.nbytes)
                S.apply_store(memory.data, address - memory.ptr, spec, coords, box, op)
            if gpu.stray:
                _, address = gpu.maps[-n]  # case 0's tensor: the batch's buffer is the one around it
                memory = next(b for b in gpu.buffers.values() if b.ptr <= address < b.ptr + b.nbytes)
                memory.data[list(gpu.stray)] ^= 0xFF

        def digests(buf, bounds_buf, digests_buf, grid, block):  # the region_digests kernel, by the host's mirror
            gpu.digest_launches += 1
            bounds = bounds_buf.data[:8 * (grid + 1)].view(np.int64)
            regions = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
            digests_buf.data[:8 * grid] = P.region_digests(buf.data[:bounds[-1]], regions).view(np.uint8)

        return mock.Mock(kernel=lambda name: mock.Mock(launch=digests if name == "region_digests" else launch))


class _FakePinned:
    """Host scratch as poisoned NumPy memory, reused like the pinned scratch (a view of one block)."""

    def __init__(self):
        self.block = np.full(1 << 10, 0xCD, np.uint8)

    def array(self, dtype, shape):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if n > self.block.size:
            self.block = np.full(n, 0xCD, np.uint8)
        return self.block[:n].view(dtype).reshape(shape)

    def close(self):
        pass


@pytest.fixture
def fake_gpu(monkeypatch):
    def install(**kw):
        gpu = _FakeGpu(**kw)
        monkeypatch.setattr(P.driver, "DeviceBuffer", gpu.Buffer)
        monkeypatch.setattr(P, "encode_tiled", gpu.encode)
        monkeypatch.setattr(P, "_probe_module", gpu.module)
        monkeypatch.setattr("drvtma.runtime.host.PinnedScratch", _FakePinned)
        return gpu
    return install


def test_a_batch_in_scratch_buffers_reuses_them_and_matches_the_oracle(fake_gpu):
    """Batches through one ScratchBuffers allocate once (grow-only) and leave the buffers open; without it each
    batch frees its own. Every case matches, guards included, in both."""
    gpu = fake_gpu()
    rng = np.random.default_rng(3)
    batches = [[S.random_store_case(rng) for _ in range(12)] for _ in range(3)]
    scratch = P.driver.ScratchBuffers(minimum=1 << 22)  # large enough for every batch: allocated once
    for cases in batches:
        result = P.run_store_cases(cases, rng, scratch=scratch)
        assert not result.failures, result.report()
    assert gpu.allocations == 4 and not any(b.closed for b in gpu.buffers.values())
    scratch.close()
    result = P.run_store_cases(batches[0], rng)
    assert not result.failures, result.report()
    assert gpu.allocations == 8 and all(b.closed for b in gpu.buffers.values())


def test_a_case_the_gpu_leaves_undone_is_caught_in_scratch_buffers_too(fake_gpu):
    rng = np.random.default_rng(4)
    cases = [S.random_store_case(rng, ops=[S.STORE]) for _ in range(6)]
    undone = next(i for i, c in enumerate(cases) if S.store_targets(c.spec, c.coords).count)  # one that writes
    fake_gpu(skip_case=undone)
    with P.driver.ScratchBuffers() as scratch:
        result = P.run_store_cases(cases, rng, scratch=scratch)
    assert [c.case for c in result.failures] == [cases[undone]]


def test_each_case_owns_exactly_the_stray_bytes_of_its_own_region(fake_gpu):
    """The batch's buffer is compared in one pass, then split by region: a stray write on the first and on the last
    byte of every region (both guards) is reported by the case that owns it, and by no other."""
    cases = [S.random_store_case(np.random.default_rng(6), ops=[S.STORE]) for _ in range(5)]
    regions = P.plan_store_cases(cases, np.random.default_rng(7)).regions
    fake_gpu(stray=tuple(o for lo, hi in regions for o in (lo, hi - 1)))
    result = P.run_store_cases(cases, np.random.default_rng(7))
    assert [c.mismatched_bytes.tolist() for c in result.cases] == [[lo, hi - 1] for lo, hi in regions]


def _worker_plan(cases, seed: int):
    """A plan as an oracle worker sends it: the oracle's answer as region digests, not the buffer."""
    plan = P.store_oracle(P.plan_store_cases(cases, np.random.default_rng(seed)))
    plan.digests, plan.expected = P.region_digests(plan.expected, plan.regions), None
    return plan


def test_region_digests_are_each_regions_image_digest_and_want_a_tiling():
    from drvtma.tma.tiled.oracle import image_digests

    buffer = np.random.default_rng(2).integers(0, 256, 4096, np.uint8)
    regions = [(0, 1024), (1024, 1032), (1032, 4096)]
    assert P.region_digests(buffer, regions).tolist() == [int(image_digests(buffer[lo:hi][None])[0])
                                                          for lo, hi in regions]
    assert P.region_digests(buffer, []).size == 0
    for bad in ([(0, 1024), (1032, 4096)], [(0, 1020), (1020, 4096)], [(8, 4096)], [(0, 2048)]):
        with pytest.raises(ValueError, match="tile the buffer"):
            P.region_digests(buffer, bad)


def test_digests_from_a_worker_leave_the_buffer_on_the_gpu_unless_a_region_differs(fake_gpu):
    """Equal digests: every case passes and only the digests come back. A stray write: the buffer comes back and
    its bytes are named as without digests. A wrong digest over equal bytes: that case fails, naming drvtma."""
    cases = [S.random_store_case(np.random.default_rng(9), ops=[S.STORE]) for _ in range(6)]
    gpu = fake_gpu()
    result = P.run_store_plan(_worker_plan(cases, 10))
    assert not result.failures and result.expected is None and gpu.digest_launches == 1
    assert gpu.downloads == [8 * len(cases)]  # the digests alone
    regions = P.plan_store_cases(cases, np.random.default_rng(10)).regions
    fake_gpu(stray=(regions[2][0], regions[4][1] - 1))
    result = P.run_store_plan(_worker_plan(cases, 10))
    assert [c.mismatched_bytes.tolist() for c in result.failures] == [[regions[2][0]], [regions[4][1] - 1]]
    fake_gpu()
    plan = _worker_plan(cases, 10)
    plan.digests[3] ^= np.uint64(1)
    result = P.run_store_plan(plan)
    (failed,) = result.failures
    assert failed.case is cases[3] and "a drvtma bug" in failed.digest_disagreement
    assert "region_digests" in result.report()


@pytest.mark.parametrize("size", [4096, 4099])  # a whole number of 8-byte words, and not
def test_the_batch_compare_finds_every_differing_byte_eight_at_a_time(size):
    rng = np.random.default_rng(8)
    expected = rng.integers(0, 256, size, np.uint8)
    assert P.differing_bytes(expected, expected.copy()).size == 0
    for _ in range(300):
        got = expected.copy()
        where = rng.choice(size, int(rng.integers(1, 7)), replace=False)
        got[where] ^= rng.integers(1, 256, where.size).astype(np.uint8)
        assert P.differing_bytes(expected, got).tolist() == sorted(where.tolist())


def test_an_initial_tensor_longer_than_the_tensor_is_refused_by_name(fake_gpu):
    from drvtma.errors import ArgumentError

    fake_gpu()
    rng = np.random.default_rng(5)
    case = S.random_store_case(rng, ops=[S.STORE])
    with pytest.raises(ArgumentError, match=r"store_initial.*initial\[0\]"):
        P.run_store_cases([case], rng, initial=[np.zeros(case.spec.extent_bytes + 5000, np.uint8)])


def test_a_batch_times_each_of_its_parts_and_a_slow_download_bounds_the_campaign(fake_gpu, monkeypatch):
    """Every part of `run_store_cases` is timed on its own, so `bound_by` can name it: with the download made
    slow (a GPU that takes 30 ms a batch), the stores session's timing says the device wait bounds it."""
    import time
    from collections import Counter

    from drvtma.fuzz.campaign import bound_by
    from drvtma.fuzz.stores import STORES, StoresSession
    from drvtma.testing.strategies import RngChooser

    gpu = fake_gpu()
    fast_download = gpu.Buffer.download

    def slow_download(self, *args, **kwargs):
        time.sleep(0.03)
        return fast_download(self, *args, **kwargs)

    monkeypatch.setattr(gpu.Buffer, "download", slow_download)
    timing: Counter = Counter()
    rng = np.random.default_rng(5)
    result = P.run_store_cases([S.random_store_case(rng) for _ in range(6)], rng, timing=timing)
    assert not result.failures and set(timing) == set(P.STORE_PHASES)
    assert all(timing[p] > 0 for p in P.STORE_PHASES) and timing["device wait+download"] >= 0.03
    options = STORES.configure()
    session = StoresSession(options)
    cases = [STORES.build(RngChooser(np.random.default_rng(i)), options) for i in range(3)]
    for _ in range(3):
        assert all(o.ok for o in session.check(cases))
    assert bound_by(dict(session.timing)).startswith("device wait+download")
    session.close()


@given(st.lists(st.one_of(st.integers(-(1 << 32), 1 << 32), st.integers(-40, 40), st.booleans()), min_size=1,
                max_size=4),
       st.sampled_from(["float16", "uint8", "float64"]))
def test_plain_coordinates_take_the_same_path_as_the_numpy_check(coords, dtype):
    """The store check's fast path answers exactly as check_load_coordinates does: the same coordinates back, or
    the same rule."""
    from drvtma.tma.stores.rules import check_store_coordinates
    from drvtma.tma.tiled.oracle import check_load_coordinates

    spec = TensorMapSpec.create(dtype, (64, 64, 64), box=(8, 8, 16))

    def outcome(check):
        try:
            return check()
        except TensorMapError as exc:
            return exc.rule

    def reference():
        got = tuple(int(c) for c in check_load_coordinates(spec, [tuple(coords)])[0])
        if any(c < 0 for c in got):
            raise TensorMapError("store_negative_coordinate", "coords", got, "-")
        return got

    assert outcome(lambda: check_store_coordinates(spec, coords)) == outcome(reference)


def test_a_stores_campaign_with_oracle_workers_compares_the_gpus_region_digests(fake_gpu):
    """End to end on the fake GPU: the workers send region digests, the session launches the digest kernel after
    each batch and downloads a buffer only where a digest differs; the verdicts are one process's, byte for byte."""
    from drvtma.fuzz.campaign import run_campaign
    from drvtma.fuzz.stores import STORES

    options = STORES.configure()
    for skip in (None, 3):  # a GPU that does every case, and one that leaves each batch's fourth undone
        gpu = fake_gpu(skip_case=skip)
        alone = run_campaign(STORES, options, seed=4, examples=500, shrink=False)
        assert gpu.digest_launches == 0
        pooled = run_campaign(STORES, options, seed=4, examples=500, shrink=False, oracle_workers=2)
        assert gpu.digest_launches == 2  # one a batch of 250
        assert [f.index for f in pooled.failures] == [f.index for f in alone.failures]
        assert [f.outcome.differences for f in pooled.failures] == [f.outcome.differences for f in alone.failures]
        assert (pooled.mismatches > 0) == (skip is not None)
