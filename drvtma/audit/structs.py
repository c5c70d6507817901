"""The C records CUPTI hands a driver-API callback, read with ctypes: `CUpti_CallbackData` (cupti_callbacks.h) and the
parameter records of the calls the audit watches (generated_cuda_meta.h of CUDA 13.0). Each reader copies what it
needs into plain Python values while the call is live: the pointers are valid only inside the callback.

No GPU and no CUPTI here: the CPU tests build these records in ctypes memory and read them back.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_uint, c_uint32, c_uint64, c_void_p
from typing import Any

MAP_BYTES = 128  # sizeof(CUtensorMap); a by-value map parameter is this size, 64-byte aligned
CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2
API_ENTER, API_EXIT = 0, 1  # CUpti_ApiCallbackSite


class CallbackData(ctypes.Structure):
    _fields_ = [("callbackSite", c_int), ("functionName", c_char_p), ("functionParams", c_void_p),
                ("functionReturnValue", c_void_p), ("symbolName", c_char_p), ("context", c_void_p),
                ("contextUid", c_uint32), ("correlationData", c_void_p), ("correlationId", c_uint32)]


class ResourceData(ctypes.Structure):
    _fields_ = [("context", c_void_p), ("resourceHandle", c_void_p), ("resourceDescriptor", c_void_p)]


class ModuleResourceData(ctypes.Structure):
    _fields_ = [("moduleId", c_uint32), ("cubinSize", ctypes.c_size_t), ("pCubin", c_void_p)]


class EncodeTiledParams(ctypes.Structure):
    _fields_ = [("tensorMap", c_void_p), ("tensorDataType", c_int), ("tensorRank", c_uint32),
                ("globalAddress", c_void_p), ("globalDim", POINTER(c_uint64)), ("globalStrides", POINTER(c_uint64)),
                ("boxDim", POINTER(c_uint32)), ("elementStrides", POINTER(c_uint32)), ("interleave", c_int),
                ("swizzle", c_int), ("l2Promotion", c_int), ("oobFill", c_int)]


class EncodeIm2colParams(ctypes.Structure):
    _fields_ = [("tensorMap", c_void_p), ("tensorDataType", c_int), ("tensorRank", c_uint32),
                ("globalAddress", c_void_p), ("globalDim", POINTER(c_uint64)), ("globalStrides", POINTER(c_uint64)),
                ("pixelBoxLowerCorner", POINTER(c_int)), ("pixelBoxUpperCorner", POINTER(c_int)),
                ("channelsPerPixel", c_uint32), ("pixelsPerColumn", c_uint32),
                ("elementStrides", POINTER(c_uint32)), ("interleave", c_int), ("swizzle", c_int),
                ("l2Promotion", c_int), ("oobFill", c_int)]


class EncodeIm2colWideParams(ctypes.Structure):
    _fields_ = [("tensorMap", c_void_p), ("tensorDataType", c_int), ("tensorRank", c_uint32),
                ("globalAddress", c_void_p), ("globalDim", POINTER(c_uint64)), ("globalStrides", POINTER(c_uint64)),
                ("pixelBoxLowerCornerWidth", c_int), ("pixelBoxUpperCornerWidth", c_int),
                ("channelsPerPixel", c_uint32), ("pixelsPerColumn", c_uint32),
                ("elementStrides", POINTER(c_uint32)), ("interleave", c_int), ("mode", c_int), ("swizzle", c_int),
                ("l2Promotion", c_int), ("oobFill", c_int)]


class ReplaceAddressParams(ctypes.Structure):
    _fields_ = [("tensorMap", c_void_p), ("globalAddress", c_void_p)]


class LaunchKernelParams(ctypes.Structure):  # cuLaunchKernel, its _ptsz form; cuLaunchCooperativeKernel lacks `extra`
    _fields_ = [("f", c_void_p), ("gridDimX", c_uint), ("gridDimY", c_uint), ("gridDimZ", c_uint),
                ("blockDimX", c_uint), ("blockDimY", c_uint), ("blockDimZ", c_uint), ("sharedMemBytes", c_uint),
                ("hStream", c_void_p), ("kernelParams", POINTER(c_void_p)), ("extra", POINTER(c_void_p))]


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", c_uint), ("gridDimY", c_uint), ("gridDimZ", c_uint), ("blockDimX", c_uint),
                ("blockDimY", c_uint), ("blockDimZ", c_uint), ("sharedMemBytes", c_uint), ("hStream", c_void_p),
                ("attrs", c_void_p), ("numAttrs", c_uint)]


class LaunchKernelExParams(ctypes.Structure):  # cuLaunchKernelEx and its _ptsz form
    _fields_ = [("config", POINTER(LaunchConfig)), ("f", c_void_p), ("kernelParams", POINTER(c_void_p)),
                ("extra", POINTER(c_void_p))]


def _array(pointer, n: int) -> tuple[int, ...]:
    return tuple(int(pointer[i]) for i in range(n)) if pointer else ()


def read_callback(address: int) -> CallbackData:
    return CallbackData.from_address(address)


def read_encode(api: str, params_address: int) -> tuple[int, dict]:
    """(where the map is written, the call's arguments by the driver's names) of an encode call."""
    p: EncodeTiledParams | EncodeIm2colWideParams | EncodeIm2colParams
    args: dict[str, Any]
    if api.startswith("cuTensorMapEncodeTiled"):
        p = EncodeTiledParams.from_address(params_address)
        r = p.tensorRank
        args = {"boxDim": _array(p.boxDim, r)}
    elif api.startswith("cuTensorMapEncodeIm2colWide"):
        p = EncodeIm2colWideParams.from_address(params_address)
        r = p.tensorRank
        args = {"pixelBoxLowerCornerWidth": p.pixelBoxLowerCornerWidth,
                "pixelBoxUpperCornerWidth": p.pixelBoxUpperCornerWidth, "mode": p.mode}
    elif api.startswith("cuTensorMapEncodeIm2col"):
        p = EncodeIm2colParams.from_address(params_address)
        r = p.tensorRank
        args = {"pixelBoxLowerCorner": _array(p.pixelBoxLowerCorner, max(r - 2, 0)),
                "pixelBoxUpperCorner": _array(p.pixelBoxUpperCorner, max(r - 2, 0))}
    else:
        raise KeyError(api)
    if api.startswith("cuTensorMapEncodeIm2col"):
        args |= {"channelsPerPixel": p.channelsPerPixel, "pixelsPerColumn": p.pixelsPerColumn}
    args |= {"tensorDataType": p.tensorDataType, "tensorRank": r, "globalAddress": p.globalAddress or 0,
             "globalDim": _array(p.globalDim, r), "globalStrides": _array(p.globalStrides, max(r - 1, 0)),
             "elementStrides": _array(p.elementStrides, r), "interleave": p.interleave, "swizzle": p.swizzle,
             "l2Promotion": p.l2Promotion, "oobFill": p.oobFill}
    return p.tensorMap or 0, args


def read_replace(params_address: int) -> tuple[int, int]:
    p = ReplaceAddressParams.from_address(params_address)
    return p.tensorMap or 0, p.globalAddress or 0


def read_launch(api: str, params_address: int) -> dict:
    """The function, grid, block, dynamic shared memory and stream of a launch, and where its arguments are: `kernel_params`
    (the address of the void* array, or 0) and `buffer` (the bytes of a packed `extra` buffer, or None)."""
    p: LaunchKernelExParams | LaunchKernelParams | _CooperativeParams
    if api.startswith("cuLaunchKernelEx"):
        p = LaunchKernelExParams.from_address(params_address)
        c = p.config.contents if p.config else LaunchConfig()
        geometry = c
    else:
        p = (LaunchKernelParams if api.startswith("cuLaunchKernel") else _CooperativeParams).from_address(params_address)
        geometry = p
    out = {"function": p.f or 0,
           "grid": (geometry.gridDimX, geometry.gridDimY, geometry.gridDimZ),
           "block": (geometry.blockDimX, geometry.blockDimY, geometry.blockDimZ),
           "shared_bytes": geometry.sharedMemBytes, "stream": geometry.hStream or 0,
           "kernel_params": ctypes.cast(p.kernelParams, c_void_p).value or 0, "buffer": None}
    extra = getattr(p, "extra", None)
    if extra:
        out["buffer"] = read_extra(extra)
    return out


class _CooperativeParams(ctypes.Structure):  # cuLaunchCooperativeKernel: cuLaunchKernel's record without `extra`
    _fields_ = LaunchKernelParams._fields_[:-1]


def read_extra(extra) -> bytes | None:
    """The packed argument buffer an `extra` list names (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE), or None."""
    pointer, size = None, None
    for i in range(0, 64, 2):  # a well-formed list ends long before 32 pairs
        key = extra[i] or 0
        if key == CU_LAUNCH_PARAM_END:
            break
        if key == CU_LAUNCH_PARAM_BUFFER_POINTER:
            pointer = extra[i + 1]
        elif key == CU_LAUNCH_PARAM_BUFFER_SIZE:
            size_at = extra[i + 1]
            size = c_uint64.from_address(size_at).value if size_at else None  # a size_t*
        else:
            return None
    if not pointer or not size:
        return None
    return ctypes.string_at(pointer, size)


def read_arguments(kernel_params: int, layout: list[tuple[int, int]]) -> bytes:
    """The arguments of a launch by `kernelParams`, packed at the offsets of the function's layout."""
    if not kernel_params or not layout:
        return b""
    pointers = (c_void_p * len(layout)).from_address(kernel_params)
    out = bytearray(max(o + s for o, s in layout))
    for (offset, size), at in zip(layout, pointers):
        if at:
            out[offset:offset + size] = ctypes.string_at(at, size)
    return bytes(out)


def read_module(address: int) -> bytes | None:
    """The image of a MODULE_LOADED resource callback (a cubin, or a fatbin), or None."""
    r = ResourceData.from_address(address)
    if not r.resourceDescriptor:
        return None
    m = ModuleResourceData.from_address(r.resourceDescriptor)
    return ctypes.string_at(m.pCubin, m.cubinSize) if m.pCubin and m.cubinSize else None
