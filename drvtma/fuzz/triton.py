"""The "triton" strategy of kernel fuzzing (`drvtma fuzz loads --kernel k.py:run --strategy triton`): maps a
host `TensorDescriptor` can describe and Triton's own checks accept (drvtma.tma.triton: power-of-two blocks, rows
of 16 bytes or more, 16-byte strides, zero or NaN padding for floats), built through `TensorMapSpec.from_triton`.
Triton itself is optional: nothing here imports it."""

from __future__ import annotations

from types import SimpleNamespace

from ..tma.dtypes import tma_dtype
from ..tma.rules import round_up
from ..tma.spec import TensorMapSpec
from ..tma.stores import REDUCE_DTYPES, STORE, StoreCase
from .stores import StoreFuzzCase

# torch names of the element types the strategy draws (the map type in drvtma.tma.triton.TRITON_DTYPES)
DTYPES = ("float16", "bfloat16", "float32", "float64", "uint8", "int32", "int64")
MAX_BLOCK_BYTES = 16384


def _pow2(ch, lo: int, hi: int) -> int:
    """A power of two in lo..hi (both powers of two)."""
    return 1 << ch.integer(lo.bit_length() - 1, hi.bit_length() - 1)


class TritonSpecs:
    name = "triton"

    def descriptor(self, ch, options: dict, dtypes=DTYPES) -> SimpleNamespace:
        """The fields of a host TensorDescriptor (base: a stand-in with dtype, data_ptr 0)."""
        name = ch.choice(list(dtypes))
        from ..tma.triton import TRITON_DTYPES

        s = tma_dtype(TRITON_DTYPES[name]).itemsize
        rank = ch.integer(1, 3)
        block = [_pow2(ch, max(1, 16 // s), min(256, 256 // s))]  # a row of 16..256 bytes
        budget = MAX_BLOCK_BYTES // (block[0] * s)
        for _ in range(rank - 1):
            block.insert(0, _pow2(ch, 1, max(1, min(256, budget))))
            budget = max(1, budget // block[0])
        max_dim, step = ch.choice([8, 40, 300]), s
        shape, strides = [0] * rank, [0] * rank
        for axis in reversed(range(rank)):
            room = max(1, options["max_extent_bytes"] // max(step, 1))
            shape[axis] = ch.integer(1, max(1, min(max_dim, room)))
            strides[axis] = step // s
            pad = 16 * ch.choice([0, 0, 1, 2])
            step = round_up(step * shape[axis], 16) + pad if axis == rank - 1 else step * shape[axis] + pad
        strides[-1] = 1
        floating = name.startswith(("float", "bfloat"))
        padding = "nan" if floating and ch.chance(0.3) else "zero"
        return SimpleNamespace(base=_Base(name, s, floating), shape=shape, strides=strides, block_shape=block,
                               padding=padding)

    def load_spec(self, ch, options: dict, dtypes=DTYPES) -> TensorMapSpec:
        return TensorMapSpec.from_triton(self.descriptor(ch, options, dtypes))

    def load_coordinates(self, ch, spec: TensorMapSpec) -> tuple:
        from ..testing import build_coordinates

        return build_coordinates(ch, spec)

    def store_case(self, ch, options: dict) -> StoreFuzzCase:
        ops = options["ops"]
        dtypes = [d for d in DTYPES if any(op == STORE or _map_type(d) in REDUCE_DTYPES[op] for op in ops)]
        spec = (TensorMapSpec.from_dict(options["spec"]) if options.get("spec")
                else self.load_spec(ch, options, dtypes))
        legal = [op for op in ops if op == STORE or spec.dtype in REDUCE_DTYPES[op]]
        unit = 16 // spec.itemsize
        coords = tuple(ch.integer(0, n + 1) for n in spec.shape[:-1]) + (
            unit * ch.integer(0, -(-spec.shape[-1] // unit)),)
        return StoreFuzzCase(StoreCase(spec, coords, ch.choice(legal), 0), ch.integer(0, (1 << 32) - 1))


def _map_type(name: str):
    from ..tma.triton import TRITON_DTYPES

    return tma_dtype(TRITON_DTYPES[name])


class _Base:
    """What Triton's TensorDescriptor reads of its base tensor: dtype (str(), itemsize, is_floating_point) and
    data_ptr()."""

    def __init__(self, name: str, itemsize: int, floating: bool):
        self.dtype = _Dtype(name, itemsize, floating)

    def data_ptr(self) -> int:
        return 0


class _Dtype:
    def __init__(self, name: str, itemsize: int, floating: bool):
        self.name, self.itemsize, self.is_floating_point = name, itemsize, floating

    def __str__(self) -> str:
        return f"torch.{self.name}"


TRITON_SPECS = TritonSpecs()
