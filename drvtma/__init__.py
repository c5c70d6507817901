"""drvtma: see, check and time what Hopper's Tensor Memory Accelerator does, from Python.

Talks to the GPU only through cuda-python's driver API and NVRTC. Compiling needs no GPU; everything that runs
a kernel raises NoGpuError when there is none.
"""

from .compiler import compile_cubin, cu_dir, include_dir
from .driver import (DeviceBuffer, DeviceProperties, Event, Stream, context, device_properties, elapsed_ms,
                     require_hopper, synchronize)
from .errors import (BarrierTimeout, CudaError, DrvtmaError, LaunchError, NoGpuError, NvrtcError,
                     StoreStraddleWarning, TensorMapError, TimedOutWait)
from .kernel import Kernel, LaunchConfig, Module, load_module
from .status import StatusBuffer

__version__ = "0.1.0"

__all__ = [
    "BarrierTimeout", "CudaError", "DeviceBuffer", "DeviceProperties", "DrvtmaError", "Event", "Kernel",
    "LaunchConfig", "LaunchError", "Module", "NoGpuError", "NvrtcError", "StatusBuffer", "StoreStraddleWarning",
    "Stream", "TensorMapError", "TimedOutWait", "compile_cubin", "context", "cu_dir", "device_properties", "elapsed_ms", "include_dir",
    "load_module", "require_hopper", "synchronize",
]
