"""Binaries built elsewhere (nvcc, CUTLASS, Triton): cubin, fatbin or PTX, told apart by their first bytes, and each
kernel's parameter layout read from what the binary says of itself. Needs no GPU.

A cubin carries KPARAM_INFO records (`cubin.kernel_params`); a fatbin holds cubins (and PTX) as entries, read here
when stored uncompressed (nvcc's default for cubins; its PTX is zstd-compressed); PTX declares each `.entry`'s
parameters with their sizes and alignments. What none of these tells, the user declares (`params=`).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import cast

from ..errors import ArgumentError
from . import cubin as cubin_records
from . import sass

FATBIN_MAGIC = 0xBA55ED50
ELF_MAGIC = b"\x7fELF"
KINDS = ("cubin", "fatbin", "ptx")
_FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY_HEADER = struct.Struct("<HHIQ")  # kind (1 PTX, 2 ELF), version, header size, payload size
_ENTRY_ARCH_AT = 0x1C
_PTX_ENTRY, _ELF_ENTRY = 1, 2


def image_kind(data: bytes) -> str | None:
    """"cubin", "fatbin" or "ptx" by the first bytes, else None (e.g. CUDA C++ source)."""
    if data[:4] == ELF_MAGIC:
        return "cubin"
    if len(data) >= 4 and struct.unpack_from("<I", data)[0] == FATBIN_MAGIC:
        return "fatbin"
    for line in data[:4096].decode("latin-1").splitlines():  # PTX: comments, then `.version` first
        line = line.strip()
        if line and not line.startswith("//"):
            return "ptx" if line.startswith(".version") else None
    return None


def read_image(source) -> tuple[str, bytes, str] | None:
    """(kind, bytes, name) when `source` (bytes, or a path to a file here) is a cubin, fatbin or PTX, else None."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), None
    elif isinstance(source, (str, Path)) and "\n" not in str(source) and Path(source).is_file():
        data, name = Path(source).read_bytes(), str(source)
    else:
        return None
    kind = image_kind(data)
    return None if kind is None else (kind, data, name or f"<{kind}>")


def fatbin_entries(data: bytes) -> list[tuple[str, int, bytes | None]]:
    """(kind "cubin"/"ptx", sm number, payload or None when compressed) of each entry of a fatbin."""
    if len(data) < _FATBIN_HEADER.size or image_kind(data) != "fatbin":
        raise ValueError("not a fatbin (magic 0xBA55ED50)")
    _, _, header_size, total = _FATBIN_HEADER.unpack_from(data)
    pos, end, out = header_size, min(len(data), header_size + total), []
    while pos + _ENTRY_HEADER.size <= end:
        kind, _, entry_header, size = _ENTRY_HEADER.unpack_from(data, pos)
        arch = struct.unpack_from("<I", data, pos + _ENTRY_ARCH_AT)[0] if pos + _ENTRY_ARCH_AT + 4 <= end else 0
        payload = data[pos + entry_header:pos + entry_header + size]
        if kind == _ELF_ENTRY:
            out.append(("cubin", arch, payload if payload[:4] == ELF_MAGIC else None))
        elif kind == _PTX_ENTRY:
            out.append(("ptx", arch, payload if image_kind(payload.lstrip(b"\n\0")) == "ptx" else None))
        if entry_header == 0 or size == 0:
            break
        pos += entry_header + size
    return out


_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+[\w$]+(?:\[(\d+)\])?")
_SCALAR_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}


def ptx_params(ptx: bytes | str, kernel: str) -> list[tuple[int, int]] | None:
    """[(offset, size)] of `kernel` as its PTX `.entry` declares it (aligned as declared), or None if absent."""
    text = ptx.decode(errors="replace") if isinstance(ptx, (bytes, bytearray)) else ptx
    for m in _ENTRY.finditer(text):
        if m.group(1) != kernel:
            continue
        out, offset = [], 0
        for align, typ, count in _PARAM.findall(m.group(2)):
            width = _SCALAR_BYTES.get(typ.lstrip("bsuf") or "8")
            if width is None:
                raise ValueError(f"{kernel}: parameter type .{typ} not understood")
            size = width * int(count or 1)
            step = int(align) if align else width
            offset = -(-offset // step) * step
            out.append((offset, size))
            offset += size
        return out
    return None


def image_params(kind: str, data: bytes, kernel: str) -> list[tuple[int, int]] | None:
    """The layout the binary records for `kernel`, or None. ValueError when a fatbin's entries are all
    compressed, or the bytes are not what `kind` says."""
    if kind == "cubin":
        return cubin_records.kernel_params(data, kernel)
    if kind == "ptx":
        return ptx_params(data, kernel)
    entries = fatbin_entries(data)
    readable = [(k, p) for k, _, p in entries if p is not None]
    for k, payload in sorted(readable, key=lambda e: e[0] != "cubin"):  # cubins' own records first
        found = cubin_records.kernel_params(payload, kernel) if k == "cubin" else ptx_params(payload, kernel)
        if found is not None:
            return found
    if entries and not readable:
        raise ValueError("every entry of this fatbin is compressed (nvcc -Xfatbin -compress-all?); declare the "
                         "layout with params=, or load the cubin")
    return None


def declared_layout(params, parameter: str = "params") -> dict[str, list[tuple[int, int]]]:
    """The user's layouts: {kernel: [size, ...] or [(offset, size), ...]}; sizes get offsets aligned as nvcc
    aligns them (a 128-byte CUtensorMap at 128 bytes, scalars and pointers at their size). Offsets only place the
    arguments in drvtma's packing image: the launch points the driver at each one."""
    if params is None:
        return {}
    fix = "give {kernel_name: [size, ...]}, e.g. {'tile_copy': [128, 8, 4]} (a CUtensorMap is 128)"
    if not isinstance(params, dict):
        raise ArgumentError("kernel_params", parameter, type(params).__name__, fix)
    out = {}
    for name, layout in params.items():
        if not isinstance(name, str) or not isinstance(layout, (list, tuple)):
            raise ArgumentError("kernel_params", parameter, {name: layout}, fix)
        out[name] = _layout(name, layout, parameter, fix)
    return out


def _layout(name: str, layout, parameter: str, fix: str) -> list[tuple[int, int]]:
    out, offset = [], 0
    for item in layout:
        pair = tuple(item) if isinstance(item, (list, tuple)) else (None, item)
        if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair[1:]) \
                or pair[1] < 1 or (pair[0] is not None and (not isinstance(pair[0], int) or pair[0] < 0)):
            raise ArgumentError("kernel_params", f"{parameter}[{name!r}]", item, fix)
        at, size = pair
        if at is None:
            step = min(128, 1 << (size - 1).bit_length())
            at = -(-offset // step) * step
        out.append((at, size))
        offset = at + size
    return out


TMA_PREFIXES = ("UTMA", "UBLK", "SYNCS")  # SASS: tensor and bulk copies, mbarrier waits and arrivals
_PTX_TMA = re.compile(r"^\s*(?:@!?%\w+\s+)?((?:cp\.async\.bulk|cp\.reduce\.async\.bulk|mbarrier|fence\.proxy"
                      r"|tensormap|prefetch\.tensormap)[\w.:]*)", re.M)


def inspect_image(kind: str, data: bytes) -> list[tuple[str, list[tuple[int, int]] | None, list[str]]]:
    """(kernel, parameter layout or None, its distinct TMA / mbarrier instructions) of each kernel of a binary.
    A cubin's instructions are SASS (nvdisasm); PTX's are PTX; a fatbin is read through its first readable cubin,
    else its PTX. ValueError when nothing in it can be read."""
    if kind == "fatbin":
        entries = [(k, p) for k, _, p in fatbin_entries(data) if p is not None]
        if not entries:
            raise ValueError("every entry of this fatbin is compressed; inspect the cubin (nvcc -cubin) instead")
        kind, data = sorted(entries, key=lambda e: e[0] != "cubin")[0]
    if kind == "ptx":
        text = data.decode(errors="replace")
        bodies = re.split(r"\.entry\s+", text)[1:]
        names = [cast("re.Match[str]", re.match(r"[A-Za-z_$][\w$]*", b)).group(0) for b in bodies]  # .entry's name
        return [(n, ptx_params(text, n), sorted(set(_PTX_TMA.findall(b)))) for n, b in zip(names, bodies)]
    listing = sass.functions(data)
    return [(name, cubin_records.kernel_params(data, name),
             sorted({op for op in listing.get(name, ()) if op.startswith(TMA_PREFIXES)}))
            for name in cubin_records.kernel_names(data)]
