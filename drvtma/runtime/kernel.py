"""Load cubins with the library API and launch kernels with typed, checked arguments."""

from __future__ import annotations

import functools
import hashlib
import os
import struct
import threading
from dataclasses import dataclass
from operator import is_
from pathlib import Path
from typing import Any, cast

import numpy as np

from .. import settings
from ..compat import kernel_param_count
from ..errors import CudaError, LaunchError, is_int
from . import cluster_launch, compiler, families, images
from .arrays import strided_view
from .driver import DeviceBuffer, Resource, Stream, call, context, cu, cuda_error, device_capabilities

_launch_kernel_ex: Any = cu.cuLaunchKernelEx if cu is not None else None  # looked up once: this is every launch's call
_SMEM_WITHOUT_OPT_IN = 48 * 1024  # static + dynamic above this needs the opt-in attribute
# cuKernelGetParamCount exists from CUDA 13.2 drivers on; older ones get the layout from the cubin's own records.
PARAM_COUNT_DRIVER_VERSION = 13020


def _dim3(value, what: str) -> tuple[int, int, int]:
    if is_int(value):
        dims = (value,)
    elif isinstance(value, (tuple, list)):
        dims = tuple(value)
    else:
        raise LaunchError(f"{what} must be a positive int or 1-3 positive ints, got {value!r}")
    if not 1 <= len(dims) <= 3 or not all(is_int(d) and d >= 1 for d in dims):
        raise LaunchError(f"{what} must be a positive int or 1-3 positive ints, got {value!r}")
    return cast("tuple[int, int, int]", tuple(int(d) for d in dims) + (1,) * (3 - len(dims)))  # padded to 3


@dataclass(frozen=True)
class LaunchConfig:
    """Grid, block, dynamic shared memory, stream and cluster shape of one launch, normalised and checked."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0
    cluster: tuple[int, int, int] | None = None

    @classmethod
    def make(cls, grid, block, shared_mem=0, cluster=None) -> LaunchConfig:
        g, b = _dim3(grid, "grid"), _dim3(block, "block")
        if b[0] * b[1] * b[2] > 1024:
            raise LaunchError(f"block {b} has {b[0] * b[1] * b[2]} threads; the limit is 1024")
        if g[1] > 65535 or g[2] > 65535 or g[0] > 2**31 - 1:
            raise LaunchError(f"grid {g} exceeds (2^31-1, 65535, 65535)")
        if not is_int(shared_mem) or shared_mem < 0:
            raise LaunchError(f"shared_mem must be an int >= 0 (bytes of dynamic shared memory), got {shared_mem!r}")
        c = None if cluster is None else _dim3(cluster, "cluster")
        if c is not None:  # the shape rules; the size limit that depends on the kernel waits for prepare()
            cluster_launch.check_cluster_shape(g, c, non_portable=True)
        return cls(g, b, int(shared_mem), c)


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
    """Module.load, cached per process by source, build settings and target (a binary by its bytes' hash, a file by
    its absolute path: the same name from another directory is another file)."""
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


_INT_FORMATS = {1: ("<b", "<B"), 2: ("<h", "<H"), 4: ("<i", "<I"), 8: ("<q", "<Q")}
_FLOAT_FORMATS = {4: "<f", 8: "<d"}


class ArgPacker:
    """Packs launch arguments into one 128-byte-aligned image laid out as a kernel's parameter space.

    `params` is [(offset, size)] (cuKernelGetParamInfo's, or the cubin's). Needs no GPU, so its checks are tested on
    the CPU. kernelParams[i] points into the image, except for by-value objects (``__drvtma_param__``, e.g. a
    TensorMap): there it points at the object's own bytes, which the driver copies at each launch, so a map passed
    again (even after `replace_address`) costs no copy here.
    """

    def __init__(self, kernel_name: str, params: list[tuple[int, int]]):
        self.kernel_name, self.params = kernel_name, list(params)
        size = max((o + s for o, s in self.params), default=0)
        self._raw = np.zeros(size + 128, dtype=np.uint8)
        base = (-self._raw.ctypes.data) % 128
        self.image = self._raw[base:base + size]
        self._image_addr = self.image.ctypes.data
        self._view = self.image.data.cast("B")  # .data: numpy's stubs make ndarray a Buffer only on Python 3.12+
        self._in_image = [self._image_addr + o for o, _ in self.params]
        self._entries = list(self._in_image)  # what kernelParams holds now
        self._pointers = np.array(self._entries, dtype=np.uint64)
        self.pointers_address = self._pointers.ctypes.data if self.params else 0
        # Never the caller's objects: "same arguments as last time" cannot hold before a first pack; it has the
        # kernel's length, so an empty call of a kernel with parameters is counted.
        self._no_last = tuple(object() for _ in self.params)
        self._last: tuple = self._no_last
        self._buffers: list = []  # (index, the buffer's finalizer): a closed buffer is refused on every launch
        self._arrays: list = []  # (index, offset, array, reader): an array's address is read at every launch
        self._readers: dict[int, tuple] = {}  # index -> (type, reader): an array type's checks, once per position

    def pack(self, args) -> int:
        """Write args into the image; return the address of the argument-pointer array (kernelParams).

        The very same objects as last time need only what can change under the same object: a buffer closed since,
        an array's address (a tensor can be resized in place). Ints, floats and numpy scalars are immutable, so the
        image still holds them; by-value objects are read by the driver where they live."""
        last = self._last
        if len(args) != len(last) or not all(map(is_, args, last)):
            return self._pack_new(args)
        for i, alive in self._buffers:
            if not alive.alive:
                raise LaunchError(f"{self.kernel_name}: argument {i} is a closed DeviceBuffer")
        for i, offset, arr, reader in self._arrays:
            struct.pack_into("<Q", self._view, offset, reader(self.kernel_name, i, arr))
        return self.pointers_address

    def _pack_new(self, args) -> int:
        if len(args) != len(self.params):
            raise LaunchError(f"{self.kernel_name} takes {len(self.params)} argument(s) "
                              f"(sizes {[s for _, s in self.params]}), got {len(args)}")
        self._last, buffers, arrays = self._no_last, [], []  # none while half packed: an argument may be refused
        view, pack_into, entries = self._view, struct.pack_into, self._entries
        for i, arg in enumerate(args):
            offset, size = self.params[i]
            where = self._in_image[i]
            if isinstance(arg, DeviceBuffer):
                if size != 8:
                    raise self._mismatch(i, size, "a device pointer (8 bytes)")
                if arg.closed:
                    raise LaunchError(f"{self.kernel_name}: argument {i} is a closed DeviceBuffer")
                pack_into("<Q", view, offset, arg.ptr)
                buffers.append((i, arg._finalizer))
            elif isinstance(arg, int):  # bool too; numpy scalars take the exact-size path below
                fmt = _INT_FORMATS.get(size)
                if fmt is None:
                    raise self._mismatch(i, size, "an int")
                if not -(1 << (8 * size - 1)) <= arg < (1 << (8 * size)):
                    raise LaunchError(f"{self.kernel_name}: argument {i} = {arg} does not fit its {size}-byte "
                                      "parameter")
                pack_into(fmt[0] if arg < 0 else fmt[1], view, offset, arg)
            elif isinstance(arg, float):
                float_fmt = _FLOAT_FORMATS.get(size)
                if float_fmt is None:
                    raise self._mismatch(i, size, "a float")
                pack_into(float_fmt, view, offset, arg)
            elif isinstance(arg, np.generic):
                if arg.dtype.itemsize != size:
                    raise self._mismatch(i, size, f"numpy {arg.dtype} ({arg.dtype.itemsize} bytes)")
                view[offset:offset + size] = arg.tobytes()
            elif hasattr(arg, "__dlpack__") or hasattr(arg, "__cuda_array_interface__"):
                if size != 8:  # torch, CuPy, JAX, cuda.core: the array's device address, as a DeviceBuffer gives
                    raise self._mismatch(i, size, f"a device array ({type(arg).__name__}, passed as its pointer)")
                reader = self._reader(i, arg)
                pack_into("<Q", view, offset, reader(self.kernel_name, i, arg))
                arrays.append((i, offset, arg, reader))
            elif hasattr(arg, "__drvtma_param__"):
                where, nbytes = arg.__drvtma_param__()  # the object's bytes stay where they are while it lives
                if nbytes != size:
                    raise self._mismatch(i, size, f"{type(arg).__name__} ({nbytes} bytes)")
            else:
                raise LaunchError(f"{self.kernel_name}: argument {i} has unsupported type {type(arg).__name__}; "
                                  "pass an int, float, numpy scalar, DeviceBuffer, device array or TensorMap")
            if entries[i] != where:
                entries[i] = where
                self._pointers[i] = where
        # _last keeps the arguments alive too: by-value objects' bytes are what kernelParams points at
        self._last, self._buffers, self._arrays = tuple(args), buffers, arrays
        return self.pointers_address

    def _reader(self, i: int, arr):
        """The address reader of argument i's array type: on its first sight here every check through a
        StridedMemoryView, after that only the reader (a new array of the same type builds no view)."""
        known = self._readers.get(i)
        if known is not None and known[0] is type(arr):
            return known[1]
        _array_address(self.kernel_name, i, arr)
        reader = _pointer_reader(arr)
        self._readers[i] = (type(arr), reader)
        return reader

    def _mismatch(self, i: int, size: int, got: str) -> LaunchError:
        return LaunchError(f"{self.kernel_name}: argument {i} is a {size}-byte parameter in the kernel, got {got}")


def _array_address(kernel_name: str, i: int, arr) -> int:
    """The device address of an array from DLPack or the CUDA Array Interface (runtime.arrays; no stream ordering:
    the launch goes on the stream it is given)."""
    if isinstance(arr, np.ndarray):
        raise LaunchError(f"{kernel_name}: argument {i} is a NumPy array in host memory; upload it "
                          "(DeviceBuffer.from_array) and pass the buffer")
    view = strided_view(arr)
    if view is None or not view.is_device_accessible:
        raise LaunchError(f"{kernel_name}: argument {i} ({type(arr).__name__}) is in host memory")
    return int(view.ptr)


def _tensor_address(kernel_name: str, i: int, t) -> int:
    """A torch tensor's address; its device is asked every time (`t.data = ...` can move the same tensor)."""
    if not t.is_cuda:
        raise LaunchError(f"{kernel_name}: argument {i} ({type(t).__name__}) is in host memory")
    return int(t.data_ptr())


def _interface_address(kernel_name: str, i: int, arr) -> int:
    """A CUDA Array Interface exporter's address (device memory by the interface's contract)."""
    return int(arr.__cuda_array_interface__["data"][0])


def _pointer_reader(arr):
    """How an array type's address is read at each launch, from what the type offers: torch's data_ptr(), the
    CUDA Array Interface's data (CuPy, Numba), else a new StridedMemoryView (a bare DLPack exporter has no cheaper
    route). Each gives the first element's address, as the view's ptr does."""
    if callable(getattr(arr, "data_ptr", None)) and hasattr(arr, "is_cuda"):
        return _tensor_address
    if hasattr(arr, "__cuda_array_interface__"):
        return _interface_address
    return _array_address


class Kernel:
    """One kernel of a Module: its parameter layout and a checked launch."""

    def __init__(self, module: Module, name: str, handle):
        self.module, self.name, self.handle = module, name, handle
        self.params = self._param_info()
        self.packer = ArgPacker(name, self.params)
        self._function = call(cu.cuKernelGetFunction, handle)
        self._smem_optin = 0  # the dynamic cap drvtma has raised so far
        self._required_cluster = False  # __cluster_dims__, read once by cluster_launch (False: not read yet)
        self._cluster_non_portable = False  # set by cluster_launch.allow_non_portable
        self.forget_configs()

    def forget_configs(self) -> None:
        """Drop every checked launch shape (after a change of what the checks depend on, e.g. non-portable)."""
        self._configs: dict[tuple, object] = {}
        self._last_shape: tuple = (object(),) * 5  # (grid, block, shared_mem, stream, cluster) of the last launch
        self._last_config: object = None  # a CUlaunchConfig, as _configs holds

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

    def _ensure_smem(self, nbytes: int) -> None:
        """Raise the dynamic shared-memory cap when static + dynamic passes 48 KiB (the driver refuses the launch
        with a bare CUDA_ERROR_INVALID_VALUE otherwise), after checking the total against the device."""
        if nbytes <= self._smem_optin:
            return
        total = nbytes + self.static_shared_bytes
        limit = context().properties.smem_per_block_optin
        if total > limit:
            raise LaunchError(f"{self.name}: {nbytes} B of dynamic shared memory + {self.static_shared_bytes} B "
                              f"static exceeds the device's {limit} B per block")
        if total <= _SMEM_WITHOUT_OPT_IN:
            return
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        call(cu.cuKernelSetAttribute, attr, nbytes, self.handle, context().device)
        self._smem_optin = nbytes

    def _launch_config(self, grid, block, shared_mem, cluster, stream):
        """Check a launch shape once and build its CUlaunchConfig (filling one costs more than the launch)."""
        cfg = LaunchConfig.make(grid, block, shared_mem, cluster)
        self._ensure_smem(cfg.shared_mem)
        lc = cu.CUlaunchConfig()
        lc.gridDimX, lc.gridDimY, lc.gridDimZ = cfg.grid
        lc.blockDimX, lc.blockDimY, lc.blockDimZ = cfg.block
        lc.sharedMemBytes = cfg.shared_mem
        lc.hStream = stream.handle if stream is not None else 0
        lc.attrs, lc.numAttrs = [], 0
        cluster_launch.prepare(self, cfg, lc)  # cluster rules, __cluster_dims__, occupancy; sets the attribute
        return lc

    def launch(self, *args, grid, block, shared_mem: int = 0, stream: Stream | None = None, cluster=None) -> None:
        """Launch asynchronously on `stream` (default: the legacy stream). Raises before the driver on bad input."""
        # The hot path of every launch: the same shape objects as last time (ints from the caller's constants are)
        # need no work; the same argument objects as last time, only ArgPacker.pack's per-launch checks.
        last = self._last_shape
        if (grid is last[0] and block is last[1] and shared_mem is last[2] and stream is last[3]
                and cluster is last[4]):
            lc = self._last_config
        else:
            key: Any = (grid, block, shared_mem, stream, cluster)  # the key holds the stream, so its handle stays valid
            try:
                lc = self._configs[key]
            except KeyError:
                lc = self._remember_config(grid, block, shared_mem, stream, cluster)
            except TypeError:  # a list shape is not hashable (and may change): checked every time, not remembered
                lc, key = self._launch_config(grid, block, shared_mem, cluster, stream), None
            if key is not None:
                self._last_shape, self._last_config = key, lc
        params = self.packer.pack(args)
        code, = _launch_kernel_ex(lc, self._function, params, 0)
        if code:
            raise cuda_error("cuLaunchKernelEx", code)

    def _remember_config(self, grid, block, shared_mem, stream, cluster):
        lc = self._launch_config(grid, block, shared_mem, cluster, stream)
        if len(self._configs) >= 64:
            self._configs.clear()
        self._configs[(grid, block, shared_mem, stream, cluster)] = lc
        return lc

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, params={self.params})"
