"""The CUDA driver, through cuda-python: checked calls, the primary context, buffers, streams and events."""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, CudaError, NoGpuError, as_int
from . import capabilities

try:  # the bindings import without a driver; the first call then fails (see _load_failure)
    from cuda.bindings import driver as cu
except ImportError as exc:  # pragma: no cover - cuda-python is a hard dependency
    cu = None
    _IMPORT_ERROR: Exception | None = exc
else:
    _IMPORT_ERROR = None


def _describe(code) -> tuple[str, str]:
    name = getattr(code, "name", str(code))
    try:
        err, text = cu.cuGetErrorString(code)
        desc = text.decode() if text else "no description"
    except Exception:  # the driver may be the thing that is broken
        desc = "no description"
    return name, desc


def cuda_error(call_name: str, code) -> CudaError:
    """The CudaError for a failed driver call (for hot paths that check the code themselves)."""
    name, desc = _describe(code)
    return CudaError(call_name, int(code), name, desc)


@functools.cache
def _libcuda_loads() -> bool:
    """Whether the driver library can be loaded at all (asked once per process)."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def call(fn, *args):
    """Run a cuda-python driver function; return its value(s), or raise CudaError naming the call."""
    if cu is None:
        raise NoGpuError(f"cuda-python is not importable: {_IMPORT_ERROR}")
    try:
        result = fn(*args)
    except RuntimeError as exc:  # cuda.pathfinder: libcuda.so not found; cuda-bindings 13.0.0: "Failed to dlopen"
        text = str(exc).lower()
        # cuda-bindings 13.0.0 says "Failed to dlopen" once, then 'Function "cuInit" not found' on every later call
        # in the process: no driver when libcuda cannot be loaded (an old driver lacks a new function, and says so)
        if ("driver" in text or "libcuda" in text or type(exc).__name__ == "DynamicLibNotFoundError"
                or (text.startswith("function ") and text.endswith(" not found") and not _libcuda_loads())):
            raise NoGpuError("no CUDA driver on this machine (libcuda.so.1 not found)") from None
        raise
    code, values = result[0], result[1:]
    if code != cu.CUresult.CUDA_SUCCESS:
        raise cuda_error(fn.__name__, code)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


_lock = threading.Lock()


# ---- releasing what the driver handed out: one lifecycle for every owner (Resource). A handle's owner keeps a
# weakref.finalize(owner, released_quietly, fn, handle): the garbage collector or interpreter exit runs it, where no
# caller could take an error (at exit the driver may already be torn down), so its status is read and dropped. An
# explicit close() runs the same call through `release`, checked: a failing cuMemFree / cuStreamDestroy / ... raises
# CudaError there.
def released_quietly(fn, *args) -> None:
    """A finalizer's release: run the driver call, drop its status (and any exception)."""
    try:
        fn(*args)
    except Exception:
        pass


class LibraryCall:
    """The release call of a library other than the driver (cuBLASLt's destroy, ...): it raises its own error and
    returns no status, so `release` runs it as it is, where a driver call goes through `call`."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", repr(fn))

    def __call__(self, *args) -> None:
        self.fn(*args)


def release(finalizer: weakref.finalize) -> None:
    """Explicit close: run the finalizer's driver call now, checked (CudaError on failure; a library's call raises
    its own error); once only, and the finalizer will not run again."""
    info = finalizer.detach()
    if info is not None:
        _, _, (fn, *args), _ = info
        fn(*args) if isinstance(fn, LibraryCall) else call(fn, *args)


def close_all(resources) -> None:
    """close() every one of `resources` (None skipped; a finalizer: its checked `release`), then raise the first
    error: one failure leaks nothing."""
    first = None
    for r in resources:
        if r is None:
            continue
        try:
            release(r) if isinstance(r, weakref.finalize) else r.close()
        except Exception as exc:
            first = first or exc
    if first is not None:
        raise first


class Resource:
    """An owner of driver handles: close() releases them now, checked (CudaError names the failing call, after
    everything else was released), and a second close does nothing; a with-block closes; what is never closed is
    released quietly by the garbage collector or at interpreter exit. A handle's owner calls `_own(fn, handle)`; an
    owner of other resources names them in `_parts()` (closed before its own handle); a handle of another library
    (cuBLASLt, ...) is owned through `_own_library`, or held as a `LibraryHandle` part."""

    _finalizer: weakref.finalize | None = None

    def _own(self, fn, *args) -> None:
        """Release with the driver call fn(*args): checked at close(), quiet from the collector or at exit."""
        self._finalizer = weakref.finalize(self, released_quietly, fn, *args)

    def _own_library(self, fn, *args) -> None:
        """Release with a library's call fn(*args) that raises its own error (cuBLASLt's destroy, ...): raised at
        close(), dropped from the collector or at exit."""
        self._own(LibraryCall(fn), *args)

    def _parts(self) -> tuple:
        """The resources this one owns (None: not made), asked by close(): they are released with it."""
        return ()

    def close(self) -> None:
        """Release now; CudaError if the driver refuses (a second close does nothing)."""
        close_all((*self._parts(), self._finalizer))

    @property
    def closed(self) -> bool:
        """True once its own handle is released (an owner of parts only: never)."""
        return self._finalizer is not None and not self._finalizer.alive

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LibraryHandle(Resource):
    """One handle of a library other than the driver (a cuBLASLt descriptor, ...), released by `fn(handle)`, which
    raises its own error: on the one lifecycle like any driver handle (close_all over several leaks none)."""

    def __init__(self, fn, handle):
        self.handle = handle
        self._own_library(fn, handle)


@dataclass(frozen=True)
class DeviceProperties:
    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    smem_per_block: int
    smem_per_block_optin: int
    smem_per_sm: int
    clock_khz: int
    memory_clock_khz: int
    memory_bus_bits: int
    total_memory: int
    driver_version: int

    @property
    def driver_version_str(self) -> str:
        return f"{self.driver_version // 1000}.{self.driver_version % 1000 // 10}"

    cluster_launch: bool = True


class Context:
    """The primary context of one device, retained once per process and made current."""

    def __init__(self, ordinal: int = 0):
        try:
            call(cu.cuInit, 0)
            count = call(cu.cuDeviceGetCount)
        except CudaError as exc:
            raise NoGpuError(f"no usable GPU: {exc}") from None
        if count == 0:
            raise NoGpuError("the CUDA driver found no device")
        if ordinal >= count:
            raise NoGpuError(f"device {ordinal} requested, the driver sees {count}")
        self.ordinal = ordinal
        self.device = call(cu.cuDeviceGet, ordinal)
        self.handle = call(cu.cuDevicePrimaryCtxRetain, self.device)
        call(cu.cuCtxSetCurrent, self.handle)
        self._release = weakref.finalize(self, released_quietly, cu.cuDevicePrimaryCtxRelease, self.device)

    def make_current(self) -> None:
        call(cu.cuCtxSetCurrent, self.handle)

    @functools.cached_property
    def properties(self) -> DeviceProperties:
        a = cu.CUdevice_attribute

        def attr(x):
            return int(call(cu.cuDeviceGetAttribute, x, self.device))

        name = call(cu.cuDeviceGetName, 256, self.device)
        return DeviceProperties(
            ordinal=self.ordinal,
            name=name.split(b"\0", 1)[0].decode(),
            compute_capability=(attr(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                                attr(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
            sm_count=attr(a.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            l2_bytes=attr(a.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
            smem_per_block=attr(a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
            smem_per_block_optin=attr(a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            smem_per_sm=attr(a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            clock_khz=attr(a.CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            memory_clock_khz=attr(a.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            memory_bus_bits=attr(a.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
            total_memory=int(call(cu.cuDeviceTotalMem, self.device)),
            driver_version=int(call(cu.cuDriverGetVersion)),
            cluster_launch=bool(attr(a.CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)),
        )


_context: Context | None = None


def context() -> Context:
    """The current primary context of device 0 (created once). Raises NoGpuError without a usable GPU."""
    global _context
    with _lock:
        if _context is None:
            _context = Context(0)
        else:
            _context.make_current()
        return _context


def device_properties() -> DeviceProperties:
    return context().properties


def device_capabilities():
    """What device 0 offers (`capabilities.Arch`): the table's row for its compute capability, the device's own
    figures (SM count, shared memory per block with opt-in, cluster launch) in place of the table's."""
    ctx = context()
    row = getattr(ctx, "_capabilities", None)
    if row is None:
        from . import capabilities

        row = ctx._capabilities = capabilities.for_device(ctx.properties)
    return row


def current_target() -> str | None:
    """The arch-specific target of the device a context is open on (sm_90a on an H200), or None when no context is
    open yet: never opens one (a tensor-map spec's default target asks this)."""
    return None if _context is None else device_capabilities().target


_smem_optin: list[int] = []


def smem_per_block_optin() -> int:
    """Shared memory a block of device 0 can opt into; without a usable GPU, the Hopper row's documented figure (what
    a CPU-side check assumes). Asked once per process: every limit on shared memory goes through here."""
    if not _smem_optin:
        from . import capabilities

        try:
            _smem_optin.append(device_properties().smem_per_block_optin)
        except NoGpuError:
            _smem_optin.append(capabilities.HOPPER.smem_per_block_optin)
    return _smem_optin[0]


def require_capability(*features: str) -> DeviceProperties:
    """Device 0's properties, after NoGpuError without a usable GPU and CapabilityError (named `needs_<feature>`,
    e.g. "wgmma needs sm_90a; this is sm_120 (...)") for each of `features` (default: TMA) it lacks."""
    props = device_properties()
    row = device_capabilities()
    for feature in features or ("tma",):
        capabilities.require(feature, row)
    return props


def synchronize() -> None:
    context()
    call(cu.cuCtxSynchronize)


class DeviceBuffer(Resource):
    """Device memory owned by this object; freed by close(), a with-block, or the garbage collector."""

    def __init__(self, nbytes: int):
        self.nbytes = as_int(nbytes, "nbytes", rule="buffer_size", lo=1, fix="give a positive size in bytes")
        context()
        self.ptr = int(call(cu.cuMemAlloc, self.nbytes))
        self._own(cu.cuMemFree, self.ptr)

    @classmethod
    def from_array(cls, arr: np.ndarray) -> DeviceBuffer:
        arr = np.ascontiguousarray(arr)
        if arr.dtype.hasobject:
            raise ArgumentError("buffer_array", "arr", f"{arr.dtype} array", "give a NumPy array of numbers",
                                "an object array holds Python pointers, not data")
        buf = cls(max(arr.nbytes, 1))
        buf.upload(arr)
        return buf

    def _check_range(self, offset: int, nbytes: int, what: str) -> None:
        if offset < 0 or offset + nbytes > self.nbytes:
            raise ValueError(f"{what} of {nbytes} B at offset {offset} exceeds the {self.nbytes} B buffer")

    def upload(self, arr: np.ndarray, offset: int = 0) -> None:
        arr = np.ascontiguousarray(arr)
        self._check_range(offset, arr.nbytes, "upload")
        call(cu.cuMemcpyHtoD, self.ptr + offset, arr.ctypes.data, arr.nbytes)

    def download(self, dtype=np.uint8, shape=None, offset: int = 0, *, into=None) -> np.ndarray:
        """The bytes at `offset` as `shape` of `dtype` (synchronous); `into`: a host scratch whose
        array(dtype, shape) receives them (runtime.host.PinnedScratch: one DMA, no staging copy)."""
        dtype = np.dtype(dtype)
        if shape is None:
            shape = ((self.nbytes - offset) // dtype.itemsize,)
        out = np.empty(shape, dtype=dtype) if into is None else into.array(dtype, shape)
        self._check_range(offset, out.nbytes, "download")
        call(cu.cuMemcpyDtoH, out.ctypes.data, self.ptr + offset, out.nbytes)
        return out

    def fill_u8(self, byte: int) -> None:
        """Poison every byte with one value."""
        call(cu.cuMemsetD8, self.ptr, int(byte) & 0xFF, self.nbytes)

    def fill_u32(self, word: int) -> None:
        """Poison with a 32-bit pattern (the size must be a multiple of 4)."""
        if self.nbytes % 4:
            raise ValueError(f"fill_u32 needs a size that is a multiple of 4, got {self.nbytes}")
        call(cu.cuMemsetD32, self.ptr, int(word) & 0xFFFFFFFF, self.nbytes // 4)

    def __repr__(self) -> str:
        return f"DeviceBuffer(0x{self.ptr:x}, {self.nbytes} B{', closed' if self.closed else ''})"


class ScratchBuffers(Resource):
    """Named device scratch that only grows: `get(name, nbytes)` gives a buffer of at least nbytes (at least
    `minimum`), reused while it is large enough. Probes keep their coordinates, images and jobs here."""

    def __init__(self, minimum: int = 1 << 12):
        self.minimum = int(minimum)
        self._buffers: dict[str, DeviceBuffer] = {}

    def get(self, name: str, nbytes: int) -> DeviceBuffer:
        buf = self._buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            if buf is not None:
                buf.close()
            buf = self._buffers[name] = DeviceBuffer(max(int(nbytes), self.minimum))
        return buf

    def _parts(self) -> tuple:
        buffers = tuple(self._buffers.values())
        self._buffers.clear()  # closed now: a later get() allocates again
        return buffers


class Stream(Resource):
    """A non-blocking stream owned by this object."""

    def __init__(self):
        context()
        self.handle = call(cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self._own(cu.cuStreamDestroy, self.handle)

    def synchronize(self) -> None:
        call(cu.cuStreamSynchronize, self.handle)


class Event(Resource):
    """A timing event owned by this object."""

    def __init__(self):
        context()
        self.handle = call(cu.cuEventCreate, cu.CUevent_flags.CU_EVENT_DEFAULT)
        self._own(cu.cuEventDestroy, self.handle)

    def record(self, stream: Stream | None = None) -> None:
        call(cu.cuEventRecord, self.handle, stream.handle if stream is not None else 0)

    def synchronize(self) -> None:
        call(cu.cuEventSynchronize, self.handle)


def elapsed_ms(start: Event, end: Event) -> float:
    """Milliseconds between two recorded events (waits for the end event)."""
    end.synchronize()
    return float(call(cu.cuEventElapsedTime, start.handle, end.handle))


def versions() -> dict[str, str]:
    """cuda-bindings, cuda-core, NumPy, NVRTC and (when a driver is present) the driver version, for reports."""
    from importlib import metadata

    from cuda.bindings import nvrtc

    out = {}
    for dist in ("cuda-bindings", "cuda-core", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    try:
        _, major, minor = nvrtc.nvrtcVersion()
        out["nvrtc"] = f"{major}.{minor}"
    except Exception as exc:  # noqa: BLE001 - report whatever is wrong
        out["nvrtc"] = f"unavailable ({exc})"
    try:
        v = int(call(cu.cuDriverGetVersion))
        out["driver (CUDA API)"] = f"{v // 1000}.{v % 1000 // 10}"
    except (NoGpuError, CudaError) as exc:
        out["driver (CUDA API)"] = f"unavailable ({exc})"
    return out
