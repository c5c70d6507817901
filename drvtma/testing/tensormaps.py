"""Specs for probing the 128 bytes of a CUtensorMap: random valid specs at random addresses (the decode corpus and
its round-trip test) and one-parameter-at-a-time variations of a base spec (which bytes each parameter moves).

Every spec here is encoded by the driver elsewhere (scripts/make_tensormap_corpus.py, tests/test_tensormap_global_gpu.py);
nothing in this module needs a GPU.
"""

from __future__ import annotations

import numpy as np

from ..tma.dtypes import ALL_DTYPES
from ..tma.tiled.rules import address_alignment
from ..tma.tiled.spec import SM90_SWIZZLES, Interleave, L2Promotion, OobFill, Swizzle, TensorMapSpec
from .strategies import RngChooser, build_valid_spec

# GPU virtual addresses fit 57 bits on Hopper hosts; the corpus covers the whole range the decoder claims.
ADDRESS_BITS = 57


def random_address(rng: np.random.Generator, interleave=Interleave.NONE) -> int:
    """A random address the driver accepts for this interleave: aligned, below 2^ADDRESS_BITS, often small."""
    align = address_alignment(interleave)
    bits = int(rng.choice([20, 32, 40, 48, ADDRESS_BITS]))
    return int(rng.integers(0, (1 << bits) // align)) * align


def random_spec(rng: np.random.Generator) -> TensorMapSpec:
    """A random valid spec (every dtype, rank, interleave, swizzle, L2 promotion, fill) at a random address.

    A third get large dims (strides up to 2^39) so wide fields are exercised, not only small shapes; `EDGE_CHANCE`
    of them move one axis' dim, stride or box to an encoding edge (`edge_spec`), so every class of
    drvtma.fuzz.coverage.decode is reached.
    """
    ch = RngChooser(rng)
    max_dim = int(rng.choice([300, 300, 70000]))
    while True:
        try:
            spec = build_valid_spec(ch, max_dim=max_dim, address=False)
            break
        except AssertionError:  # strides past 2^40 with big dims at rank 5: draw again
            continue
    if rng.random() < EDGE_CHANCE:
        spec = edge_spec(rng, spec)
    return spec.replace(base_address=random_address(rng, spec.interleave))


# ---------------------------------------------------------------------------------------------- one at a time

BASE_ADDRESS = 0x7F12_3456_7800


def base_spec(rank: int = 5, dtype="float32") -> TensorMapSpec:
    """A rank-`rank` spec with distinct values in every field, the base the probes vary."""
    shape = (3, 5, 7, 11, 64)[-rank:]
    box = (1, 2, 3, 4, 32)[-rank:]
    es = (2, 3, 1, 2, 1)[-rank:]
    return TensorMapSpec.create(dtype, shape, box, element_strides=es, base_address=BASE_ADDRESS,
                                allow_overlap=True)


def _tma_set(values: tuple, tma_index: int, value) -> tuple:
    """`values` (NumPy order) with TMA dimension `tma_index` (0 = innermost) set to `value`."""
    out = list(values)
    out[len(out) - 1 - tma_index] = value
    return tuple(out)


def one_at_a_time_specs() -> list[tuple[str, TensorMapSpec]]:
    """(label, spec): the base spec and variations of one parameter each (some the driver may refuse)."""
    base = base_spec()
    assert base.element_strides is not None  # __post_init__ fills it
    out = [("base", base)]
    for bit in range(4, 64):
        out.append((f"address bit {bit}", base.replace(base_address=BASE_ADDRESS ^ (1 << bit))))
    out.append(("address 0", base.replace(base_address=0)))
    for d in range(base.rank):
        for v in (1, 2, 3, 4, 255, 256, 257, 4096, 65535, 65536, 1 << 20, (1 << 31) - 1, 1 << 31, (1 << 32) - 1,
                  1 << 32):
            out.append((f"global_dim {d} = {v}", base.replace(shape=_tma_set(base.shape, d, v))))
    for d in range(1, base.rank):
        for k in range(0, 37):
            v = 16 << k
            if v < 1 << 40:
                out.append((f"global_stride {d} = {v}",
                            base.replace(strides_bytes=_tma_set(base.strides_bytes, d, v))))
        for v in (16 * 3, 16 * 5, 16 * 0x123457, (1 << 40) - 16):
            out.append((f"global_stride {d} = {v}", base.replace(strides_bytes=_tma_set(base.strides_bytes, d, v))))
    for d in range(base.rank):
        values = (4, 8, 12, 16, 32, 64, 128, 256) if d == 0 else (1, 2, 3, 4, 5, 8, 16, 64, 128, 255, 256)
        for v in values:
            out.append((f"box_dim {d} = {v}", base.replace(box=_tma_set(base.box, d, v))))
        for v in range(1, 9):
            out.append((f"element_stride {d} = {v}",
                        base.replace(element_strides=_tma_set(base.element_strides, d, v))))
    for dt in ALL_DTYPES:
        out.append((f"dtype {dt.name}", base.replace(dtype=dt)))
    small_inner = base.replace(box=_tma_set(base.box, 0, 8))  # 32 B rows: every swizzle's span holds them
    for sw in SM90_SWIZZLES:
        out.append((f"swizzle {sw.name}", small_inner.replace(swizzle=sw)))
    for il in Interleave:
        out.append((f"interleave {il.name}", small_inner.replace(interleave=il, swizzle=Swizzle.B32)))
    for l2 in L2Promotion:
        out.append((f"l2_promotion {l2.name}", base.replace(l2_promotion=l2)))
    for fill in OobFill:
        out.append((f"oob_fill {fill.name}", base.replace(oob_fill=fill)))
    for r in range(1, 5):
        out.append((f"rank {r}", base_spec(r)))
    return out


# ---------------------------------------------------------------------------------------------- encoding edges

EDGE_CHANCE = 0.4  # random_spec moves one field of one axis to where its encoding changes this often


def edge_spec(rng: np.random.Generator, spec: TensorMapSpec) -> TensorMapSpec:
    """`spec` with one axis' dim (past 2^16, 2^31, up to 2^32), stride (past 2^32, 2^39) or box (256) at an
    encoding edge, the strides re-nested around it; `spec` itself when no valid variant of that draw exists."""
    r, s = spec.rank, spec.itemsize
    a = int(rng.integers(r))
    assert spec.element_strides is not None  # __post_init__ fills it
    shape, strides, box, es = (list(v) for v in (spec.shape, spec.strides_bytes, spec.box, spec.element_strides))
    kind = str(rng.choice(["dim", "dim", "stride", "box"] if r > 1 else ["dim", "box"]))
    if kind == "stride" and a == r - 1:
        a = int(rng.integers(r - 1))
    align = address_alignment(spec.interleave)
    if kind == "dim":
        shape[a] = int(rng.choice([1, (1 << 16) + 1 + int(rng.integers(1 << 20)),
                                   (1 << 31) + int(rng.integers(1, 1 << 20)), (1 << 32) - int(rng.integers(0, 1 << 10)),
                                   1 << 32]))
    elif kind == "box":
        box[a], es[a] = 256, 1
        box = [b if k in (a, r - 1) else 1 for k, b in enumerate(box)]
    for most in (None, 4, 1):
        if most:  # the other dims small, so the nested strides stay below 2^40
            shape = [v if k == a else min(v, most) for k, v in enumerate(shape)]
        order = sorted(range(r - 1), key=lambda k: strides[k])  # innermost-first nesting, kept
        new, step, previous = list(strides), shape[-1] * s, s
        for k in order:
            new[k] = previous = -(-max(step, previous + 1) // align) * align
            step = new[k] * shape[k]
        if kind == "stride":
            new[a] = max(new[a], (1 << int(rng.choice([32, 39]))) + align * int(rng.integers(1 << 10)))
            new[a] = min(new[a], (1 << 40) - align)
        out = spec.replace(shape=tuple(shape), strides_bytes=tuple(new), box=tuple(box), element_strides=tuple(es))
        if out.is_valid():
            return out
    return spec
