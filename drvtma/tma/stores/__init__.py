"""TMA tensor stores and reductions (through tiled maps): `oracle` (the rules, what a store or reduction leaves in
global memory, random cases) and `probe` (the batched GPU runner, compared byte for byte with the oracle).

Every public name of `oracle` is re-exported here, so `from drvtma.tma.stores import apply_store` reads as it did
when this room was one module.
"""

from .oracle import (
    CHUNK_BYTES,
    OP_CODES,
    REDUCE_DTYPES,
    REDUCE_OPS,
    STORE,
    STORE_DTYPES,
    SWIZZLE_PERIOD,
    StoreCase,
    StoreTargets,
    apply_store,
    box_from_smem,
    check_bulk_store,
    check_case,
    check_reduction,
    check_store_coordinates,
    check_store_spec,
    inner_write_limit,
    random_store_case,
    random_values,
    reduce_values,
    smem_byte_offsets,
    smem_from_box,
    store_targets,
)
from .probe import CaseResult, StoreBatchResult, run_bulk_stores, run_store_cases

__all__ = ["CHUNK_BYTES", "CaseResult", "OP_CODES", "REDUCE_DTYPES", "REDUCE_OPS", "STORE", "STORE_DTYPES",
           "SWIZZLE_PERIOD", "StoreBatchResult", "StoreCase", "StoreTargets", "apply_store", "box_from_smem",
           "check_bulk_store", "check_case", "check_reduction", "check_store_coordinates", "check_store_spec",
           "inner_write_limit", "random_store_case", "random_values", "reduce_values", "run_bulk_stores",
           "run_store_cases", "smem_byte_offsets", "smem_from_box", "store_targets"]
