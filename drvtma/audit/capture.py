"""Turn CUPTI's driver-API callbacks into audit events: every map a program encodes, every address it replaces,
every distinct kernel launch with its argument bytes. The `Capture` knows nothing of CUPTI itself (`session` wires
it to cupti-python); its `on_*` methods take the addresses of CUPTI's C records, so the CPU tests drive it with
records built in ctypes memory, a fake CUPTI.

Where a launch's parameters are: `kernelParams` (one pointer per parameter; the layout says each one's size) or a
packed `extra` buffer (cuBLAS packs its arguments so). Layouts come from the cubins CUPTI shows as modules load (the
compiler's KPARAM_INFO records, read by runtime.images), else from the driver (`param_layout`).
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
import time

from ..errors import DrvtmaError
from ..runtime import cubin as cubin_records
from ..runtime import images
from ..runtime.sass import functions
from . import structs
from .events import Counts, Encode, Launch, Replace
from .follow import MAX_FOLLOWED

ENCODES = ("cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col", "cuTensorMapEncodeIm2colWide")
REPLACES = ("cuTensorMapReplaceAddress",)
LAUNCHES = ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
            "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz")
RUNTIME_LAUNCHES = ("cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernelExC_v11060",
                    "cudaLaunchKernelExC_ptsz_v11060", "cudaLaunchCooperativeKernel_v9000",
                    "cudaLaunchCooperativeKernel_ptsz_v9000")
DRIVER_CALLS = ENCODES + REPLACES + LAUNCHES

# Python packages a call can come through, by a path fragment of the frame's file (first match wins)
LIBRARY_PATHS = (("drvtma", "/drvtma/"), ("triton", "/triton/"), ("jax", "/jax/"), ("jax", "/jaxlib/"),
                 ("cupy", "/cupy/"), ("cuda.core", "/cuda/core/"), ("torch", "/torch/"))
# Kernels that name their library (cuBLAS's nvjet and cublasLt kernels, cuDNN's): a launch from C++ inside torch
# or XLA has no Python frame of the library itself
KERNEL_LIBRARIES = (("cuBLAS", ("nvjet", "cublas", "gemmk1", "gemmSN")), ("cuDNN", ("cudnn", "_fprop_", "_dgrad_",
                                                                                   "_wgrad_", "conv2d")))
_OWN = ("/drvtma/audit/", "/cupti/")
PER_THREAD_STREAM = 0x2  # CU_STREAM_PER_THREAD


def map_ranges(arguments: bytes) -> list[tuple[int, int]]:
    """(offset, size) of the maps an argument buffer holds by value: their words are no pointers to follow."""
    from .judge import map_windows

    return [(o, structs.MAP_BYTES) for o in map_windows(arguments)]


def library_of_kernel(name: str) -> str | None:
    low = name.lower()
    for library, marks in KERNEL_LIBRARIES:
        if any(m.lower() in low for m in marks):
            return library
    return None


@functools.lru_cache(maxsize=4096)
def _file_kind(filename: str) -> tuple[bool, str | None, bool]:
    """(the audit's own, the library it belongs to, the user's own) for a frame's file: the same few files come
    back at every call, and a torch loop's stack is dozens deep."""
    path = filename.replace("\\", "/")
    if any(p in path for p in _OWN):
        return True, None, False
    hit = next((name for name, frag in LIBRARY_PATHS if frag in path), None)
    user = hit is None and "/site-packages/" not in path and "/lib/python" not in path and not path.startswith("<")
    return False, hit, user


def caller_frames(frame) -> tuple[str, str]:
    """(library, the user's frame "file:line in function") of the Python stack that made a call."""
    library, user = None, ""
    while frame is not None:
        own, hit, is_user = _file_kind(frame.f_code.co_filename)
        if not own:
            if is_user and not user:
                user = f"{frame.f_code.co_filename.replace(chr(92), '/')}:{frame.f_lineno} in {frame.f_code.co_name}"
            library = library or hit
            if library and user:
                break
        frame = frame.f_back
    return library or ("python" if user else "no Python frame"), user


def image_cubins(image: bytes) -> list[bytes]:
    """The cubin itself, or a fatbin's uncompressed cubins (PTX and compressed entries are not read)."""
    kind = images.image_kind(image)
    if kind == "cubin":
        return [image]
    if kind == "fatbin":
        return [p for k, _, p in images.fatbin_entries(image) if k == "cubin" and p is not None]
    return []


def cubin_layouts(cubin: bytes) -> dict[str, list[tuple[int, int]] | None]:
    """Kernel name -> its parameter layout (None where the cubin has no records of it), every kernel of a cubin."""
    return {name: cubin_records.kernel_params(cubin, name) for name in cubin_records.kernel_names(cubin)}


def image_layouts(image: bytes) -> dict[str, list[tuple[int, int]]]:
    """Kernel name -> parameter layout of every kernel of a cubin, or of a fatbin's uncompressed cubins (no
    disassembly: a module load must stay cheap)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for data in image_cubins(image):
        for name, layout in cubin_layouts(data).items():
            if layout is not None:
                out.setdefault(name, layout)
    return out


TMA_OPCODES = ("UTMA", "UBLK")  # tensor copies, map prefetch / invalidation (UTMACCTL), bulk copies
MAX_KEPT_CUBIN_BYTES = 256 << 20  # cubins kept for the end-of-run SASS reading (beyond: not kept, said so)
SASS_SECONDS = 60.0  # the end-of-run reading stops after this long (the rest: said so)


def tma_instructions(cubin: bytes) -> dict[str, list[str]]:
    """Kernel name -> the TMA instructions (opcode with modifiers, sorted) its SASS holds; [] for none."""
    return {name: sorted({op for op in ops if op.startswith(TMA_OPCODES)}) for name, ops in functions(cubin).items()}


class Capture:
    """The events of one audited run. `param_layout(function_handle) -> [(offset, size)] | None` reads a function's
    layout from the driver when no loaded module told it (default: none); `follow` reads maps behind the pointers
    of each new launch (default: none, `drvtma audit --follow-pointers` gives `follow.PointerReader`)."""

    def __init__(self, param_layout=None, follow=None):
        self.encodes: list[Encode] = []
        self.replaces: list[Replace] = []
        self.launches: dict[tuple, Launch] = {}
        self.counts = Counts()
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._module_layouts: dict[str, list[tuple[int, int]]] = {}  # kernel name -> layout, from loaded cubins
        self._cubins: dict[str, bytes] = {}  # kernel name -> its loaded cubin (for kernel_tma, after the run)
        self._kept_bytes = 0
        self._function_layouts: dict[tuple[int, str], list[tuple[int, int]] | None] = {}
        self._param_layout = param_layout or (lambda function: None)
        # --follow-pointers: `follow(stream, arguments, skip) -> (found, note)` (audit.follow.PointerReader), called
        # once per distinct launch, at most follow_limit times
        self._follow, self._followed = follow, 0
        self.follow_limit = MAX_FOLLOWED
        self.sink = None  # called with each new event (the child runner streams them to a file, for crashes)

    def _add(self, event) -> None:
        if self.sink is not None:
            self.sink(event)

    def events(self) -> list:
        return sorted([*self.encodes, *self.replaces, *self.launches.values()], key=lambda e: e.seq)

    # ---- callbacks (addresses of CUPTI's records; called on the thread that made the call)
    def on_driver_exit(self, api: str, callback_address: int, frame=None) -> None:
        """The exit of a watched driver call: `callback_address` is a CUpti_CallbackData."""
        try:
            cb = structs.read_callback(callback_address)
            # the CUresult at exit (a runtime call's cudaError_t never reaches here)
            result = structs.ctypes.c_int.from_address(cb.functionReturnValue).value if cb.functionReturnValue else 0
            frame = frame if frame is not None else sys._getframe(1)
            if api in ENCODES:
                self._encode(api, cb, result, *caller_frames(frame))
            elif api in REPLACES:
                self._replace(api, cb, result, *caller_frames(frame))
            elif api in LAUNCHES:
                self._launch(api, cb, result, frame)
        except Exception as exc:  # noqa: BLE001 -- a callback must never raise into the program; it is counted
            self.counts.errors.append(f"{api}: {type(exc).__name__}: {exc}")

    def on_runtime_enter(self, api: str) -> None:
        self.counts.runtime_launches += 1

    def on_module_loaded(self, resource_address: int) -> None:
        """A MODULE_LOADED resource callback: keep the layouts of the kernels its image holds."""
        try:
            image = structs.read_module(resource_address)
            for cubin in image_cubins(image) if image else []:
                layouts = cubin_layouts(cubin)
                for name, layout in layouts.items():
                    if layout is not None:
                        self._module_layouts.setdefault(name, layout)
                if self._kept_bytes + len(cubin) <= MAX_KEPT_CUBIN_BYTES:  # kept for read_kernel_tma
                    self._kept_bytes += len(cubin)
                    for name in layouts:
                        self._cubins.setdefault(name, cubin)
        except Exception as exc:  # noqa: BLE001
            self.counts.errors.append(f"module load: {type(exc).__name__}: {exc}")

    def read_kernel_tma(self, seconds: float = SASS_SECONDS) -> None:
        """After the run: `counts.kernel_tma`, the TMA instructions in the SASS of every launched kernel whose cubin
        was seen loading (one nvdisasm per cubin). It says whether a kernel whose arguments hold no map uses TMA at
        all, and whether it edits maps in global memory (UTMACCTL.IV: the tensormap proxy fence)."""
        start = time.perf_counter()
        read: dict[int, dict[str, list[str]] | str] = {}  # id(cubin) -> its kernels' instructions, or why not read
        for kernel in sorted({x.kernel for x in self.launches.values()}):
            cubin = self._cubins.get(kernel)
            if cubin is None:
                continue  # no cubin seen (loaded before the audit, compressed, PTX): nothing to say
            if id(cubin) not in read:
                if time.perf_counter() - start > seconds:
                    self.counts.kernel_tma[kernel] = f"not read: the {seconds:.0f}-s reading budget ran out"
                    continue
                try:
                    read[id(cubin)] = tma_instructions(cubin)
                except DrvtmaError as exc:  # no nvdisasm, or one too old for the cubin: every kernel of it says so
                    read[id(cubin)] = f"not read: {exc}"
            found = read[id(cubin)]
            self.counts.kernel_tma[kernel] = found if isinstance(found, str) else found.get(
                kernel, "not read: the kernel is not in its cubin")

    # ---- the three kinds of call
    def _encode(self, api, cb, result, library, caller) -> None:
        at, args = structs.read_encode(api, cb.functionParams)
        raw = structs.ctypes.string_at(at, structs.MAP_BYTES) if at and result == 0 else None
        with self._lock:
            self.encodes.append(Encode(next(self._seq), api, args, raw, result, library, caller))
            self._add(self.encodes[-1])

    def _replace(self, api, cb, result, library, caller) -> None:
        at, address = structs.read_replace(cb.functionParams)
        raw = structs.ctypes.string_at(at, structs.MAP_BYTES) if at and result == 0 else None
        with self._lock:
            self.replaces.append(Replace(next(self._seq), api, address, raw, result, library, caller))
            self._add(self.replaces[-1])

    def _launch(self, api, cb, result, frame) -> None:
        if result != 0:
            return  # a launch the driver refused ran nothing
        kernel = (cb.symbolName or b"").decode(errors="replace")
        info = structs.read_launch(api, cb.functionParams)
        layout = self._layout(info["function"], kernel)
        arguments, unreadable = None, None
        if info["buffer"] is not None:
            arguments = info["buffer"]
        elif info["kernel_params"] and layout:
            arguments = structs.read_arguments(info["kernel_params"], layout)
        elif info["kernel_params"]:
            unreadable = "no parameter layout (module loaded before the audit began, and no driver query)"
        else:
            unreadable = "no arguments passed" if not layout else "neither kernelParams nor a packed buffer"
        key = Launch.key_of(kernel, api, info["grid"], info["block"], info["shared_bytes"], arguments)
        with self._lock:
            if unreadable:
                self.counts.unreadable_launches[unreadable] = self.counts.unreadable_launches.get(unreadable, 0) + 1
            seen = self.launches.get(key)
            if seen is not None:  # a repeat: counted, its caller not looked up again (the loop's common case)
                seen.count += 1
                return
            follow = self._follow is not None and bool(arguments)
            if follow:
                self._followed += 1
        library, caller = caller_frames(frame)
        launch = Launch(0, api, kernel, info["grid"], info["block"], info["shared_bytes"], arguments, layout,
                        unreadable, library_of_kernel(kernel) or library, caller)
        if follow:  # outside the lock: it waits for the launch to finish
            if self._followed > self.follow_limit:
                launch.behind_note = f"not read: more than {self.follow_limit} distinct launches followed"
            else:
                try:
                    # a _ptsz launch's stream 0 is the calling thread's default stream (CU_STREAM_PER_THREAD)
                    stream = info["stream"] or (PER_THREAD_STREAM if api.endswith("_ptsz") else 0)
                    launch.behind, launch.behind_note = self._follow(stream, arguments, map_ranges(arguments or b""))
                except Exception as exc:  # noqa: BLE001 -- the launch is recorded whatever the reading met
                    launch.behind_note = f"not read: {type(exc).__name__}: {exc}"
        with self._lock:
            seen = self.launches.get(key)  # the same launch from another thread meanwhile
            if seen is not None:
                seen.count += 1
                return
            launch.seq = next(self._seq)
            self.launches[key] = launch
            self._add(launch)

    def _layout(self, function: int, kernel: str):
        key = (function, kernel)
        if key not in self._function_layouts:
            layout = self._module_layouts.get(kernel)
            self._function_layouts[key] = layout if layout is not None else self._param_layout(function)
        return self._function_layouts[key]
