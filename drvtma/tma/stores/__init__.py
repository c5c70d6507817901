"""TMA tensor stores and reductions (through tiled maps): `rules` (which operation takes which type, which maps and
coordinates a store takes), `oracle` (what a store or reduction leaves in global memory), `cases` (random valid
cases for the fuzz), `probe` (the batched GPU runner, compared byte for byte with the oracle).

Every public name of the three CPU modules is re-exported here, so `from drvtma.tma.stores import apply_store`
reads as it did when this room was one module.
"""

from .cases import StoreCase, check_case, random_store_case, random_values
from .oracle import (
    StoreTargets,
    apply_store,
    box_from_smem,
    inner_write_limit,
    reduce_values,
    smem_byte_offsets,
    smem_from_box,
    store_targets,
)
from .probe import CaseResult, StoreBatchResult, run_bulk_stores, run_store_cases
from .rules import (
    CHUNK_BYTES,
    OP_CODES,
    REDUCE_DTYPES,
    REDUCE_OPS,
    STORE,
    STORE_DTYPES,
    SWIZZLE_PERIOD,
    check_bulk_store,
    check_reduction,
    check_store_coordinates,
    check_store_spec,
)

__all__ = ["CHUNK_BYTES", "CaseResult", "OP_CODES", "REDUCE_DTYPES", "REDUCE_OPS", "STORE", "STORE_DTYPES",
           "SWIZZLE_PERIOD", "StoreBatchResult", "StoreCase", "StoreTargets", "apply_store", "box_from_smem",
           "check_bulk_store", "check_case", "check_reduction", "check_store_coordinates", "check_store_spec",
           "inner_write_limit", "random_store_case", "random_values", "reduce_values", "run_bulk_stores",
           "run_store_cases", "smem_byte_offsets", "smem_from_box", "store_targets"]
