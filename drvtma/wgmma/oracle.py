"""What wgmma.mma_async reads and computes, in NumPy: the reference every wgmma probe is compared with.

- `element_addresses(desc, dtype, rows, major)`: the shared byte address of every element (row, k) of one
  instruction's A (rows = 64) or B (rows = N) tile, for any descriptor, right or wrong: the canonical layout of
  the PTX ISA (§9.7.15.5.1) written out per swizzle and majorness, then the swizzle XOR on address bits.
- `gather(image, image_address, desc, ...)`: those elements' bits from a shared-memory image.
- `accumulator_map(n)`, `a_fragment_map(dtype)`: (thread, register or value) -> (row, col).
- `mma(a, b, c, scale_d)`: D = A B^T (+ C), exact in float64 / int64 for exactly representable data.

Canonical layouts (T = elements per 16-B chunk, e = element bytes, span = swizzle row bytes, 16 for none):
  K-major  none: (r%8)*16 + (r/8)*SBO + (k/T)*LBO + (k%T)*e
  K-major  swz : (r%8)*span + (r/8)*SBO + (k/T)*16 + (k%T)*e            (LBO not read)
  MN-major none: (r%T)*e + (r/T)*SBO + (k%8)*16 + (k/8)*LBO              (LBO, SBO swap roles)
  MN-major swz : (r%T)*e + ((r/T)%(span/16))*16 + (r/(T*span/16))*LBO + (k%8)*span + (k/8)*SBO
then  a ^= ((((a >> 7) - base_offset) & mask) << 4) on the absolute shared address (mask 1/3/7 for 32/64/128B):
the phase TMA writes with, shifted back by the base offset (what the GPU does: docs/wgmma.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .descriptor import SmemDescriptor, WgmmaSwizzle
from .dtypes import M, WgmmaType, wgmma_type

_MASK = {WgmmaSwizzle.NONE: 0, WgmmaSwizzle.B32: 1, WgmmaSwizzle.B64: 3, WgmmaSwizzle.B128: 7}
# How the descriptor's base offset enters the swizzle phase: the GPU subtracts it from the absolute line index,
# phase = ((address >> 7) - base_offset) & mask, for 32B, 64B and 128B alike (docs/wgmma.md, §9 question 1); the
# other models stay so tests/test_wgmma_gpu.py can show that they do not fit.
BASE_OFFSET_MODELS = ("ignored", "add", "sub", "xor")
BASE_OFFSET_MODEL = "sub"


def swizzle_phase(addresses, swizzle, base_offset: int = 0, model: str | None = None) -> np.ndarray:
    """Addresses after the wgmma swizzle XOR (chunk bits 4..6 ^= phase bits)."""
    a = np.asarray(addresses, dtype=np.int64)
    mask = _MASK[WgmmaSwizzle(swizzle)]
    if not mask:
        return a
    model = BASE_OFFSET_MODEL if model is None else model
    line = a >> 7
    if model == "add":
        line = line + base_offset
    elif model == "sub":
        line = line - base_offset
    elif model == "xor":
        line = line ^ base_offset
    elif model != "ignored":
        raise ValueError(f"base-offset model {model!r} is not one of {BASE_OFFSET_MODELS}")
    return a ^ ((line & mask) << 4)


def unswizzled_addresses(desc: SmemDescriptor, dtype, rows: int, major: str) -> np.ndarray:
    """(rows, K) byte addresses of the canonical layout before the swizzle XOR."""
    t = wgmma_type(dtype)
    e, per = t.itemsize, t.per_chunk
    r = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(t.k, dtype=np.int64)[None, :]
    span = desc.span
    swizzled = desc.swizzle != WgmmaSwizzle.NONE
    if major == "K":
        if swizzled:
            off = (r % 8) * span + (r // 8) * desc.sbo + (k // per) * 16 + (k % per) * e
        else:
            off = (r % 8) * 16 + (r // 8) * desc.sbo + (k // per) * desc.lbo + (k % per) * e
    elif major == "MN":
        if swizzled:
            atom_chunks = span // 16
            off = ((r % per) * e + ((r // per) % atom_chunks) * 16 + (r // (per * atom_chunks)) * desc.lbo
                   + (k % 8) * span + (k // 8) * desc.sbo)
        else:
            off = (r % per) * e + (r // per) * desc.sbo + (k % 8) * 16 + (k // 8) * desc.lbo
    else:
        raise ValueError(f"major must be 'K' or 'MN', got {major!r}")
    return desc.start + off


def element_addresses(desc: SmemDescriptor, dtype, rows: int, major: str, model: str | None = None) -> np.ndarray:
    """(rows, K) shared byte address of the first byte of each element one instruction reads."""
    return swizzle_phase(unswizzled_addresses(desc, dtype, rows, major), desc.swizzle, desc.base_offset, model)


def gather(image, image_address: int, desc: SmemDescriptor, dtype, rows: int, major: str,
           model: str | None = None) -> np.ndarray:
    """(rows, K) raw element bits (the type's unsigned carrier) read from `image` (uint8, at `image_address`).

    Raises IndexError naming the first address outside the image: wgmma would read memory the model does not hold.
    """
    t = wgmma_type(dtype)
    addr = element_addresses(desc, t, rows, major, model) - image_address
    img = np.asarray(image, dtype=np.uint8)
    if addr.min() < 0 or addr.max() + t.itemsize > img.size:
        bad = addr[(addr < 0) | (addr + t.itemsize > img.size)].flat[0]
        raise IndexError(f"{desc.describe()} reads byte {int(bad)} of a {img.size}-byte image")
    idx = addr[..., None] + np.arange(t.itemsize)
    return np.ascontiguousarray(img[idx]).view(t.carrier)[..., 0]


def read_extent(desc: SmemDescriptor, dtype, rows: int, major: str, model: str | None = None) -> tuple[int, int]:
    """[lo, hi) bytes the instruction reads (absolute addresses)."""
    t = wgmma_type(dtype)
    a = element_addresses(desc, t, rows, major, model)
    return int(a.min()), int(a.max()) + t.itemsize


# ---------------------------------------------------------------------------------------------- fragments

def accumulator_map(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(128, n/2) row and column of accumulator value i of thread t (f32 and s32 alike).

    row = 16*warp + lane/4 + 8*((i>>1)&1), col = 8*(i>>2) + 2*(lane%4) + (i&1)  [doc, CuTe CLayout_64xN].
    """
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = t // 32, t % 32
    g, c = lane // 4, lane % 4
    return 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * c + (i & 1)


def a_fragment_map(dtype) -> tuple[np.ndarray, np.ndarray]:
    """(128, values) row and column of A value i of thread t (A from registers, K-major), 4 registers per thread,
    value i in register i / (4 / itemsize), lowest bits first."""
    t_ = wgmma_type(dtype)
    t = np.arange(128)[:, None]
    w, lane = t // 32, t % 32
    g, c = lane // 4, lane % 4
    if t_.itemsize == 2:
        i = np.arange(8)[None, :]
        return 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * c + (i & 1)
    if t_.itemsize == 4:
        i = np.arange(4)[None, :]
        return 16 * w + g + 8 * (i & 1), c + 4 * (i >> 1)
    i = np.arange(16)[None, :]
    return 16 * w + g + 8 * ((i >> 2) & 1), 16 * (i >> 3) + 4 * c + (i & 3)


def pack_a_registers(a_bits, dtype) -> np.ndarray:
    """(128, 4) uint32 registers holding the 64 x K A tile `a_bits` (raw carrier bits) as wgmma's RS form wants."""
    t = wgmma_type(dtype)
    rows, cols = a_fragment_map(t)
    vals = np.asarray(a_bits).astype(t.carrier)[rows, cols]  # (128, values)
    return np.ascontiguousarray(vals).view(np.uint32).reshape(128, 4)


def unpack_a_registers(regs, dtype) -> np.ndarray:
    """The inverse of `pack_a_registers`: (64, K) raw bits."""
    t = wgmma_type(dtype)
    rows, cols = a_fragment_map(t)
    vals = np.ascontiguousarray(np.asarray(regs, dtype=np.uint32)).view(t.carrier).reshape(128, -1)
    out = np.zeros((M, t.k), dtype=t.carrier)
    out[rows, cols] = vals
    return out


def fragments_to_matrix(frags, n: int) -> np.ndarray:
    """(128, n/2) accumulator registers -> (64, n) matrix (same dtype)."""
    rows, cols = accumulator_map(n)
    f = np.asarray(frags)
    out = np.zeros((M, n), dtype=f.dtype)
    out[rows, cols] = f.reshape(128, n // 2)
    return out


def matrix_to_fragments(mat, n: int) -> np.ndarray:
    rows, cols = accumulator_map(n)
    return np.ascontiguousarray(np.asarray(mat)[rows, cols])


# ---------------------------------------------------------------------------------------------- arithmetic

def mma(a_steps, b_steps, dtype, c=None, scale_d: bool = True) -> np.ndarray:
    """D = sum over steps of A_s B_s^T (+ C when scale_d): A_s (64, K) and B_s (N, K) raw bits, exact.

    float64 for float types (exact for small integers times powers of two), int64 for s8/u8. The result is what
    the accumulator holds as float32 / int32 (int32 wrap-around modelled).
    """
    t = wgmma_type(dtype)
    acc: Any = None  # the products' sum; None before the first step
    for a_bits, b_bits in zip(a_steps, b_steps):
        prod = t.from_bits(a_bits) @ t.from_bits(b_bits).T
        acc = prod if acc is None else acc + prod
    if c is not None and scale_d:
        acc = acc + np.asarray(c, dtype=acc.dtype)
    if t.is_int:
        return ((acc + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)
    return acc.astype(np.float32)


def accumulator_bits(d, dtype) -> np.ndarray:
    """A (64, N) result as the uint32 words the kernel writes."""
    t: WgmmaType = wgmma_type(dtype)
    return np.asarray(d, dtype=np.int32 if t.is_int else np.float32).view(np.uint32)
