"""The GPU through cuda-python: the driver API (checked calls, context, buffers, streams, events), NVRTC compiles
behind a cache, kernel loading (module), argument packing (args), checked and prepared launches (launch), SASS
inspection, event timing and the device status block.

Nothing in this room knows what a tensor map is; every other room builds on it.
"""

from .compiler import compile_cubin, cu_dir, find_source, include_dir
from .driver import (
    DeviceBuffer,
    DeviceProperties,
    Event,
    ScratchBuffers,
    Stream,
    call,
    context,
    device_properties,
    elapsed_ms,
    require_capability,
    synchronize,
    versions,
)
from .launch import LaunchConfig, PreparedLaunch
from .module import Kernel, Module, load_module
from .status import StatusBuffer, barrier_timeout
from .timing import Timing, time_copy, time_launches

__all__ = [
    "DeviceBuffer", "DeviceProperties", "Event", "Kernel", "LaunchConfig", "Module", "PreparedLaunch", "ScratchBuffers",
    "StatusBuffer", "Stream", "Timing", "barrier_timeout", "call", "compile_cubin", "context", "cu_dir",
    "device_properties", "elapsed_ms", "find_source", "include_dir", "load_module", "require_capability", "synchronize",
    "time_copy", "time_launches", "versions"
]
