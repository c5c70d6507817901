"""An im2col map's geometry, below its spec and its rules: the ranges the driver and the PTX ISA give, and
`Im2colGeometry`, what an `Im2colSpec` computes from its fields (shared with `oracle`; rank, itemsize,
extent_bytes, ... from `MapGeometry`). The rules check `isinstance(spec, Im2colGeometry)`: only `Im2colSpec` is one.
`spec` re-exports every name."""

from __future__ import annotations

from ..geometry import MapGeometry

IM2COL_RANKS = (3, 4, 5)
# Corner ranges per rank [doc: cuTensorMapEncodeIm2col]; the load's im2col offsets per rank [doc: PTX ISA 5.5.4].
CORNER_RANGE = {3: (-(1 << 15), (1 << 15) - 1), 4: (-128, 127), 5: (-16, 15)}
OFFSET_RANGE = {3: (0, (1 << 16) - 1), 4: (0, 255), 5: (0, 31)}
MAX_CHANNELS_PER_PIXEL = 256
MAX_PIXELS_PER_COLUMN = 1024
SPATIAL_NAMES = {1: ("W",), 2: ("H", "W"), 3: ("D", "H", "W")}


class Im2colGeometry(MapGeometry):
    """The fields an im2col spec (a dataclass) declares beyond MapGeometry's (annotations only), and what follows
    from them."""

    lower_corner: tuple[int, ...]
    upper_corner: tuple[int, ...]
    channels_per_pixel: int
    pixels_per_column: int
    allow_overlap: bool

    @property
    def spatial(self) -> tuple[int, ...]:
        """The spatial extents (D, H, W order)."""
        return self.shape[1:-1]

    @property
    def box_bounds(self) -> tuple[tuple[int, int], ...]:
        """Inclusive [lo, hi] of the filter base per spatial axis (D, H, W): [lower, S - 1 + upper]."""
        return tuple((lo, s - 1 + up) for s, lo, up in zip(self.spatial, self.lower_corner, self.upper_corner))

    @property
    def row_bytes(self) -> int:
        return self.channels_per_pixel * self.itemsize

    @property
    def row_pitch_bytes(self) -> int:
        """Shared bytes from one pixel's row to the next: the row, padded to the swizzle span [derived from tiled]."""
        return max(self.row_bytes, self.swizzle_span_bytes)

    @property
    def expect_tx_bytes(self) -> int:
        """Bytes one load completes: every pixel's channels, filled ones included [derived]."""
        return self.pixels_per_column * self.row_bytes

    @property
    def smem_bytes(self) -> int:
        return self.pixels_per_column * self.row_pitch_bytes


def spatial_name(spec: Im2colGeometry, i: int) -> str:
    names = SPATIAL_NAMES.get(spec.rank - 2)
    return f"{names[i]} (axis {i + 1})" if names and i < len(names) else f"spatial axis {i}"
