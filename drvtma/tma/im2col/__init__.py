"""im2col tensor maps (cuTensorMapEncodeIm2col): each load moves the pixels one filter position of a convolution
reads, channels innermost. docs/im2col.md

- `geometry`: the corner and offset ranges and `Im2colGeometry` (below spec and rules); `spec`: `Im2colSpec`;
  `rules`: `IM2COL_RULES`, the tiled room's shared rules and im2col's own; `encode`: `encode_im2col`.
- `oracle`: one load's shared-memory image; `probe`: the batched GPU probe checked against it.
- `decode`: the 128 bytes back to (Im2colSpec, address) and `encode_im2col_bytes` on the host.

Built on the tiled room where the two modes agree (address and bounds rules, `TensorMap`, the swizzle, the probe's
image checks, the 128-byte layout).
"""

from .decode import decode_im2col, encode_im2col_bytes
from .encode import encode_im2col, encode_im2col_unchecked
from .oracle import im2col_image, im2col_images
from .probe import Im2colProbe, check_im2col_loads
from .rules import IM2COL_RULES, describe_im2col, validate_im2col
from .spec import Im2colParams, Im2colSpec, conv_corners

__all__ = ["IM2COL_RULES", "Im2colParams", "Im2colProbe", "Im2colSpec", "check_im2col_loads", "conv_corners",
           "decode_im2col", "describe_im2col", "encode_im2col", "encode_im2col_bytes", "encode_im2col_unchecked",
           "im2col_image", "im2col_images", "validate_im2col"]
