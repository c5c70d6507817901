"""cuBLAS beside the drvtma GEMM, on the same operands, stream and events.

`open_cublas()` picks cuBLASLt through nvmath-python's bindings (`nvmath.bindings.cublasLt`: thin Cython wrappers
that take the device pointers and stream handle drvtma already holds; pip extra `bench`), else PyTorch (torch.mm,
torch._scaled_mm for fp8, on torch's own copies of the operands), else raises NoCublasError. Both run on the legacy
default stream, where drvtma launches and records its events. `.describe()` names the backend, its version and
the algorithm cuBLASLt chose; `kernel_names(run)` reads the kernels a call launched through torch's profiler when
torch is there (cuBLASLt's API does not name its kernels).

Layout: row-major C [M, N] = A [M, K] . B [N, K]^T is column-major C^T [N, M] = op(B) . A^T with B passed as
cuBLAS's "A" (transposed) and A as its "B": the "TN" layout, the one Hopper FP8 requires.
"""

from __future__ import annotations

from typing import Callable, Protocol, cast

import numpy as np

from .. import settings
from ..errors import DrvtmaError
from ..runtime.driver import LibraryHandle, Resource, call, close_all, cu

WORKSPACE_BYTES = 32 << 20  # the cuBLAS docs' recommendation for Hopper
HEURISTICS = 8  # algorithms asked of the heuristic; the first is used
CUDA_TYPES = {"float32": "CUDA_R_32F", "float16": "CUDA_R_16F", "bfloat16": "CUDA_R_16BF",
              "float8_e4m3fn": "CUDA_R_8F_E4M3", "float8_e5m2": "CUDA_R_8F_E5M2"}  # nvmath.CudaDataType's names


class _Launch(Protocol):
    """What a plan returns: launch(stream=None), a function carrying what must outlive it and its clean-up
    (`release`, also called `close` so the plan is a part of its owner's lifecycle; a second call does nothing)."""

    keep: tuple
    release: Callable[[], None]
    close: Callable[[], None]

    def __call__(self, stream=None) -> None: ...


class _TorchLaunch(_Launch, Protocol):
    copy_back: Callable[[], None]


class NoCublasError(DrvtmaError, ImportError):
    """Neither nvmath-python nor torch is installed: there is no cuBLAS to compare with."""


class CublasUnsupported(DrvtmaError):
    """cuBLAS has no kernel for this problem (CUBLAS_STATUS_NOT_SUPPORTED, or no algorithm from the heuristic):
    cuBLASLt has no e5m2 x e5m2, for one. Callers that can verify another way catch this, and only this."""


def open_cublas(prefer: str | None = None):
    """The cuBLAS backend: "lt" (nvmath-python) or "torch"; None tries them in that order."""
    errors = []
    for name in (prefer,) if prefer else ("lt", "torch"):
        try:
            return {"lt": LtGemm, "torch": TorchGemm}[name]()
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
    raise NoCublasError("no cuBLAS backend: " + "; ".join(errors) + " (pip install 'drvtma[bench]' for nvmath-python)")


# drvtma's fp8 GEMM sums in the tensor core's fp8-mode accumulator for the whole K loop (no promotion to fp32), as
# cuBLAS does only in its fast-accumulation mode: fp8 is compared and timed against that mode (its default, promoted
# mode differs by more than fp32 rounding: docs/gemm.md).
FP8_ACCUMULATION = "fast (tensor-core accumulator, no fp32 promotion), in drvtma and in cuBLAS"

# The enum that names an algorithm field's value (cublasLtMatmulTile_t, ...), by MatmulAlgoConfigAttribute name.
_ALGO_ENUMS = {"TILE_ID": "MatmulTile", "STAGES_ID": "MatmulStages", "CLUSTER_SHAPE_ID": "ClusterShape"}
ALGO_FIELDS = ("ID", "TILE_ID", "STAGES_ID", "SPLITK_NUM", "CLUSTER_SHAPE_ID")


def _enum_name(lt, field: str, value: int) -> str:
    """" (TILE_256x128)" for tile id 24, "" for a field without an enum or a value the enum lacks."""
    enum = getattr(lt, _ALGO_ENUMS.get(field, ""), None)
    try:
        return f" ({enum(value).name})" if enum is not None else ""
    except (ValueError, TypeError):
        return ""


def _attribute(value, dtype) -> np.ndarray:
    """`value` in the C type cuBLASLt declares for an attribute (nvmath's get_*_attribute_dtype): an attribute given
    the wrong size is refused with CUBLAS_STATUS_INVALID_VALUE (FAST_ACCUM is an int8_t: 4 bytes are refused)."""
    return np.array([value], np.dtype(dtype))


class LtGemm(Resource):
    """cuBLASLt through nvmath.bindings.cublasLt (nvmath-python >= 1.0: its enums, MatmulHeuristicResult and
    cuBLASLtError): one handle, a plan per problem (heuristic #0, 32 MiB workspace). On the one lifecycle
    (runtime.driver.Resource): close() releases the plans not yet released, the workspace and the handle, every one
    even if another fails; a second close does nothing; the collector releases what is never closed."""

    backend = "cublasLt (nvmath-python)"

    def __init__(self):
        import nvmath
        from nvmath.bindings import cublas
        from nvmath.bindings import cublasLt as lt  # ImportError when nvmath-python is missing

        from ..runtime.driver import DeviceBuffer, context

        context()
        self.lt, self.cublas = lt, cublas
        self.types = {name: getattr(nvmath.CudaDataType, code) for name, code in CUDA_TYPES.items()}
        self._plans: list[LibraryHandle] = []  # the descriptors and layouts of every plan (released ones skipped)
        self.handle = lt.create()
        self._own_library(lt.destroy, self.handle)
        self.workspace = DeviceBuffer(WORKSPACE_BYTES)
        self.version = f"cuBLASLt {lt.get_version()}, nvmath-python {nvmath.__version__}"
        self.algo = "not planned yet"

    def plan(self, a, b, c, m: int, n: int, k: int, dtype: str, out_dtype: str, alpha: float = 1.0):
        """A launch() of C = alpha A . B^T on device buffers a [m, k], b [n, k], c [m, n]. CublasUnsupported when
        cuBLASLt has no kernel for it; its other errors (cuBLASLtError) pass through."""
        lt = self.lt
        self._plans = [h for h in self._plans if not h.closed]
        handles: list[LibraryHandle] = []  # every descriptor and layout, owned from the moment it exists
        try:
            try:
                desc, la, lb, lc = self._describe(m, n, k, dtype, out_dtype, handles)
                algo = self._heuristic(desc, la, lb, lc)
            except BaseException:
                close_all(handles)
                raise
        except lt.cuBLASLtError as exc:
            if exc.status != self.cublas.Status.NOT_SUPPORTED:
                raise
            raise CublasUnsupported(f"cuBLASLt cannot do {dtype}->{out_dtype} {m}x{n}x{k} "
                                    "(CUBLAS_STATUS_NOT_SUPPORTED)") from exc
        self._plans += handles
        alpha_h, beta_h = np.array([alpha], np.float32), np.array([0.0], np.float32)
        keep = (*handles, algo, alpha_h, beta_h)  # alive as long as the launch
        ws_ptr = self.workspace.ptr

        def launch(stream=None):
            lt.matmul(self.handle, desc, alpha_h.ctypes.data, b.ptr, la, a.ptr, lb, beta_h.ctypes.data, c.ptr,
                      lc, c.ptr, lc, algo.ptr, ws_ptr, WORKSPACE_BYTES, 0 if stream is None else int(stream.handle))

        planned = cast(_Launch, launch)  # the same function: mypy types no attributes set on one
        planned.keep = keep
        planned.release = planned.close = lambda: close_all(handles)
        return planned

    def _describe(self, m: int, n: int, k: int, dtype: str, out_dtype: str, handles: list):
        """The operation (fp32 compute, "TN") and the layouts of B, A and C: see the module's Layout. Each is
        appended to `handles` as it is made, so a failure later leaks none."""
        lt, cublas, types = self.lt, self.cublas, self.types

        def owned(handle, destroy):
            handles.append(LibraryHandle(destroy, handle))
            return handle

        desc = owned(lt.matmul_desc_create(cublas.ComputeType.COMPUTE_32F, types["float32"]), lt.matmul_desc_destroy)
        attrs = [(lt.MatmulDescAttribute.TRANSA, cublas.Operation.T),
                 (lt.MatmulDescAttribute.TRANSB, cublas.Operation.N)]
        if dtype.startswith("float8"):  # the same accumulation as drvtma's kernel: see FP8_ACCUMULATION
            attrs.append((lt.MatmulDescAttribute.FAST_ACCUM, 1))
        for attr, value in attrs:
            v = _attribute(value, lt.get_matmul_desc_attribute_dtype(attr))
            lt.matmul_desc_set_attribute(desc, attr, v.ctypes.data, v.itemsize)
        in_t, out_t = types[dtype], types[out_dtype]
        destroy = lt.matrix_layout_destroy
        la = owned(lt.matrix_layout_create(in_t, k, n, k), destroy)  # B's buffer seen as K x N column-major, transposed
        lb = owned(lt.matrix_layout_create(in_t, k, m, k), destroy)  # A's buffer seen as K x M column-major
        lc = owned(lt.matrix_layout_create(out_t, n, m, n), destroy)  # C row-major M x N = column-major N x M
        return desc, la, lb, lc

    def _heuristic(self, desc, la, lb, lc):
        """The first algorithm cuBLASLt's heuristic returns (a MatmulAlgo of its own), described in self.algo."""
        lt = self.lt
        pref = lt.matmul_preference_create()
        try:
            attr = lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES
            ws = _attribute(WORKSPACE_BYTES, lt.get_matmul_preference_attribute_dtype(attr))
            lt.matmul_preference_set_attribute(pref, attr, ws.ctypes.data, ws.itemsize)
            results, count = lt.MatmulHeuristicResult(HEURISTICS), np.zeros(1, np.int32)
            lt.matmul_algo_get_heuristic(self.handle, desc, la, lb, lc, lc, pref, HEURISTICS, results.ptr,
                                         count.ctypes.data)
        finally:
            lt.matmul_preference_destroy(pref)
        if count[0] < 1:
            raise CublasUnsupported("cuBLASLt's heuristic has no algorithm for this problem")
        algo = lt.MatmulAlgo.from_data(np.array(results[0].algo, copy=True))
        self.algo = self._describe_algo(algo)
        return algo

    def _describe_algo(self, algo) -> str:
        lt = self.lt
        parts = []
        for name in ALGO_FIELDS:
            attr = getattr(lt.MatmulAlgoConfigAttribute, name)
            buf = np.zeros(1, lt.get_matmul_algo_config_attribute_dtype(attr))
            written = np.zeros(1, np.uint64)
            try:
                lt.matmul_algo_config_get_attribute(algo.ptr, attr, buf.ctypes.data, buf.itemsize,
                                                    written.ctypes.data)
            except lt.cuBLASLtError as exc:  # a field this cuBLASLt does not report
                parts.append(f"{name.lower()} ? ({type(exc).__name__})")
                continue
            parts.append(f"{name.lower()} {int(buf[0])}{_enum_name(lt, name, int(buf[0]))}")
        return "heuristic #0: " + ", ".join(parts)

    def describe(self) -> str:
        return f"{self.backend}: {self.version}; {self.algo}"

    def _parts(self) -> tuple:
        return (*self._plans, getattr(self, "workspace", None))


class TorchGemm(Resource):
    """PyTorch's cuBLAS on torch tensors that hold copies of drvtma's operands (torch cannot wrap a raw bf16
    pointer); the result is copied back into drvtma's C after each verified call, not in timed ones."""

    backend = "torch"

    def __init__(self):
        import torch  # ImportError when torch is missing

        from ..runtime.driver import context

        context()  # torch and drvtma share the device's primary context
        if not torch.cuda.is_available():
            raise ImportError("torch has no CUDA device")
        self.torch = torch
        self.version = f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuBLAS via torch"
        self.algo = "chosen by torch (see kernel names)"

    def plan(self, a, b, c, m: int, n: int, k: int, dtype: str, out_dtype: str, alpha: float = 1.0):
        torch = self.torch
        tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
               "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
        ta = torch.empty((m, k), dtype=tdt[dtype], device="cuda")
        tb = torch.empty((n, k), dtype=tdt[dtype], device="cuda")
        tc = torch.empty((m, n), dtype=tdt[out_dtype], device="cuda")
        call(cu.cuMemcpyDtoD, ta.data_ptr(), a.ptr, ta.numel() * ta.element_size())
        call(cu.cuMemcpyDtoD, tb.data_ptr(), b.ptr, tb.numel() * tb.element_size())
        state = {"verify": True}  # the first call (verified) leaves its result in tc; timed calls skip the copy
        if dtype == "float8_e5m2":  # as cuBLASLt: torch._scaled_mm raises ValueError at the first call
            raise CublasUnsupported("cuBLAS has no e5m2 x e5m2 kernel (torch._scaled_mm refuses the pair)")
        if dtype.startswith("float8"):
            one = torch.ones((), device="cuda", dtype=torch.float32)
            scale = torch.full((), float(alpha), device="cuda", dtype=torch.float32)

            def run():  # _scaled_mm takes no out=: a fresh output each call (torch's caching allocator)
                r = torch._scaled_mm(ta, tb.t(), scale_a=scale, scale_b=one, out_dtype=tc.dtype,
                                     use_fast_accum=True)  # the same accumulation as drvtma's: FP8_ACCUMULATION
                if state["verify"]:
                    tc.copy_(r)
        else:
            if out_dtype != dtype:
                raise CublasUnsupported(f"torch.mm cannot write {out_dtype} from {dtype}; install nvmath-python")

            def run():
                torch.mm(ta, tb.t(), out=tc)
                if alpha != 1.0:
                    tc.mul_(alpha)

        def launch(stream=None):
            if stream is not None:
                with torch.cuda.stream(torch.cuda.ExternalStream(int(stream.handle))):
                    run()
            else:
                run()

        def copy_back():
            """Copy the verified result into drvtma's C; from then on fp8 calls skip their output copy."""
            torch.cuda.synchronize()
            state["verify"] = False
            call(cu.cuMemcpyDtoD, c.ptr, tc.data_ptr(), tc.numel() * tc.element_size())

        planned = cast(_TorchLaunch, launch)  # the same function: mypy types no attributes set on one
        planned.copy_back = copy_back
        planned.keep = (ta, tb, tc)
        planned.release = planned.close = lambda: None  # torch's allocator owns the copies
        return planned

    def describe(self) -> str:
        return f"{self.backend}: {self.version}; {self.algo}"


def kernel_names(run) -> list[str]:
    """The CUDA kernels one call of `run()` launched, through torch's profiler (CUPTI); [] without torch, or with
    DRVTMA_CUBLAS_KERNEL_NAMES=0 (a process that profiled may crash at exit: docs/gemm.md)."""
    if not settings.CUBLAS_KERNEL_NAMES.get():
        return []
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return []
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        return sorted({e.key for e in prof.key_averages() if getattr(e, "device_type", None) is not None
                       and "CUDA" in str(e.device_type)})
    except Exception as exc:  # noqa: BLE001 - profiling is a nicety; say why it failed
        return [f"(profiler failed: {type(exc).__name__}: {exc})"]
