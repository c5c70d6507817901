"""drvtma: see, check and time what Hopper's Tensor Memory Accelerator does, from Python.

Talks to the GPU only through cuda-python's driver API and NVRTC. Compiling needs no GPU; everything that runs
a kernel raises NoGpuError when there is none. One room per concern (docs/CONTRACT.md has the map):
`runtime` (driver, NVRTC, launches, timing), `tma` (tensor maps, their rules, oracles and probes), `b08` (the
article's experiment and its rings), `testing` (strategies), `cli` (the command line).
"""

from .errors import (
    ArgumentError,
    BarrierTimeout,
    ClusterError,
    CudaError,
    DrvtmaError,
    GemmError,
    LaunchError,
    NoGpuError,
    NvrtcError,
    RuleError,
    StoreStraddleWarning,
    TensorMapError,
    TimedOutWait,
    WgmmaError,
)

# The rooms' names load on first use (PEP 562): `import drvtma.testing.plugin`, which pytest does in every project
# where drvtma is installed, then costs no NumPy, ml_dtypes or cuda-bindings import.
_LAZY = {
    "runtime": ("DeviceBuffer", "DeviceProperties", "Event", "Kernel", "LaunchConfig", "Module", "StatusBuffer",
                "Stream", "compile_cubin", "context", "cu_dir", "device_properties", "elapsed_ms", "include_dir",
                "load_module", "require_capability", "synchronize"),
    "tma": ("Interleave", "L2Promotion", "OobFill", "Swizzle", "TensorMap", "TensorMapSpec", "encode_tiled",
            "tma_dtype", "validate_all"),
}
_ROOM_OF = {name: room for room, names in _LAZY.items() for name in names}


def __getattr__(name: str):
    import importlib

    room = _ROOM_OF.get(name)
    if room is None:
        raise AttributeError(f"module 'drvtma' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{room}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ROOM_OF))


__version__ = "0.1.0"

__all__ = [
    "ArgumentError", "BarrierTimeout", "ClusterError", "CudaError", "DeviceBuffer", "DeviceProperties",
    "DrvtmaError", "Event", "GemmError", "Interleave", "Kernel", "L2Promotion", "LaunchConfig", "LaunchError",
    "Module", "NoGpuError",
    "NvrtcError", "OobFill", "RuleError", "StatusBuffer", "StoreStraddleWarning", "Stream", "Swizzle", "TensorMap",
    "TensorMapError", "TensorMapSpec", "TimedOutWait", "WgmmaError", "compile_cubin", "context", "cu_dir",
    "device_properties", "elapsed_ms", "encode_tiled", "include_dir", "load_module", "require_capability",
    "synchronize", "tma_dtype", "validate_all"
]
