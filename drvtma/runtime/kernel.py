"""Kernels, as they were imported before the split along cuda.core's seams: loading (runtime.module), argument
packing (runtime.args), launch configuration and launches (runtime.launch). This module only re-exports them."""

from __future__ import annotations

from .args import ArgPacker
from .launch import LaunchConfig, PreparedLaunch
from .module import PARAM_COUNT_DRIVER_VERSION, Kernel, Module, build_target, load_module

__all__ = ["PARAM_COUNT_DRIVER_VERSION", "ArgPacker", "Kernel", "LaunchConfig", "Module", "PreparedLaunch",
           "build_target", "load_module"]
