"""Loading kernels (cuda.core's `_module` seam): `Module` (an image loaded with the library API: cubin, fatbin or
PTX, or CUDA C++ compiled for the device's build target), `Kernel` (one kernel: its parameter layout and
attributes; it launches through runtime.launch) and `load_module` (modules cached per process)."""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path
from typing import cast

from .. import settings
from ..compat import kernel_param_count
from ..errors import CudaError, LaunchError
from . import compiler, families, images
from .args import ArgPacker
from .driver import Resource, call, context, cu, device_capabilities
from .launch import Launches

# cuKernelGetParamCount exists from CUDA 13.2 drivers on; older ones get the layout from the cubin's own records.
PARAM_COUNT_DRIVER_VERSION = 13020


class Module(Resource):
    """A loaded image (cuLibraryLoadData): a cubin, a fatbin, or PTX the driver JIT-compiles. `image` is what the
    driver gets; `cubin` is what parameter layouts are read from (for drvtma's portable PTX builds, the same source
    built as SASS). `params`: {kernel: [size, ...]} for kernels whose binary records no layout
    (images.declared_layout). Kernels taken from it keep it alive."""

    def __init__(self, cubin: bytes, name: str = "<cubin>", *, image: bytes | None = None, target: str = "",
                 params=None):
        self.image = cubin if image is None else image
        self.kind = images.image_kind(cubin) or "cubin"
        self.declared = images.declared_layout(params)
        context()
        self.name = name
        self.cubin = cubin
        self.target = target
        ptx = images.image_kind(self.image) == "ptx"  # the driver reads PTX as C text, up to its NUL
        data = self.image + b"\0" if ptx and not self.image.endswith(b"\0") else self.image
        self.handle = call(cu.cuLibraryLoadData, data, None, None, 0, None, None, 0)
        self._own(cu.cuLibraryUnload, self.handle)
        self._kernels: dict[str, Kernel] = {}

    @property
    def from_ptx(self) -> bool:
        """True when the driver was handed PTX, so its JIT compiled what runs."""
        return images.image_kind(self.image) == "ptx"

    @classmethod
    def load(cls, source, *, options=(), defines=None, name=None, include_dirs=(), params=None,
             target: str | None = None) -> Module:
        """Load a cubin / fatbin / PTX (a file or bytes), or compile CUDA C++ (a file here or under cu/, or text) for
        `target` (default: `families.build_target`, after its capability checks) and load it."""
        built = images.read_image(source)
        if built is not None:
            return cls._from_image(built, name, params)
        target = target or build_target(source)
        build = dict(name=name, options=options, defines=defines, include_dirs=include_dirs)
        image = compiler.compile_cubin(source, arch=target, **build)
        cubin = image
        if target.startswith("compute_"):  # PTX has no parameter records: the same source as SASS has them
            cubin = compiler.compile_cubin(source, arch="sm_" + target[len("compute_"):], **build)
        label = str(name or source if not isinstance(source, bytes) else "<source>")[:80]
        return cls(cubin, name=label, image=image, target=target, params=params)

    @classmethod
    def _from_image(cls, built: tuple, name, params) -> Module:
        """Load what images.read_image read."""
        return cls(built[1], name=str(name or built[2])[:80], params=params)

    def kernel(self, name: str) -> Kernel:
        if name not in self._kernels:
            try:
                handle = call(cu.cuLibraryGetKernel, self.handle, name.encode())
            except CudaError as exc:
                if exc.name != "CUDA_ERROR_NOT_FOUND":  # e.g. a bad image, reported here under lazy loading
                    raise
                raise LaunchError(f"kernel {name!r} not found in {self.name}; is it declared extern \"C\"?") \
                    from None
            self._kernels[name] = Kernel(self, name, handle)
            _log_kernel(name)
        return self._kernels[name]

    def close(self) -> None:
        """Unload now; CudaError if the driver refuses (a second close does nothing)."""
        self._kernels.clear()
        super().close()


def _log_kernel(name: str) -> None:
    """Append a kernel's name to $DRVTMA_KERNEL_LOG (scripts/sanitize.py lists what each family ran)."""
    path = settings.KERNEL_LOG.get()
    if path:
        with open(path, "a") as f:
            f.write(name + "\n")


_modules: dict[tuple, Module] = {}
# a name's _modules key per (directory, build, DRVTMA_ARCH): a launch loop skips the 0.3 ms file and target search
_resolved: dict[tuple, tuple] = {}
_modules_lock = threading.Lock()


def build_target(source) -> str:
    """The target `source` is built for on device 0 (drvtma.runtime.families: refused by a named capability rule
    on a GPU without what it needs)."""
    if isinstance(source, str) and "\n" not in source and source.endswith(".cu"):
        compiler.find_source(source)  # a missing kernel is the caller's ArgumentError, before any GPU work
    return families.build_target(source, device_capabilities())


def load_module(source, *, options=(), defines=None, include_dirs=(), params=None) -> Module:
    """Compile (NVRTC, disk-cached) or read a binary, and load it with the driver: `Module.load`, cached per process.

    Parameters
    ----------
    source : str, Path or bytes
        CUDA C++ (a file here or under drvtma's cu/, or the text itself), or a cubin / fatbin / PTX (a file or bytes).
    options, defines, include_dirs
        NVRTC options, ``-D`` macros (a dict), and folders for quoted includes (``-I``).
    params : dict, optional
        Kernel name -> parameter sizes, for a binary whose records do not say (PTX, compressed fatbins).

    Returns
    -------
    Module
        Its kernels by `Module.kernel(name)`. The same source and build settings give the same Module (a binary
        by its bytes' hash, a file by its absolute path: the same name from another directory is another file).

    Raises
    ------
    NvrtcError
        The compile failed (NVRTC's log attached).
    CapabilityError, NoGpuError
        No GPU, or the GPU lacks what the kernel family needs.
    CudaError
        The driver refused to load the image.
    """
    build = (tuple(options), tuple(sorted((defines or {}).items())), repr(include_dirs), repr(params))
    name_key = (str(source), os.getcwd(), build, settings.ARCH.get()) if isinstance(source, (str, Path)) else None
    with _modules_lock:
        mod = _modules.get(_resolved.get(name_key, ())) if name_key is not None else None  # (): no module's key
        if mod is not None and not mod.closed:
            return mod
    if isinstance(source, (bytes, bytearray, memoryview)):
        what = hashlib.sha256(source).hexdigest()
    else:
        what = str(Path(source).resolve()) if isinstance(source, (str, Path)) and "\n" not in str(source) \
            and Path(source).is_file() else str(source)
    built = images.read_image(source)  # read once: Module.load would read it again
    target = None if built is not None else build_target(source)
    key = (what, *build, target)
    with _modules_lock:
        mod = _modules.get(key)
        if mod is None or mod.closed:
            mod = _modules[key] = Module._from_image(built, None, params) if built is not None else \
                Module.load(source, options=options, defines=defines, include_dirs=include_dirs, params=params,
                            target=target)
        if name_key is not None:
            _resolved[name_key] = key
        return mod


class Kernel(Launches):
    """One kernel of a Module (cuda.core's Kernel): its parameter layout and attributes; its launches are
    runtime.launch's (`launch`, `prepare`)."""

    def __init__(self, module: Module, name: str, handle):
        self.module, self.name, self.handle = module, name, handle
        self.params = self._param_info()
        self.packer = ArgPacker(name, self.params)
        self._function = call(cu.cuKernelGetFunction, handle)
        self._smem_optin = 0  # the dynamic cap drvtma has raised so far
        self._required_cluster = False  # __cluster_dims__, read once by cluster_launch (False: not read yet)
        self._cluster_non_portable = False  # set by cluster_launch.allow_non_portable
        self.forget_configs()

    def _param_info(self) -> list[tuple[int, int]]:
        """The parameter layout, without a failing driver call: the count from cuKernelGetParamCount where the
        driver has it, else the cubin's KPARAM_INFO records (drvtma.runtime.cubin); never "ask until it fails"."""
        query = kernel_param_count(cu)
        if query is not None and context().properties.driver_version >= PARAM_COUNT_DRIVER_VERSION:
            count = int(call(query, self.handle))
            return [(int(o), int(s)) for o, s in (call(cu.cuKernelGetParamInfo, self.handle, i)
                                                  for i in range(count))]
        declared = self.module.declared.get(self.name)
        try:
            params = images.image_params(self.module.kind, self.module.cubin, self.name)
        except ValueError as exc:
            if declared is not None:
                return declared
            raise LaunchError(f"{self.name}: cannot read its parameter layout from {self.module.name} ({exc}); "
                              "declare it (params={name: [size, ...]}) or use a CUDA 13.2+ driver") from None
        if params is None and declared is None:
            raise LaunchError(f"{self.name}: {self.module.name} holds no parameter records for it; declare them: "
                              f"params={{{self.name!r}: [size, ...]}}")
        if declared is not None and params is not None and [s for _, s in declared] != [s for _, s in params]:
            raise LaunchError(f"{self.name}: declared parameter sizes {[s for _, s in declared]} differ from "
                              f"{[s for _, s in params]} recorded in {self.module.name}; fix the declaration")
        return params if params is not None else cast("list[tuple[int, int]]", declared)  # both None raised above

    @property
    def function(self):
        """The CUfunction for the current context (for a bare cuLaunchKernel)."""
        return self._function

    @functools.cached_property
    def static_shared_bytes(self) -> int:
        """Shared memory the kernel declares itself (`__shared__`), on top of the dynamic amount of a launch."""
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
        return int(call(cu.cuKernelGetAttribute, attr, self.handle, context().device))

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, params={self.params})"
