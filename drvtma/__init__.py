"""drvtma: see, check and time what Hopper's Tensor Memory Accelerator does, from Python.

Talks to the GPU only through cuda-python's driver API and NVRTC. Compiling needs no GPU; everything that runs
a kernel raises NoGpuError when there is none. One room per concern (docs/CONTRACT.md has the map):
`runtime` (driver, NVRTC, launches, timing), `tma` (tensor maps, their rules, oracles and probes), `b08` (the
article's experiment and its rings), `testing` (strategies), `cli` (the command line).
"""

from .errors import (ArgumentError, BarrierTimeout, ClusterError, CudaError, DrvtmaError, GemmError, LaunchError,
                     NoGpuError, NvrtcError, RuleError, StoreStraddleWarning, TensorMapError, TimedOutWait, WgmmaError)
from .runtime import (DeviceBuffer, DeviceProperties, Event, Kernel, LaunchConfig, Module, StatusBuffer, Stream,
                      compile_cubin, context, cu_dir, device_properties, elapsed_ms, include_dir, load_module,
                      require_hopper, synchronize)
from .tma import (Interleave, L2Promotion, OobFill, Swizzle, TensorMap, TensorMapSpec, encode_tiled,
                  tma_dtype, validate_all)

__version__ = "0.1.0"

__all__ = [
    "ArgumentError", "BarrierTimeout", "ClusterError", "CudaError", "DeviceBuffer", "DeviceProperties",
    "DrvtmaError", "Event", "GemmError", "Interleave", "Kernel", "L2Promotion", "LaunchConfig", "LaunchError",
    "Module", "NoGpuError",
    "NvrtcError", "OobFill", "RuleError", "StatusBuffer", "StoreStraddleWarning", "Stream", "Swizzle", "TensorMap",
    "TensorMapError", "TensorMapSpec", "TimedOutWait", "WgmmaError", "compile_cubin", "context", "cu_dir",
    "device_properties", "elapsed_ms", "encode_tiled", "include_dir", "load_module", "require_hopper",
    "synchronize", "tma_dtype", "validate_all"
]
