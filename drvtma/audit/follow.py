"""Maps behind pointers (`drvtma audit --follow-pointers`): a library that keeps its maps in global memory passes
the kernel a pointer, not the 128 bytes. After a launch's first sight, wait (bounded) for it to finish, then read a
little device memory at every argument word that points into a device allocation and keep the 64-byte-aligned
windows that plausibly hold a map (a map in global memory must be 64-byte aligned).

Opt-in: it serialises the program at every distinct launch. It provokes no driver error: cuPointerGetAttributes
answers "not a CUDA pointer" with success, and a stream capturing a graph is left alone.
"""

from __future__ import annotations

import time

import numpy as np

from .structs import MAP_BYTES

POINTER_ALIGN = 16  # device allocations and the structures in them start at least this aligned
MAP_ALIGN = 64  # a map in global memory
MAX_POINTERS = 32  # argument words followed per launch
READ_BYTES = 4096  # read behind each pointer, clipped to its allocation (each 64-B window costs ~0.1 ms to judge)
MAX_NEAR = 4  # map-like windows kept per pointer, where no map is behind it
MAX_FOLLOWED = 512  # distinct launches followed per run (the rest say so)
WAIT_S = 5.0  # how long a launch may run before its pointers are left unread


def pointer_words(arguments: bytes, skip=()) -> list[tuple[int, int]]:
    """(offset, value) of the 8-byte-aligned argument words that could point to device memory (nonzero, 16-byte
    aligned, distinct), outside the `skip` ranges (offset, size) of maps found by value, at most MAX_POINTERS."""
    out, seen = [], set()
    for offset in range(0, len(arguments) - 7, 8):
        if any(lo <= offset < lo + size for lo, size in skip):
            continue
        value = int.from_bytes(arguments[offset:offset + 8], "little")
        if value and value % POINTER_ALIGN == 0 and value not in seen:
            seen.add(value)
            out.append((offset, value))
            if len(out) == MAX_POINTERS:
                break
    return out


def maps_in_memory(data: bytes, address: int, accept) -> list[tuple[int, bytes]]:
    """(bytes past `address`, the 128 bytes) of each 64-byte-aligned window of `data` (read at `address`) that
    `accept` takes."""
    first = -address % MAP_ALIGN
    return [(d, data[d:d + MAP_BYTES]) for d in range(first, len(data) - MAP_BYTES + 1, MAP_ALIGN)
            if any(data[d:d + MAP_BYTES]) and accept(data[d:d + MAP_BYTES])]


class PointerReader:
    """The GPU side of --follow-pointers: `reader(stream, arguments, skip)` -> (found, note); `found` is a list of
    {"offset", "pointer", "delta", "map"} (the argument word's offset, its value, the map's distance past it, the
    128 bytes as hex), with "near" (why it only looks like a map) for the map-like windows behind a pointer with no
    map; or None with `note` saying why nothing was read."""

    def __init__(self):
        from cuda.bindings import driver as cu

        from ..tma.maps.findings import map_or_lead

        self.cu = cu
        self.map_or_lead = map_or_lead
        a = cu.CUpointer_attribute
        self.attributes = [a.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                           a.CU_POINTER_ATTRIBUTE_RANGE_SIZE]
        self.device_types = {int(cu.CUmemorytype.CU_MEMORYTYPE_DEVICE), int(cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED)}
        self.stopped = ""  # after a launch outran WAIT_S: why no later launch is waited for

    def _wait(self, stream) -> str:
        """"" once the stream's work (the launch) is done, else why not (after WAIT_S, following stops)."""
        cu = self.cu
        deadline = time.monotonic() + WAIT_S
        while True:
            (err,) = cu.cuStreamQuery(stream)
            if err == cu.CUresult.CUDA_SUCCESS:
                return ""
            if err != cu.CUresult.CUDA_ERROR_NOT_READY:
                return f"not read: cuStreamQuery answered {err.name}"
            if time.monotonic() > deadline:  # the program's own waits must not add up: stop following
                self.stopped = f"not read: an earlier launch ran longer than {WAIT_S:g} s, following stopped"
                return f"not read: the launch ran longer than {WAIT_S:g} s"
            time.sleep(50e-6)

    def __call__(self, stream: int, arguments: bytes, skip=()) -> tuple[list[dict] | None, str]:
        cu = self.cu
        if self.stopped:
            return None, self.stopped
        s = cu.CUstream(stream)
        err, capturing = cu.cuStreamIsCapturing(s)
        if err != cu.CUresult.CUDA_SUCCESS:
            return None, f"not read: cuStreamIsCapturing answered {err.name}"
        if capturing != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            return None, "not read: the stream is capturing a graph"
        why = self._wait(s)
        if why:
            return None, why
        found = []
        looked: dict[bytes, tuple[bool, str | None]] = {}

        def worth(window: bytes) -> bool:
            """A map, or a lead (kept only where no map is behind its pointer); each window judged once."""
            if window not in looked:
                looked[window] = self.map_or_lead(window)
            return looked[window] != (False, None)

        for offset, value in pointer_words(arguments, skip):
            err, attrs = cu.cuPointerGetAttributes(len(self.attributes), self.attributes, value)
            if err != cu.CUresult.CUDA_SUCCESS or int(attrs[0]) not in self.device_types:
                continue
            start, size = int(attrs[1]), int(attrs[2])
            n = min(READ_BYTES, start + size - value)
            if n < MAP_BYTES:
                continue
            data = np.empty(n, np.uint8)
            (err,) = cu.cuMemcpyDtoHAsync(data.ctypes.data, value, n, s)  # on the launch's stream, now idle
            if err != cu.CUresult.CUDA_SUCCESS or self._wait(s):
                continue
            windows = maps_in_memory(data.tobytes(), value, worth)
            maps = [(delta, raw) for delta, raw in windows if looked[raw][0]]
            for delta, raw in maps:
                found.append({"offset": offset, "pointer": value, "delta": delta, "map": raw.hex()})
            if not maps:
                found += [{"offset": offset, "pointer": value, "delta": delta, "map": raw.hex(),
                           "near": looked[raw][1]} for delta, raw in windows[:MAX_NEAR]]
        return found, ""
