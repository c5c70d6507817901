"""Tensor maps and what the copy engine does with them, one room per mode, each of the same shape (spec, rules,
encode, oracle, probe; decode where the bytes are known):

- `tiled/`: tiled maps (`TensorMapSpec`, `RULES`, `encode_tiled`, the load oracle and probe, the 128 bytes decoded,
  Blackwell's gather4 / scatter4 maps).
- `im2col/`: im2col maps (`Im2colSpec`, `IM2COL_RULES`, `encode_im2col`, oracle, probe, decode; docs/im2col.md).
- `stores/`: tensor stores and reductions through tiled maps (rules, oracle, random cases, the GPU runner).
- `maps/`: a map as 128 bytes of either mode wherever it lives: `explain` (findings), `tensormap.replace` edits,
  maps in global / `__constant__` memory, what passing a map costs.

Here, below every mode room and importing none: what all modes share. `dtypes` (the TMA element types, PTX codes),
`geometry` (the driver's limits, the field enums, `to_tma_order`, `MapGeometry`), `params` (each encode call's
arguments as one record), `targets` (the GPU a map is for), `target_rules` (the rules a target decides, entries of
both modes' tables), `arrays` (DLPack / CUDA Array Interface arrays as map layouts, via `StridedMemoryView`),
`triton` (Triton's `TensorDescriptor` read by duck typing).
"""

from .dtypes import ALL_DTYPES, TmaDtype, tma_dtype
from .tiled.encode import TensorMap, encode_tiled, encode_unchecked
from .tiled.rules import describe_spec, driver_box_bytes, driver_should_accept, validate_all
from .tiled.spec import (
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
