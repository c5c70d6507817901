"""The arguments of each cuTensorMapEncode* call as one record (a spec's `tma_params()`), described in the driver's
own names and order: what an error message or a reproducer quotes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class MapParams:
    """What every cuTensorMapEncode* call receives (fastest dimension first, strides for dims 1..); a subclass adds
    its call's own arguments and names them all in the call's order (ARGUMENTS)."""

    ARGUMENTS: ClassVar[tuple[str, ...]] = ()
    dtype_enum: int
    rank: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    def describe(self) -> str:
        """The arguments as the driver names them, in its order."""
        return ", ".join(f"{_DRIVER_ARGUMENT[name]}={_shown(getattr(self, name))}" for name in self.ARGUMENTS)


# Each params field's name in the cuTensorMapEncode* signatures.
_DRIVER_ARGUMENT = {"dtype_enum": "tensorDataType", "rank": "tensorRank", "global_dim": "globalDim",
                    "global_strides": "globalStrides", "box_dim": "boxDim", "lower_corner": "pixelBoxLowerCorner",
                    "upper_corner": "pixelBoxUpperCorner", "channels_per_pixel": "channelsPerPixel",
                    "pixels_per_column": "pixelsPerColumn", "element_strides": "elementStrides",
                    "interleave": "interleave", "swizzle": "swizzle", "l2_promotion": "l2Promotion",
                    "oob_fill": "oobFill"}


def _shown(value) -> str:
    return str(list(value)) if isinstance(value, tuple) else str(value)


@dataclass(frozen=True)
class TmaParams(MapParams):
    """What cuTensorMapEncodeTiled receives."""

    ARGUMENTS = ("dtype_enum", "rank", "global_dim", "global_strides", "box_dim", "element_strides", "interleave",
                 "swizzle", "l2_promotion", "oob_fill")
    box_dim: tuple[int, ...]
