"""wgmma.mma_async reading what TMA wrote: shared-memory descriptors, their rules, and an oracle of the result.

- `descriptor`: `SmemDescriptor` (encode / decode / describe) and the one TMA <-> wgmma swizzle-code conversion.
- `dtypes`: the operand types (K per instruction, allowed N, carriers); `rules`: named checks (`WgmmaError`).
- `layout`: `descriptor_for(tmap_spec, smem_address, operand, major, k_step)`, the descriptors that read a TMA tile.
- `oracle`: which shared byte every element of A or B comes from for any descriptor, the fragment maps, D in NumPy.
- `probe`: batched GPU probes (one CTA per case) that refuse wrong descriptors unless `unchecked=True`;
  `cases`: exact data, operand layouts, deliberately wrong descriptors and gather probes for the fuzz.
"""

from .descriptor import SmemDescriptor, WgmmaSwizzle, from_tma_swizzle, to_tma_swizzle
from .dtypes import ALL_TYPES, WgmmaType, wgmma_type
from .layout import descriptor_for, spec_for_tile, tile_layout
from .rules import check_descriptor, check_operands, check_shape

__all__ = ["ALL_TYPES", "SmemDescriptor", "WgmmaSwizzle", "WgmmaType", "check_descriptor", "check_operands",
           "check_shape", "descriptor_for", "from_tma_swizzle", "spec_for_tile", "tile_layout", "to_tma_swizzle",
           "wgmma_type"]
