"""A forward 2D convolution as an implicit GEMM on the GEMM kernel (cu/gemm/gemm_ws.cu built with GEMM_CONV=1).

NHWC activations x [N, H, W, C] reach shared memory through one im2col tensor map: the load of tile row m0 and
k-block kb brings BM output pixels from (n, p, q) = m0 on, each the C-channel slice c0 .. c0 + BK of filter tap
(r, s), where kb = (r * S + s) * C / BK + c0 / BK. The map's bounding box is the convolution's (corners lower = -pad,
upper = pad - (R - 1) x dilation, per spatial axis), its traversal strides are the convolution's stride, so the load
walks the output pixels in order and fills the padding with zeros. The filter w [K, R, S, C] is the plain operand
B [K, R*S*C]; the output y [N, P, Q, K] is C [N*P*Q, K]. `a_images_match` proves on the CPU, with drvtma's two
oracles, that each such im2col load writes the very bytes a tiled load of the explicit im2col matrix would, so the
consumers and their wgmma descriptors are the GEMM's own.

    conv = Conv2d(ConvShape(n=32, h=56, w=56, c=64, k=64, r=3, s=3, pad=1))
    y = conv(x, w)                                  # NumPy NHWC / KRSC in, NHWC out (poisoned first, checked)
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..errors import GemmError, as_int, broken_rules
from ..tma.im2col import oracle as im2col_oracle
from ..tma.im2col.spec import Im2colSpec, conv_corners
from ..tma.tiled import oracle
from ..tma.tiled.spec import TensorMapSpec
from .config import L2_PROMOTIONS, GemmConfig
from .reference import reference_gemm, value_dtype
from .rules import CONV_DTYPES, CONV_RULES, CORNER_RANGE, MAX_OFFSET  # noqa: F401 (importable from here too)


@dataclass(frozen=True)
class ConvShape:
    """One forward convolution: NHWC input, KRSC filter, the same stride, padding and dilation on H and W."""

    n: int  # images
    h: int  # input height
    w: int  # input width
    c: int  # input channels
    k: int  # output channels
    r: int  # filter height
    s: int  # filter width
    stride: int = 1
    pad: int = 0  # on each side
    dilation: int = 1

    def __post_init__(self):
        for f in fields(self):
            lo = 0 if f.name == "pad" else 1
            object.__setattr__(self, f.name, as_int(getattr(self, f.name), f.name, error=GemmError,
                                                    rule="conv_shape", lo=lo))

    @property
    def p(self) -> int:
        return (self.h + 2 * self.pad - self.dilation * (self.r - 1) - 1) // self.stride + 1

    @property
    def q(self) -> int:
        return (self.w + 2 * self.pad - self.dilation * (self.s - 1) - 1) // self.stride + 1

    @property
    def gemm_mnk(self) -> tuple[int, int, int]:
        """(M, N, K) of the implicit GEMM: output pixels, output channels, filter taps x input channels."""
        return self.n * self.p * self.q, self.k, self.r * self.s * self.c

    @property
    def flops(self) -> int:
        m, n, k = self.gemm_mnk
        return 2 * m * n * k

    def describe(self) -> str:
        return (f"N={self.n} {self.h}x{self.w}x{self.c} -> {self.k}, {self.r}x{self.s}, stride {self.stride}, "
                f"pad {self.pad}" + (f", dilation {self.dilation}" if self.dilation != 1 else ""))

    def check(self, config: GemmConfig) -> ConvShape:
        """Refuse, by a named rule with a fix, what the im2col map or the kernel's k-blocks cannot express (the first
        broken rule of `rules.CONV_RULES`, then the implicit GEMM's problem rules)."""
        for err in broken_rules(CONV_RULES, self, config):
            raise err
        config.check_problem(*self.gemm_mnk)
        return self

    @property
    def corners(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return conv_corners((self.r, self.s), self.pad, self.dilation)

    def default_config(self, dtype: str = "bfloat16") -> GemmConfig:
        """What Conv2d runs without a configuration (chosen against cuDNN: docs/im2col.md): ping-pong
        warpgroups with one wgmma group in flight, the narrowest tile N that covers the output channels (64, 128,
        else 256), as many tile rows as 128 accumulators a thread allow, as many stages as fit."""
        bn = 64 if self.k <= 64 else 128 if self.k <= 128 else 256
        base = GemmConfig(dtype=dtype, bm=128 * 128 // bn, bn=bn, pingpong=True, inflight=1)
        return base.with_(stages=base.stages_that_fit())

    def defines(self, config: GemmConfig) -> dict:
        return {"GEMM_CONV": 1, "CONV_P": self.p, "CONV_Q": self.q, "CONV_S": self.s,
                "CONV_C_BLOCKS": self.c // config.k_tile, "CONV_STRIDE": self.stride, "CONV_PAD": self.pad,
                "CONV_DIL": self.dilation}

    def a_spec(self, config: GemmConfig, address: int = 0):
        """The im2col map of x: BM pixels of one 128-byte panel of channels per load, the GEMM's swizzle."""
        lower, upper = self.corners
        return Im2colSpec.create(config.dtype, (self.n, self.h, self.w, self.c), lower, upper, config.panel_elems,
                                 config.bm, element_strides=(1, self.stride, self.stride, 1),
                                 swizzle=config.box_spec("A").swizzle, l2_promotion=L2_PROMOTIONS[config.l2_promotion],
                                 base_address=address)

    def load_coordinates(self, config: GemmConfig, tm: int, kb: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(coordinates n, h, w, c in NumPy order; offsets H, W) of the A load of tile row tm, k-block kb: what
        conv_load_a in the kernel computes."""
        m0 = tm * config.bm
        img, pq = divmod(m0, self.p * self.q)
        tap, cb = divmod(kb, self.c // config.k_tile)
        r, s = divmod(tap, self.s)
        h, w = (pq // self.q) * self.stride - self.pad, (pq % self.q) * self.stride - self.pad
        return (img, h, w, cb * config.k_tile), (r * self.dilation, s * self.dilation)

    def im2col_matrix(self, x: np.ndarray) -> np.ndarray:
        """A [N*P*Q, R*S*C]: row (n, p, q), column (r, s, c) = x[n, p*stride - pad + r*dil, q*stride - pad + s*dil, c],
        zero outside the input."""
        padded = np.zeros((self.n, self.h + 2 * self.pad, self.w + 2 * self.pad, self.c), x.dtype)
        padded[:, self.pad:self.pad + self.h, self.pad:self.pad + self.w] = x
        cols = []
        for r in range(self.r):
            for s in range(self.s):
                h0, w0 = r * self.dilation, s * self.dilation
                cols.append(padded[:, h0:h0 + self.stride * (self.p - 1) + 1:self.stride,
                                   w0:w0 + self.stride * (self.q - 1) + 1:self.stride])
        return np.stack(cols, axis=3).reshape(self.n * self.p * self.q, self.r * self.s * self.c)


def reference_conv(x: np.ndarray, w: np.ndarray, shape: ConvShape, out_dtype="bfloat16") -> np.ndarray:
    """y [N, P, Q, K] as the GEMM's reference rounds it (float64 sums, fp32 accumulator, the output type)."""
    a = shape.im2col_matrix(x)
    return reference_gemm(a, w.reshape(shape.k, -1), out_dtype=out_dtype).reshape(shape.n, shape.p, shape.q, shape.k)


def a_images_match(shape: ConvShape, config: GemmConfig, x: np.ndarray, tiles=None) -> list[tuple[int, int]]:
    """(tile row, k-block) of every A load whose im2col image (drvtma.tma.im2col.oracle) differs from the tiled
    image of the explicit im2col matrix at (tm x BM, kb x BK) (drvtma.tma.tiled.oracle): [] when the convolution's map
    and coordinates are right. `tiles`: the tile rows to check (default all)."""
    shape.check(config)
    m, _, k = shape.gemm_mnk
    a = shape.im2col_matrix(x)
    spec = shape.a_spec(config)
    box = config.box_spec("A")
    tiled = TensorMapSpec.create(config.dtype, (m, k), box.box, swizzle=box.swizzle)
    x_bytes, a_bytes = np.ascontiguousarray(x).view(np.uint8).reshape(-1), a.view(np.uint8).reshape(-1)
    bad = []
    for tm in range(-(-m // config.bm)) if tiles is None else tiles:
        for kb in range(k // config.k_tile):
            coords, offsets = shape.load_coordinates(config, tm, kb)
            got = im2col_oracle.im2col_images(spec, x_bytes, np.array([coords]), np.array([offsets]))
            want = oracle.load_images(tiled, a_bytes, np.array([(tm * config.bm, kb * config.k_tile)]),
                                      image_bytes=got.shape[1])
            if not np.array_equal(got, want):
                bad.append((tm, kb))
    return bad


class Conv2d:
    """A forward convolution on the GPU: the TMA-fed wgmma GEMM, its A operand read through an im2col map.

    Parameters
    ----------
    shape : ConvShape
        n, h, w, c, k, r, s, stride, pad, dilation (NHWC input, KRSC filter, NPQK output).
    config : GemmConfig, optional
        The kernel's configuration (default: the shape's own choice).

    Call it with NumPy x and w (`conv(x, w)`, y poisoned first, waits checked) or `bind` device buffers.

    Raises
    ------
    GemmError
        A shape or configuration the kernel cannot run, named with the fix (before anything is built).
    """

    def __init__(self, shape: ConvShape, config: GemmConfig | None = None):
        from .launch import Gemm

        if not isinstance(shape, ConvShape):
            raise GemmError("type", "shape", type(shape).__name__, "give a ConvShape(n, h, w, c, k, r, s, ...)")
        if config is None:
            config = shape.default_config()
        self.gemm = Gemm(config, conv=shape)  # the configuration and the shape checked there
        assert self.gemm.conv is not None  # Gemm checked and kept the shape passed in
        self.shape = self.gemm.conv

    def bind(self, x, w, y):
        """A launchable convolution on device buffers x (NHWC), w (KRSC), y (NPQK)."""
        m, n, k = self.shape.gemm_mnk
        return self.gemm.bind(x, w, y, m, n, k)

    def __call__(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """y = conv(x, w) for NumPy NHWC x and KRSC w in the configuration's type; y poisoned first, waits checked."""
        from ..runtime.driver import DeviceBuffer

        s, cfg = self.shape, self.gemm.config
        want = value_dtype(cfg.dtype)
        if x.shape != (s.n, s.h, s.w, s.c) or w.shape != (s.k, s.r, s.s, s.c) or x.dtype != want or w.dtype != want:
            raise GemmError("conv_operands", "x, w", (x.shape, w.shape), f"give x {(s.n, s.h, s.w, s.c)} and w "
                            f"{(s.k, s.r, s.s, s.c)}, both {want}", "the operands do not match the shape")
        out = value_dtype(cfg.out_dtype)
        with DeviceBuffer.from_array(np.ascontiguousarray(x)) as dx, \
                DeviceBuffer.from_array(np.ascontiguousarray(w)) as dw, \
                DeviceBuffer(s.n * s.p * s.q * s.k * out.itemsize) as dy, self.bind(dx, dw, dy) as op:
            op.run_checked()
            return dy.download(out, (s.n, s.p, s.q, s.k))
