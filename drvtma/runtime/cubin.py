"""Read a kernel's parameter layout from its cubin (ELF section ``.nv.info.<kernel>``), with no driver call.

Drivers before CUDA 13.2 have no count query (cuKernelGetParamCount), and asking cuKernelGetParamInfo for index
after index until it fails leaves a CUDA_ERROR_INVALID_VALUE that compute-sanitizer reports as an API error. The
compiler writes the same layout into the cubin: one EIATTR_KPARAM_INFO record per parameter. Needs no GPU, so it is
tested on the CPU, and against cuKernelGetParamInfo on the GPU (tests/test_core_gpu.py).
"""

from __future__ import annotations

import struct

_EIATTR_KPARAM_INFO = 0x17
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4


def _sections(image: bytes) -> dict[str, bytes]:
    """Section name -> bytes of a little-endian ELF64 image."""
    if image[:4] != b"\x7fELF" or image[4] != 2:
        raise ValueError("not an ELF64 cubin")
    shoff = struct.unpack_from("<Q", image, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", image, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name, _type, _flags, _addr, offset, size in headers:
        start = names_at + name
        out[image[start:image.index(b"\0", start)].decode()] = image[offset:offset + size]
    return out


def _attributes(info: bytes):
    """(attribute, payload) records of an .nv.info section."""
    pos = 0
    while pos + 2 <= len(info):
        fmt, attr = info[pos], info[pos + 1]
        if fmt == _EIFMT_SVAL:
            size = struct.unpack_from("<H", info, pos + 2)[0]
            yield attr, info[pos + 4:pos + 4 + size]
            pos += 4 + size
        elif fmt == _EIFMT_NVAL:  # no value, but the record still has the 4-byte header (e.g. __cluster_dims__)
            yield attr, b""
            pos += 4
        elif fmt in (_EIFMT_BVAL, _EIFMT_HVAL):
            yield attr, info[pos + 2:pos + 4]
            pos += 4
        else:
            raise ValueError(f"unknown .nv.info record format {fmt} at byte {pos}")


def kernel_params(image: bytes, kernel: str) -> list[tuple[int, int]] | None:
    """[(offset, size)] of `kernel`'s parameters in declaration order, or None when the cubin has no record of it.

    KPARAM_INFO payload: u32 index, u16 ordinal, u16 offset, u32 flags whose bits 18..31 are the size in bytes.
    """
    info = _sections(image).get(f".nv.info.{kernel}")
    if info is None:
        return None
    by_ordinal = {}
    for attr, payload in _attributes(info):
        if attr == _EIATTR_KPARAM_INFO and len(payload) >= 12:
            _index, ordinal, offset, flags = struct.unpack_from("<IHHI", payload)
            by_ordinal[ordinal] = (offset, (flags >> 18) & 0x3FFF)
    if sorted(by_ordinal) != list(range(len(by_ordinal))):
        raise ValueError(f"{kernel}: parameter records {sorted(by_ordinal)} are not 0..n-1")
    return [by_ordinal[i] for i in range(len(by_ordinal))]


def kernel_names(image: bytes) -> list[str]:
    """The kernels of a cubin (those with an `.nv.info.<name>` section of attributes), sorted."""
    return sorted(name[len(".nv.info."):] for name in _sections(image) if name.startswith(".nv.info."))
