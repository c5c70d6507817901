"""CPU side of the B-08 modes: kernels compile and use the right copy instructions, the checksum reference and its
comparison catch wrong bytes, and configurations and inputs are guarded (sweeps: test_sweep_cpu.py; the ring
model: test_ring_cpu.py)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from drvtma.b08.floors import FloorRow, FloorsResult, check_probe_sums, ring_label
from drvtma.b08.modes import FAULTS_BY_MODE, MODES, ModeConfig, check_alignment, check_problem_size, tiles_x_for
from drvtma.b08.sweep import preset
from drvtma.b08.verify import (
    SUMS_POISON,
    ChecksumMismatch,
    Reference,
    TileInput,
    burn_fma,
    check_same_total,
    check_tile_sums,
    fma_f32,
    make_input,
    reference_sums,
)
from drvtma.cli.bench import config_from_args, floors_parser
from drvtma.errors import DrvtmaError, LaunchError
from drvtma.runtime import compiler, sass

# ------------------------------------------------------------------------------------------ kernels and SASS

@pytest.fixture(scope="module")
def modes_cubin():
    return compiler.compile_cubin("b08/b08_modes.cu", defines={"B08_THREADS": 256})


@pytest.fixture(scope="module")
def rings_cubin():
    return compiler.compile_cubin("b08/pipelines.cu", defines={"B08_THREADS": 256})


COPY_OPS = ("UBLKCP", "UTMALDG")


@pytest.mark.parametrize("kernel,want", [("b08_bulk1d", "UBLKCP"), ("b08_pipe2", "UBLKCP"),
                                         ("b08_tensor2d", "UTMALDG")])
def test_tma_modes_use_their_copy_instruction(modes_cubin, kernel, want):
    ops = sass.instructions(modes_cubin, kernel)
    assert sass.has_opcode(ops, want), f"{kernel} has no {want}: {sorted(ops)}"
    other = [op for op in COPY_OPS if op != want and sass.has_opcode(ops, op)]
    assert not other, f"{kernel} also uses {other}"
    assert sass.has_opcode(ops, "SYNCS.PHASECHK.TRANS64.TRYWAIT")


def test_tensor2d_issues_a_2d_tensor_load(modes_cubin):
    assert "UTMALDG.2D" in sass.instructions(modes_cubin, "b08_tensor2d")


def test_sync_uses_ordinary_loads_only(modes_cubin):
    ops = sass.instructions(modes_cubin, "b08_sync")
    assert not any(sass.has_opcode(ops, op) for op in COPY_OPS), sorted(ops)
    assert not any(op.startswith("SYNCS") for op in ops), "sync must not touch an mbarrier"
    assert any(op.startswith("LDG") for op in ops)


@pytest.mark.parametrize("kernel", ["pipe_ring", "ws_ring"])
def test_ring_kernels_use_bulk_copies(rings_cubin, kernel):
    ops = sass.instructions(rings_cubin, kernel)
    assert sass.has_opcode(ops, "UBLKCP")
    assert not sass.has_opcode(ops, "UTMALDG")


def test_roof_read_kernel_uses_16_byte_loads():
    ops = sass.instructions(compiler.compile_cubin("b08/roof.cu"), "roof_read_vec4")
    assert any(op.startswith("LDG") and ".128" in op for op in ops), sorted(ops)


@pytest.mark.parametrize("threads", [32, *(pytest.param(t, marks=pytest.mark.slow) for t in (96, 512, 992))])
def test_kernels_compile_for_other_block_sizes(threads):
    for source in ("b08/b08_modes.cu", "b08/pipelines.cu"):
        assert compiler.compile_cubin(source, defines={"B08_THREADS": threads})


@pytest.mark.parametrize("threads", [256, *(pytest.param(t, marks=pytest.mark.slow) for t in (32, 512))])
def test_ring_kernels_compile_with_warp_owned_tiles(threads):
    cfg = ModeConfig("ws", threads=threads, split="warp")
    assert cfg.defines()["B08_WARP_TILES"] == 1
    funcs = sass.functions(compiler.compile_cubin("b08/pipelines.cu", defines=cfg.defines()))
    for kernel in ("pipe_ring", "ws_ring"):
        assert "UBLKCP.S.G" in funcs[kernel]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["pipeN", "ws"])
@pytest.mark.parametrize("split", ["thread", "warp"])
def test_ring_halves_keep_only_their_half(mode, split):
    """The floors probes: copies without the consumers' arithmetic, arithmetic without copies."""
    full = ModeConfig(mode, split=split)
    kernel = full.spec.kernel
    ops = {part: sass.instructions(compiler.compile_cubin("b08/pipelines.cu", defines=full.with_(part=part).defines()),
                                   kernel) for part in ("full", "copy_only", "compute_only")}
    assert sass.has_opcode(ops["full"], "UBLKCP") and sass.has_opcode(ops["full"], "FFMA")
    assert sass.has_opcode(ops["copy_only"], "UBLKCP") and not sass.has_opcode(ops["copy_only"], "FFMA")
    assert not sass.has_opcode(ops["copy_only"], "LDS")  # consumers never read the ring
    assert not sass.has_opcode(ops["compute_only"], "UBLKCP") and sass.has_opcode(ops["compute_only"], "FFMA")
    for part in ("copy_only", "compute_only"):  # every wait stays bounded
        assert sass.has_opcode(ops[part], "SYNCS.PHASECHK.TRANS64.TRYWAIT")


def test_ring_parts_are_checked():
    assert ModeConfig("ws", part="copy_only").defines()["DRVTMA_RING_PART"] == 1
    assert "DRVTMA_RING_PART" not in ModeConfig("ws").defines()
    assert "compute only" in ModeConfig("pipeN", part="compute_only").describe()
    with pytest.raises(LaunchError, match="part must be one of"):
        ModeConfig("ws", part="half")
    with pytest.raises(LaunchError, match="splits a working ring"):
        ModeConfig("sync", part="copy_only")
    with pytest.raises(LaunchError, match="splits a working ring"):
        ModeConfig("ws", part="copy_only", fault="expect_tx_low")


def test_probe_sums_must_show_what_the_half_did():
    poisoned = np.full((4, 1, 2), SUMS_POISON, np.uint32)
    written = np.arange(8, dtype=np.uint32).reshape(4, 1, 2)
    copy_only, compute_only = ModeConfig("ws", part="copy_only"), ModeConfig("ws", part="compute_only")
    check_probe_sums(copy_only, poisoned)
    check_probe_sums(compute_only, written)
    with pytest.raises(DrvtmaError, match="must compute nothing"):
        check_probe_sums(copy_only, written)
    half = written.copy()
    half[2] = SUMS_POISON
    with pytest.raises(DrvtmaError, match="1 checksum pair"):
        check_probe_sums(compute_only, half)


def test_floor_rows_name_the_bound():
    row = FloorRow("ws", 1, 0.0028, 0.0064, 0.0147, 0.0155, 0.0287)
    assert row.bound_ms == 0.0147 and row.limit == "compute"
    assert row.best_speedup == pytest.approx(0.0287 / 0.0147) and row.speedup == pytest.approx(0.0287 / 0.0155)
    result = FloorsResult("H200", preset("article"), [row])
    assert "compute" in result.text() and "14.70" in result.text()
    assert result.csv_text().splitlines()[1].startswith("ws,1,0.002800,0.006400,0.014700")


def test_floors_cli_takes_the_sweep_options():
    args = floors_parser().parse_args(["--stages", "2", "--tiles-per-stage", "16", "--split", "warp",
                                       "--ring-threads", "512"])
    cfg = config_from_args(args)
    rings = [m for m in cfg.modes if m.spec.ring]
    assert rings and all((m.stages, m.tiles_per_stage, m.split, m.threads) == (2, 16, "warp", 512) for m in rings)
    assert all(m.threads == 256 for m in cfg.modes if not m.spec.ring)
    assert ring_label(rings[0]) == "pipeN 2x16 warp, 512 thr, 64 tiles/block"
    assert not hasattr(args, "flush_l2") and cfg.flush_l2 is False


@pytest.mark.slow
@pytest.mark.parametrize("mode,fault", [(m, f) for m, fs in FAULTS_BY_MODE.items() for f in fs])
def test_broken_variants_compile_and_differ(mode, fault, rings_cubin):
    cfg = ModeConfig(mode, fault=fault, wait_timeout_ns=50_000_000)
    cubin = compiler.compile_cubin(cfg.spec.source, defines=cfg.defines())
    kernel = cfg.spec.kernel
    assert sass.functions(cubin)[kernel] != sass.functions(rings_cubin)[kernel]


# ------------------------------------------------------------------------------------------ exact fma

def _exact_fma_f32(a, b, c) -> np.float32:
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    r = np.float32(float(exact))
    cands = [r, np.nextafter(r, np.float32(np.inf)), np.nextafter(r, np.float32(-np.inf))]
    # nearest, ties to the even significand
    return min(cands, key=lambda x: (abs(Fraction(float(x)) - exact), int(np.float32(x).view(np.uint32)) & 1))


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-(2.0**60), max_value=2.0**60)


@given(finite32, finite32, finite32)
def test_fma_f32_rounds_once(a, b, c):
    got = fma_f32(np.float32(a), np.float32(b), np.float32(c))
    want = _exact_fma_f32(np.float32(a), np.float32(b), np.float32(c))
    assert np.float32(got).view(np.uint32) == np.float32(want).view(np.uint32) or (got == 0 and want == 0)


def test_fma_f32_avoids_double_rounding():
    a = np.float32(2**-12 * (1 + 2**-23))
    b = np.float32(2**-12 * (1 - 2**-23))
    c = np.float32(1 + 2**-23)
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive != np.float32(1 + 2**-23)  # the case is real: rounding twice goes wrong here
    assert fma_f32(a, b, c) == np.float32(1 + 2**-23)


def test_burn_fma_matches_its_definition():
    x = np.array([0.5, -0.25, 0.9], dtype=np.float32)
    assert np.all(burn_fma(x, 0) == 0)
    assert np.all(burn_fma(x, 1) == 1)
    assert np.array_equal(burn_fma(x, 2), (x + 1).astype(np.float32))
    assert np.array_equal(burn_fma(x, 3), fma_f32(x, (x + 1).astype(np.float32), np.ones(3, np.float32)))


# ------------------------------------------------------------------------------------------ checksums

def emulate_kernel(inp: TileInput, threads: int, fma_iters: int, tiling: str = "linear", tiles_x: int | None = None,
                   split: str = "thread") -> np.ndarray:
    """What a correct kernel writes: sums[tile, slot, 2]; with the thread split each warp sums its own elements
    (element idx belongs to thread idx % threads), with the warp split one slot holds the whole tile."""
    data = inp.data
    num_tiles = data.size // 1024
    if tiling == "linear":
        tiles = data.reshape(num_tiles, 1024)
        gidx = np.arange(data.size, dtype=np.uint32).reshape(num_tiles, 1024)
    else:
        width = tiles_x * 32
        view = data.reshape(-1, 32, tiles_x, 32).transpose(0, 2, 1, 3)
        tiles = view.reshape(num_tiles, 1024)
        gi = np.arange(data.size, dtype=np.uint32).reshape(-1, 32, tiles_x, 32).transpose(0, 2, 1, 3)
        gidx = gi.reshape(num_tiles, 1024)
        assert width * (data.size // width) == data.size
    bits = tiles.view(np.uint32)
    result = burn_fma(tiles, fma_iters).view(np.uint32)
    with np.errstate(over="ignore"):
        in_terms = (bits ^ (gidx * np.uint32(0x9E3779B9))) * np.uint32(0x85EBCA6B)
        out_terms = (result ^ (gidx * np.uint32(0x7FEB352D))) * np.uint32(0x846CA68B)
    warps = 1 if split == "warp" else threads // 32
    warp_of = np.zeros(1024, int) if split == "warp" else (np.arange(1024) % threads) // 32
    raw = np.zeros((num_tiles, warps, 2), dtype=np.uint32)
    for w in range(warps):
        sel = warp_of == w
        raw[:, w, 0] = in_terms[:, sel].sum(axis=1, dtype=np.uint32)
        raw[:, w, 1] = out_terms[:, sel].sum(axis=1, dtype=np.uint32)
    return raw


@pytest.fixture(scope="module")
def small_input():
    return make_input(32 * 1024, seed=3, pool_size=4096)


@pytest.mark.parametrize("threads", [32, 96, 256, 1024])
@pytest.mark.parametrize("tiling", ["linear", "box"])
def test_reference_matches_an_emulated_kernel(small_input, threads, tiling):
    tiles_x = tiles_x_for(32) if tiling == "box" else None
    exp_in, exp_out = Reference(small_input).sums(5, tiling=tiling, tiles_x=tiles_x)
    raw = emulate_kernel(small_input, threads, 5, tiling, tiles_x)
    check_tile_sums("emulated", raw, exp_in, exp_out, fma_iters=5)


def test_warp_owned_tiles_fold_to_the_same_sums(small_input):
    exp_in, exp_out = Reference(small_input).sums(4)
    raw = emulate_kernel(small_input, 256, 4, split="warp")
    assert raw.shape[1] == 1 == ModeConfig("ws", split="warp").sum_slots
    check_tile_sums("ws", raw, exp_in, exp_out)


def test_reference_from_a_plain_array_equals_the_pooled_one(small_input):
    a = reference_sums(small_input, [0, 7])
    b = reference_sums(TileInput.from_array(small_input.data.copy()), [0, 7])
    assert np.array_equal(a[0], b[0]) and all(np.array_equal(a[1][k], b[1][k]) for k in (0, 7))


def test_every_tiling_has_the_same_total(small_input):
    lin = reference_sums(small_input, [1])[0]
    box = reference_sums(small_input, [1], tiling="box", tiles_x=8)[0]
    assert not np.array_equal(lin, box)  # different tiles...
    assert lin.sum(dtype=np.uint32) == box.sum(dtype=np.uint32)  # ...same bytes
    check_same_total({"sync": emulate_kernel(small_input, 256, 1),
                      "tensor2d": emulate_kernel(small_input, 256, 1, "box", 8)})


def _expected(inp, fma=2):
    return Reference(inp).sums(fma)


def test_a_flipped_bit_names_mode_tile_expected_and_got(small_input):
    raw = emulate_kernel(small_input, 256, 2)
    raw[17, 3, 0] ^= 1 << 9
    with pytest.raises(ChecksumMismatch) as exc:
        check_tile_sums("bulk1d", raw, *_expected(small_input), fma_iters=2)
    text = str(exc.value)
    assert text.startswith("bulk1d:") and "tile 17" in text and "expected 0x" in text and "got 0x" in text
    assert exc.value.tiles == [17]


def test_wrong_bytes_are_caught(small_input):
    exp = _expected(small_input)
    # the data a kernel would have consumed had it read one tile too far
    shifted = TileInput.from_array(np.roll(small_input.data, -1024))
    with pytest.raises(ChecksumMismatch, match="wrong input bytes"):
        check_tile_sums("pipe2", emulate_kernel(shifted, 256, 2), *exp)
    # two elements swapped inside one tile: same bytes, wrong places
    swapped = small_input.data.copy()
    swapped[[5 * 1024 + 3, 5 * 1024 + 700]] = swapped[[5 * 1024 + 700, 5 * 1024 + 3]]
    with pytest.raises(ChecksumMismatch) as exc:
        check_tile_sums("tensor2d", emulate_kernel(TileInput.from_array(swapped), 256, 2), *exp)
    assert exc.value.tiles == [5]


def test_wrong_fma_results_are_caught(small_input):
    exp_in, exp_out = Reference(small_input).sums(3)
    with pytest.raises(ChecksumMismatch, match="wrong FMA results"):
        check_tile_sums("ws", emulate_kernel(small_input, 128, 2), exp_in, exp_out, fma_iters=3)


def test_an_unwritten_tile_keeps_the_poison_and_is_named(small_input):
    raw = emulate_kernel(small_input, 256, 2)
    raw[31, 6, :] = SUMS_POISON
    with pytest.raises(ChecksumMismatch, match=r"tile 31: .*warp\(s\) \[6\] never wrote this tile"):
        check_tile_sums("sync", raw, *_expected(small_input))


def test_disagreeing_totals_are_caught(small_input):
    good = emulate_kernel(small_input, 256, 1)
    bad = good.copy()
    bad[0, 0, 0] += np.uint32(1)
    with pytest.raises(ChecksumMismatch, match="disagree on the total"):
        check_same_total({"sync": good, "bulk1d": bad})


def test_make_input_has_no_zeros_and_stays_finite():
    inp = make_input(4096, seed=9)
    assert np.all(inp.data != 0) and np.all(np.abs(inp.data) < 1)
    assert np.all(np.isfinite(burn_fma(inp.pool[:64], 256)))
    assert np.array_equal(inp.pool[inp.codes], inp.data)


# ------------------------------------------------------------------------------------------ guards

def test_n_must_be_whole_tiles():
    assert check_problem_size(4096) == 4
    with pytest.raises(LaunchError, match=r"not a multiple of the 1024-element tile.*pass 4096 or 5120"):
        check_problem_size(4096 + 100)
    with pytest.raises(LaunchError):
        check_problem_size(0)


@pytest.mark.parametrize("mode", ["bulk1d", "pipe2", "pipeN", "ws", "tensor2d"])
def test_tma_modes_refuse_addresses_off_16_bytes(mode):
    check_alignment(mode, 0x7F0000000000)
    for off in (4, 8, 12):
        with pytest.raises(LaunchError, match="16-byte|multiple of 16"):
            check_alignment(mode, 0x7F0000000000 + off)


def test_sync_needs_only_4_byte_alignment():
    check_alignment("sync", 0x7F0000000004)
    with pytest.raises(LaunchError):
        check_alignment("sync", 0x7F0000000002)


def test_mode_config_checks():
    assert ModeConfig("pipe2").stages == 2 and ModeConfig("sync").stages == 1
    assert ModeConfig("ws").block_threads == 288 and ModeConfig("ws", stages=3, tiles_per_stage=2).smem_bytes == 24576
    with pytest.raises(LaunchError, match="only pipeN and ws"):
        ModeConfig("pipe2", stages=3)
    with pytest.raises(LaunchError, match="shared memory"):
        ModeConfig("ws", stages=16, tiles_per_stage=4)
    with pytest.raises(LaunchError, match="multiple of 32"):
        ModeConfig("sync", threads=100)
    with pytest.raises(LaunchError, match="exceed 1024"):
        ModeConfig("ws", threads=1024)
    with pytest.raises(LaunchError, match="no fault"):
        ModeConfig("bulk1d", fault="expect_tx_low")
    with pytest.raises(LaunchError, match="no fault"):
        ModeConfig("pipeN", fault="wrong_parity")
    with pytest.raises(LaunchError, match="unknown mode"):
        ModeConfig("pipe3")
    with pytest.raises(LaunchError, match="only pipeN and ws take split"):
        ModeConfig("pipe2", split="warp")
    assert ModeConfig("pipeN", threads=128).sum_slots == 4 and ModeConfig("pipeN", split="warp").sum_slots == 1


def test_tiles_x_follows_the_article():
    assert tiles_x_for(4096) == 64  # 2048 x 2048
    assert tiles_x_for(262144) == 512
    assert tiles_x_for(6) == 2 and tiles_x_for(7) == 1


def test_every_mode_is_described():
    for name, m in MODES.items():
        assert m.name == name and m.summary and m.tiling in ("linear", "box")
