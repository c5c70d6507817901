"""The "triton" strategy of kernel fuzzing (`drvtma fuzz loads --kernel k.py:run --strategy triton`): maps a
host `TensorDescriptor` can describe and Triton's own checks accept (drvtma.tma.triton: power-of-two blocks, rows
of 16 bytes or more, 16-byte strides, zero or NaN padding for floats), built through `TensorMapSpec.from_triton`;
and the ready Triton runners `triton_loads` (desc.load) and `triton_stores` (desc.store). Triton and torch are
optional: only the runners import them, when they run."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np

from ..errors import ArgumentError
from ..testing.strategies import coordinate_builder
from ..tma.dtypes import tma_dtype
from ..tma.stores import REDUCE_DTYPES, STORE, StoreCase, check_store_coordinates
from ..tma.tiled.rules import round_up
from ..tma.tiled.spec import TensorMapSpec
from ..tma.triton import TRITON_DTYPES, triton_arguments
from .choosers import RecordingChooser
from .kernel import tensor_region_bytes
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
        """The fields of a host TensorDescriptor (base: a stand-in with dtype, data_ptr 0). With
        options["signatures"] = N, the element type, block and padding (what Triton compiles a kernel for) come
        from a pool of N drawn from options["signature_seed"]: N compiles serve the whole campaign."""
        pool = signature_pool(options.get("signatures", 0), options.get("signature_seed", 0), tuple(dtypes))
        if pool:
            name, block, padding = ch.choice(pool)
            block = list(block)
        else:
            name, block = _element_type_and_block(ch, dtypes)
        s, rank = tma_dtype(TRITON_DTYPES[name]).itemsize, len(block)
        max_dim, step = ch.choice([8, 40, 300]), s
        shape, strides = [0] * rank, [0] * rank
        for axis in reversed(range(rank)):
            room = max(1, options["max_extent_bytes"] // max(step, 1))
            top = max(1, min(max_dim, room))
            # a pooled block is one of few: its axes meet extents of exactly its length as often as drawn ones
            shape[axis] = min(block[axis], room) if pool and ch.chance(0.15) else ch.integer(1, top)
            strides[axis] = step // s
            pad = 16 * ch.choice([0, 0, 1, 2])
            step = round_up(step * shape[axis], 16) + pad if axis == rank - 1 else step * shape[axis] + pad
        strides[-1] = 1
        floating = name.startswith(("float", "bfloat"))
        if not pool:
            padding = _padding(ch, name)
        return SimpleNamespace(base=_Base(name, s, floating), shape=shape, strides=strides, block_shape=block,
                               padding=padding)

    def refuses(self, spec: TensorMapSpec) -> str | None:
        """What a Triton host descriptor cannot hold (the strategy's own reach): rank above 3 here, a map type
        none of its element types has, interleave, element strides, and the L2 promotion and swizzle Triton picks
        itself."""
        if spec.rank > 3:
            return "triton_rank"
        if spec.dtype.name not in {TRITON_DTYPES[d] for d in DTYPES}:
            return "triton_descriptor"
        if spec.interleave:
            return "triton_interleave"
        if spec.l2_promotion:
            return "triton_l2_promotion"  # TensorDescriptor has no field for it: the map gets none
        if any(e != 1 for e in spec.element_strides or ()):
            return "triton_element_strides"  # nor for element strides: every one is 1
        return None

    def compile_signature(self, spec: TensorMapSpec) -> tuple:
        """What the runners' kernels are compiled for: the element type, the block (constexprs) and the padding."""
        return spec.dtype.name, tuple(spec.box), spec.oob_fill

    def load_spec(self, ch, options: dict, dtypes=DTYPES) -> TensorMapSpec:
        return TensorMapSpec.from_triton(self.descriptor(ch, options, dtypes))

    def load_coordinates(self, spec: TensorMapSpec):
        """A function of the chooser that draws one box's coordinates for `spec` (set up once per map)."""
        return coordinate_builder(spec)

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


def _element_type_and_block(ch, dtypes) -> tuple[str, list[int]]:
    name = ch.choice(list(dtypes))
    s = tma_dtype(TRITON_DTYPES[name]).itemsize
    rank = ch.integer(1, 3)
    return name, _outer_blocks(ch, rank, _pow2(ch, max(1, 16 // s), min(256, 256 // s)), s)  # a row of 16..256 B


def _outer_blocks(ch, rank: int, inner: int, itemsize: int) -> list[int]:
    """A block of `rank` dims ending in `inner` elements, the outer ones powers of two within MAX_BLOCK_BYTES."""
    block, budget = [inner], MAX_BLOCK_BYTES // (inner * itemsize)
    for _ in range(rank - 1):
        block.insert(0, _pow2(ch, 1, max(1, min(256, budget))))
        budget = max(1, budget // block[0])
    return block


def _padding(ch, name: str) -> str:
    return "nan" if name.startswith(("float", "bfloat")) and ch.chance(0.3) else "zero"


MAX_SIGNATURES = 1024  # the largest pool asked for (every distinct signature is a compile)
ROW_BYTES = (16, 32, 64, 128, 256)  # a block's inner row: Triton's swizzle follows it (none, 32B, 64B, 128B)


@functools.lru_cache(maxsize=64)
def signature_pool(size: int, seed: int, dtypes: tuple) -> tuple:
    """Up to `size` distinct (element type, block, padding) triples from `seed`: the kernels Triton compiles for a
    campaign that draws its maps from them (a compile costs ~0.1 s, many launches). Every element type with every
    row width (so every swizzle) first, rank and NaN padding turned through the set so that their pairs with the
    type and the swizzle all occur; random triples after those. Empty for size 0 (every case draws its own)."""
    ch, pool = RecordingChooser([int(seed), 0x7121]), dict[tuple, None]()
    for d, name in enumerate(dtypes):
        s = tma_dtype(TRITON_DTYPES[name]).itemsize
        for r, row in enumerate(ROW_BYTES):
            block = _outer_blocks(ch, 1 + (r + d) % 3, row // s, s)
            nan = name.startswith(("float", "bfloat")) and (r + d) % 2 == 1
            pool.setdefault((name, tuple(block), "nan" if nan else "zero"), None)
    covering = list(pool)
    order = [covering[i] for i in np.random.default_rng([int(seed), 0x7122]).permutation(len(covering))]
    pool = dict.fromkeys(order[:size])
    for _ in range(64 * size):
        if len(pool) >= size:
            break
        name, block = _element_type_and_block(ch, dtypes)
        pool.setdefault((name, tuple(block), _padding(ch, name)), None)
    return tuple(pool)


def _map_type(name: str):
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


# ---------------------------------------------------------------------------------------------- the runner

_compiled: list = []  # the last compiled kernel (its PTX shows whether Triton issued TMA)
_kernels: dict = {}  # the @triton.jit kernels, built on first use (Triton is imported then)


def _jit_kernels() -> dict:
    if _kernels:
        return _kernels
    import triton
    import triton.language as tl

    @triton.jit
    def load_boxes(desc, coords, out, RANK: tl.constexpr, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
        i = tl.program_id(0)
        c = coords + i * 3
        if RANK == 1:
            tl.store(out + i * B0 + tl.arange(0, B0), desc.load([tl.load(c)]))
        elif RANK == 2:
            offs = tl.arange(0, B0)[:, None] * B1 + tl.arange(0, B1)[None, :]
            tl.store(out + i * (B0 * B1) + offs, desc.load([tl.load(c), tl.load(c + 1)]))
        else:
            offs = (tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2
                    + tl.arange(0, B2)[None, None, :])
            tl.store(out + i * (B0 * B1 * B2) + offs, desc.load([tl.load(c), tl.load(c + 1), tl.load(c + 2)]))

    @triton.jit
    def store_box(desc, coords, src, RANK: tl.constexpr, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
        # the block comes from a plain pointer (C order), then one desc.store puts it at the coordinates
        if RANK == 1:
            desc.store([tl.load(coords)], tl.load(src + tl.arange(0, B0)))
        elif RANK == 2:
            offs = tl.arange(0, B0)[:, None] * B1 + tl.arange(0, B1)[None, :]
            desc.store([tl.load(coords), tl.load(coords + 1)], tl.load(src + offs))
        else:
            offs = (tl.arange(0, B0)[:, None, None] * (B1 * B2) + tl.arange(0, B1)[None, :, None] * B2
                    + tl.arange(0, B2)[None, None, :])
            desc.store([tl.load(coords), tl.load(coords + 1), tl.load(coords + 2)], tl.load(src + offs))

    _kernels.update(load=load_boxes, store=store_box)
    return _kernels


def _descriptor(dev, base: int, spec):
    """A host TensorDescriptor over the tensor in `dev` (the case's memory on the GPU, torch uint8)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    region = dev[base:base + tensor_region_bytes(spec)].view(getattr(torch, spec.dtype.name))
    a = triton_arguments(spec)
    return region, TensorDescriptor(region, a["shape"], a["strides"], a["block_shape"], a["padding"])


def _blocks(spec) -> dict:
    b = list(spec.box) + [1] * (3 - spec.rank)
    return {"RANK": spec.rank, "B0": b[0], "B1": b[1], "B2": b[2]}


def triton_loads(memory, base, spec, coords):
    """A `LoadKernel` whose kernel is Triton's: a host TensorDescriptor over the tensor, `desc.load` of each box
    (rank 1..3, as the triton strategy draws), the block stored to a poisoned output. Needs triton and torch."""
    import torch

    n, rank, s = len(coords), spec.rank, spec.itemsize
    dev = torch.from_numpy(memory).cuda()
    region, desc = _descriptor(dev, base, spec)
    c = torch.zeros((n, 3), dtype=torch.int32)
    c[:, :rank] = torch.from_numpy(coords.astype("int32"))
    out = torch.empty((n, *spec.box), dtype=region.dtype, device="cuda")
    out.view(torch.uint8).fill_(0xAB)  # poison: an element the kernel never wrote shows
    _compiled[:] = [_jit_kernels()["load"][(n,)](desc, c.cuda(), out, **_blocks(spec))]
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[s]
    return out.view(bits).cpu().numpy()


def triton_stores(memory, base, spec, coords, box, op):
    """A `StoreKernel` whose kernel is Triton's: a host TensorDescriptor over the tensor and one `desc.store` of
    the box (rank 1..3, as the triton strategy draws; plain stores only: Triton's descriptor reductions are
    another call). Needs triton and torch."""
    if op != STORE:
        raise ArgumentError("runner_op", "op", op, "fuzz triton_stores with `drvtma fuzz stores` (plain stores)")
    c = np.zeros(3, np.int32)
    c[:spec.rank] = check_store_coordinates(spec, coords)  # NumPy order, as desc.store takes them
    import torch

    dev = torch.from_numpy(memory).cuda()  # a copy on the GPU
    region, desc = _descriptor(dev, base, spec)
    raw = np.ascontiguousarray(box, dtype=spec.dtype.numpy).reshape(-1).view(np.uint8)  # bf16 travels as bits
    src = torch.from_numpy(raw.copy()).cuda().view(region.dtype)
    _compiled[:] = [_jit_kernels()["store"][(1,)](desc, torch.from_numpy(c).cuda(), src, **_blocks(spec))]
    return dev.cpu().numpy()


def last_ptx() -> str:
    """The PTX of the last Triton kernel `triton_loads` or `triton_stores` ran ("" before any)."""
    return _compiled[0].asm.get("ptx", "") if _compiled else ""
