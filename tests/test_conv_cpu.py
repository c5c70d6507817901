"""The implicit-GEMM convolution on the CPU: each A load's im2col image equals the tiled image of the explicit im2col
matrix (both oracles), a wrong coordinate is caught, the references agree with direct loops, the kernel holds the
im2col TMA load, and every shape the map cannot express is refused by a named rule."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import drvtma.gemm.conv as conv
from drvtma.errors import GemmError
from drvtma.gemm.config import KERNEL_NAME, KERNEL_SOURCE, SMEM_LIMIT, GemmConfig
from drvtma.gemm.conv import ConvShape, a_images_match, reference_conv

CFG = GemmConfig()
SHAPES = [
    ConvShape(n=2, h=9, w=11, c=64, k=128, r=3, s=3, pad=1),             # 198 pixels: two tiles, the last ragged
    ConvShape(n=3, h=7, w=7, c=128, k=64, r=3, s=3, pad=1, stride=2),    # stride 2, two channel blocks per tap
    ConvShape(n=2, h=6, w=6, c=64, k=64, r=1, s=1),                      # 1x1
    ConvShape(n=1, h=12, w=12, c=64, k=64, r=3, s=3, dilation=2),        # no padding, dilated
    ConvShape(n=5, h=5, w=3, c=64, k=64, r=3, s=1, pad=1),               # a tile spans images; R != S
]


def _x(shape: ConvShape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-3, 4, (shape.n, shape.h, shape.w, shape.c)).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.describe())
def test_each_im2col_load_writes_the_tiled_image_of_the_im2col_matrix(shape):
    assert a_images_match(shape, CFG, _x(shape)) == []


def test_a_wrong_filter_tap_or_pixel_is_caught(monkeypatch):
    shape = SHAPES[0]
    right = ConvShape.load_coordinates
    monkeypatch.setattr(ConvShape, "load_coordinates",
                        lambda self, c, tm, kb: (right(self, c, tm, kb)[0], right(self, c, tm, kb)[1][::-1]))
    assert len(a_images_match(shape, CFG, _x(shape))) == 12  # taps with r != s: 6 of 9, in both tile rows
    monkeypatch.setattr(ConvShape, "load_coordinates", lambda self, c, tm, kb: (
        (lambda co: ((co[0][0], co[0][1], co[0][2] + 1, co[0][3]), co[1]))(right(self, c, tm, kb))))
    assert len(a_images_match(shape, CFG, _x(shape), tiles=[0])) == 9


def _direct(x, w, shape: ConvShape) -> np.ndarray:
    xf, wf = x.astype(np.float64), w.astype(np.float64)
    y = np.zeros((shape.n, shape.p, shape.q, shape.k))
    for p in range(shape.p):
        for q in range(shape.q):
            for r in range(shape.r):
                for s in range(shape.s):
                    h = p * shape.stride - shape.pad + r * shape.dilation
                    v = q * shape.stride - shape.pad + s * shape.dilation
                    if 0 <= h < shape.h and 0 <= v < shape.w:
                        y[:, p, q] += xf[:, h, v] @ wf[:, r, s].T
    return y


@pytest.mark.parametrize("shape", SHAPES[1:4], ids=lambda s: s.describe())
def test_reference_matches_direct_loops(shape):
    rng = np.random.default_rng(1)
    x = _x(shape)
    w = rng.integers(-3, 4, (shape.k, shape.r, shape.s, shape.c)).astype(ml_dtypes.bfloat16)
    got = reference_conv(x, w, shape, out_dtype="float32")
    np.testing.assert_array_equal(got, _direct(x, w, shape).astype(np.float32))


def test_the_conv_build_issues_im2col_loads_and_the_gemm_build_does_not():
    from drvtma.runtime.compiler import compile_cubin
    from drvtma.runtime.sass import instructions

    shape = ConvShape(n=32, h=56, w=56, c=64, k=64, r=3, s=3, pad=1)
    ops = set(instructions(compile_cubin(KERNEL_SOURCE, defines={**CFG.defines(), **shape.defines(CFG)}),
                           KERNEL_NAME))
    assert "UTMALDG.4D.IM2COL" in ops and "UTMALDG.2D" in ops  # A through im2col, B tiled
    plain = set(instructions(compile_cubin(KERNEL_SOURCE, defines=CFG.defines()), KERNEL_NAME))
    assert not any("IM2COL" in op for op in plain)


def test_evict_b_hints_the_filter_loads_and_the_im2col_loads_stay_plain():
    """ConvShape.check refuses evict_a (its im2col loads take no hint) and lets evict_b through: the SASS of that
    build carries the policy (desc[URn]) on every tiled filter load and on no im2col load."""
    from drvtma.runtime.compiler import compile_cubin
    from drvtma.runtime.sass import disassemble

    shape = ConvShape(n=32, h=56, w=56, c=64, k=64, r=3, s=3, pad=1)
    cfg = CFG.with_(evict_b="first")
    shape.check(cfg)
    loads = [line for line in disassemble(compile_cubin(KERNEL_SOURCE, defines={**cfg.defines(), **shape.defines(cfg)}))
             .splitlines() if "UTMALDG" in line]
    filters, im2col = [ln for ln in loads if "UTMALDG.2D" in ln], [ln for ln in loads if "IM2COL" in ln]
    assert filters and im2col and len(filters) + len(im2col) == len(loads)
    assert all("desc[" in ln for ln in filters) and not any("desc[" in ln for ln in im2col)


def test_output_size_and_gemm_extents():
    s = ConvShape(n=32, h=28, w=28, c=128, k=128, r=3, s=3, pad=1, stride=2)
    assert (s.p, s.q) == (14, 14) and s.gemm_mnk == (32 * 14 * 14, 128, 1152)
    assert s.flops == 2 * 32 * 14 * 14 * 128 * 1152


@pytest.mark.parametrize("change, config, rule", [
    (dict(c=48), CFG, "conv_channels"),
    (dict(), CFG.with_(dtype="float8_e4m3fn"), "conv_dtype"),
    (dict(), CFG.with_(cluster_m=2), "conv_config"),
    (dict(), CFG.with_(swap_ab=True, bn=64), "conv_config"),
    (dict(), CFG.with_(evict_a="first"), "conv_config"),
    (dict(stride=9), CFG, "conv_stride"),
    (dict(pad=200), CFG, "conv_corners"),
    (dict(dilation=200, h=500, w=500), CFG, "conv_offsets"),
    (dict(r=9, h=4), CFG, "conv_shape"),
    (dict(k=60), CFG, "n_alignment"),
])
def test_what_the_map_cannot_express_is_refused_by_name(change, config, rule):
    fields = dict(n=2, h=8, w=8, c=64, k=64, r=3, s=3, pad=1) | change
    with pytest.raises(GemmError) as e:
        ConvShape(**fields).check(config)
    assert e.value.rule == rule and e.value.fix


@pytest.mark.parametrize("k, tile", [(32, (256, 64)), (64, (256, 64)), (96, (128, 128)), (128, (128, 128)),
                                     (256, (64, 256)), (512, (64, 256))])
def test_the_default_configuration_covers_the_output_channels_with_the_narrowest_tile(k, tile):
    """Ping-pong, one wgmma group in flight, the narrowest N covering K (128 accumulators a thread), the deepest ring
    that fits; and the shape takes it (a_images_match: its A loads are the im2col matrix's tiles)."""
    shape = ConvShape(n=2, h=6, w=7, c=64, k=k, r=3, s=3, pad=1)
    cfg = shape.default_config()
    assert (cfg.bm, cfg.bn) == tile and cfg.pingpong and cfg.inflight == 1 and cfg.check() is cfg
    assert cfg.stages == 8 or cfg.with_(stages=cfg.stages + 1).smem_bytes > SMEM_LIMIT  # the deepest that fits
    assert shape.check(cfg) is shape
    x = np.random.default_rng(k).integers(-3, 4, (2, 6, 7, 64)).astype(np.float32).astype(ml_dtypes.bfloat16)
    assert a_images_match(shape, cfg, x) == []


@pytest.mark.parametrize("bad", [dict(pad=-1), dict(n=0), dict(stride="2"), dict(r=1.5)])
def test_bad_shape_fields_name_themselves(bad):
    with pytest.raises(GemmError) as e:
        ConvShape(**(dict(n=2, h=8, w=8, c=64, k=64, r=3, s=3) | bad))
    assert e.value.rule == "conv_shape" and next(iter(bad)) in str(e.value)


def test_conv2d_refuses_operands_of_another_shape_before_the_gpu():
    c = conv.Conv2d(SHAPES[2])
    x = np.zeros((2, 6, 6, 64), ml_dtypes.bfloat16)
    with pytest.raises(GemmError) as e:
        c(x, np.zeros((64, 1, 1, 32), ml_dtypes.bfloat16))
    assert e.value.rule == "conv_operands"
