"""Tiled tensor maps and what the copy engine does with them.

- `spec`: `TensorMapSpec` in NumPy order and its geometry; `rules`: every encode rule as a named check with a fix;
  `encode`: `encode_tiled` and the 128-byte `TensorMap`; `dtypes`: the TMA element types.
- `oracle`: a NumPy model of tiled loads; `probe`: batched GPU load probes checked against it.
- `stores`: the rules and oracle of tensor stores and reductions; `store_probe`: their batched GPU runner.
- `arrays`: maps for any DLPack / CUDA Array Interface array (torch, CuPy, JAX, cuda.core) via `StridedMemoryView`.
- `decode`: the 128 bytes back to (spec, address) (`decode.decode`, and `encode_bytes` on the host); `replace`: the
  host model of every `tensormap.replace` edit; `global_maps`: maps in global / `__constant__` memory and edits made
  on the device; `descriptor_bench`: what each way of passing a map costs (`drvtma bench descriptors`).
- im2col maps (docs/im2col.md): `im2col_spec` (`Im2colSpec`), `im2col_rules` (`IM2COL_RULES`), `im2col_encode`,
  `im2col_oracle` (one load's shared-memory image), `im2col_probe` (the batched GPU probe).
"""

from .dtypes import ALL_DTYPES, TmaDtype, tma_dtype
from .encode import TensorMap, encode_tiled, encode_unchecked
from .rules import describe_spec, driver_box_bytes, driver_should_accept, validate_all
from .spec import (
    ALL_RULES,
    DRIVER_RULES,
    DRVTMA_RULES,
    Interleave,
    L2Promotion,
    OobFill,
    Swizzle,
    TensorMapSpec,
    TmaParams,
    to_tma_order,
)

__all__ = ["ALL_DTYPES", "ALL_RULES", "DRIVER_RULES", "DRVTMA_RULES", "Interleave", "L2Promotion", "OobFill",
           "Swizzle", "TensorMap", "TensorMapSpec", "TmaDtype", "TmaParams", "describe_spec", "driver_box_bytes",
           "driver_should_accept", "encode_tiled", "encode_unchecked", "tma_dtype", "to_tma_order", "validate_all"]
