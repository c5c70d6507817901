"""Tiled tensor maps (cuTensorMapEncodeTiled): each load or store moves one box of a tensor. docs/tensormap.md

- `spec`: `TensorMapSpec` in NumPy order (the shared `tma.geometry` re-exported); `rules`: `RULES`, every encode rule
  named with a fix; `encode`: `encode_tiled` and the 128-byte `TensorMap`.
- `oracle`: a NumPy model of loads; `probe`: batched GPU load probes checked against it.
- `decode`: the 128 bytes back to (spec, address) and `encode_bytes` on the host; the bit layout im2col's decode
  builds on.
- `blackwell_rules`: gather4 / scatter4 maps and the oracle of gather4's rows (`tma.target_rules` re-exported).

The im2col, stores and maps rooms build on these; nothing here imports them.
"""

from .blackwell_rules import gather4_values, validate_gather4
from .decode import encode_bytes, fields, map_bytes, same_map
from .encode import TensorMap, encode_tiled, encode_unchecked
from .oracle import box_values, load_image, load_images, tma_load_convert
from .probe import ImageProbe, LoadProbe, check_loads
from .rules import RULES, describe_spec, driver_box_bytes, driver_should_accept, validate_all
from .spec import TensorMapSpec

# `decode.decode` is not re-exported: the name would hide the module `tiled.decode`.
__all__ = ["ImageProbe", "LoadProbe", "RULES", "TensorMap", "TensorMapSpec", "box_values", "check_loads",
           "describe_spec", "driver_box_bytes", "driver_should_accept", "encode_bytes", "encode_tiled",
           "encode_unchecked", "fields", "gather4_values", "load_image", "load_images", "map_bytes", "same_map",
           "tma_load_convert", "validate_all", "validate_gather4"]
