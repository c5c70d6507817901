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

import os

import numpy as np

from ..errors import DrvtmaError

WORKSPACE_BYTES = 32 << 20  # the cuBLAS docs' recommendation for Hopper
CUDA_TYPES = {"float32": 0, "float16": 2, "bfloat16": 14, "float8_e4m3fn": 28, "float8_e5m2": 29}
COMPUTE_32F = 68  # CUBLAS_COMPUTE_32F
OP_N, OP_T = 0, 1
HEURISTIC_RESULT_BYTES = 96  # cublasLtMatmulHeuristicResult_t: algo (64 B), workspace size, state, waves, reserved


class NoCublasError(DrvtmaError, ImportError):
    """Neither nvmath-python nor torch is installed: there is no cuBLAS to compare with."""


def open_cublas(prefer: str | None = None):
    """The cuBLAS backend: "lt" (nvmath-python) or "torch"; None tries them in that order."""
    errors = []
    for name in (prefer,) if prefer else ("lt", "torch"):
        try:
            return {"lt": LtGemm, "torch": TorchGemm}[name]()
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
    raise NoCublasError("no cuBLAS backend: " + "; ".join(errors) + " (pip install 'drvtma[bench]' for nvmath-python)")


# drvtma's fp8 GEMM keeps its sums in the tensor core's fp8-mode accumulator for the whole K loop (no promotion to
# fp32 every few k-blocks, as DeepGEMM does), which keeps fewer bits than fp32 (docs/wgmma.md: ~1e-3 relative on
# random data). cuBLAS does the same only in its fast-accumulation mode, so fp8 is compared and timed against that
# mode; its default (promoted) mode differs from drvtma's result by more than fp32 rounding at K = 4096 (seen: 4.4x
# the fp32-accumulation tolerance on the H200).
FP8_ACCUMULATION = "fast (tensor-core accumulator, no fp32 promotion), in drvtma and in cuBLAS"


def _enum(owner, name: str, fallback: int) -> int:
    return int(getattr(owner, name, fallback)) if owner is not None else fallback


# The C types of the descriptor attributes set here (cublasLt.h): an attribute given the wrong size is refused
# with CUBLAS_STATUS_INVALID_VALUE (FAST_ACCUM is an int8_t: set as 4 bytes it failed on the H200).
DESC_ATTRIBUTE_DTYPES = {"TRANSA": np.int32, "TRANSB": np.int32, "FAST_ACCUM": np.int8}


# The enum that names an algorithm field's value (cublasLtMatmulTile_t, ...), where nvmath-python has it.
_ALGO_ENUMS = {"TILE_ID": "MatmulTile", "STAGES_ID": "MatmulStages", "CLUSTER_SHAPE_ID": "ClusterShape"}


def _enum_name(lt, field: str, value: int) -> str:
    """" (TILE_256x128)" for tile id 24 when nvmath-python knows the enum, else ""."""
    enum = getattr(lt, _ALGO_ENUMS.get(field, ""), None)
    try:
        return f" ({enum(value).name})" if enum is not None else ""
    except (ValueError, TypeError):
        return ""


def _desc_attribute_dtype(lt, attr: int, name: str):
    """nvmath's own table of attribute types where it has one, else DESC_ATTRIBUTE_DTYPES."""
    lookup = getattr(lt, "get_matmul_desc_attribute_dtype", None)
    if lookup is not None:
        try:
            return np.dtype(lookup(attr))
        except Exception:  # noqa: BLE001 - an older nvmath without this attribute in its table
            pass
    return np.dtype(DESC_ATTRIBUTE_DTYPES[name])


class LtGemm:
    """cuBLASLt through nvmath.bindings.cublasLt: one handle, a plan per problem (heuristic #0, 32 MiB workspace)."""

    backend = "cublasLt (nvmath-python)"

    def __init__(self):
        from nvmath.bindings import cublasLt as lt  # ImportError when nvmath-python is missing

        from ..runtime.driver import DeviceBuffer, context

        context()
        self.lt = lt
        self.handle = lt.create()
        self.workspace = DeviceBuffer(WORKSPACE_BYTES)
        import nvmath

        self.version = f"cuBLASLt {lt.get_version()}, nvmath-python {getattr(nvmath, '__version__', '?')}"
        self.algo = "not planned yet"

    def plan(self, a, b, c, m: int, n: int, k: int, dtype: str, out_dtype: str, alpha: float = 1.0):
        """A launch() of C = alpha A . B^T on device buffers a [m, k], b [n, k], c [m, n]."""
        lt = self.lt
        in_t, out_t = CUDA_TYPES[dtype], CUDA_TYPES[out_dtype]
        desc = lt.matmul_desc_create(COMPUTE_32F, CUDA_TYPES["float32"])
        attrs = getattr(lt, "MatmulDescAttribute", None)
        settings = [("TRANSA", 3, OP_T), ("TRANSB", 4, OP_N)]
        if dtype.startswith("float8"):
            settings.append(("FAST_ACCUM", 25, 1))  # the same accumulation as drvtma's kernel: see FP8_ACCUMULATION
        for name, fallback, value in settings:
            attr = _enum(attrs, name, fallback)
            v = np.array([value], _desc_attribute_dtype(lt, attr, name))
            lt.matmul_desc_set_attribute(desc, attr, v.ctypes.data, v.itemsize)
        la = lt.matrix_layout_create(in_t, k, n, k)  # B's buffer seen as K x N column-major, transposed
        lb = lt.matrix_layout_create(in_t, k, m, k)  # A's buffer seen as K x M column-major
        lc = lt.matrix_layout_create(out_t, n, m, n)  # C row-major M x N = column-major N x M
        pref = lt.matmul_preference_create()
        ws = np.array([WORKSPACE_BYTES], np.uint64)
        lt.matmul_preference_set_attribute(pref, _enum(getattr(lt, "MatmulPreferenceAttribute", None),
                                                       "MAX_WORKSPACE_BYTES", 1), ws.ctypes.data, 8)
        results = np.zeros((8, HEURISTIC_RESULT_BYTES), np.uint8)
        count = np.zeros(1, np.int32)
        lt.matmul_algo_get_heuristic(self.handle, desc, la, lb, lc, lc, pref, 8, results.ctypes.data,
                                     count.ctypes.data)
        lt.matmul_preference_destroy(pref)
        if count[0] < 1:
            raise DrvtmaError(f"cuBLASLt has no algorithm for {dtype}->{out_dtype} {m}x{n}x{k}")
        algo = np.ascontiguousarray(results[0, :64])
        self.algo = self._describe_algo(algo)
        alpha_h, beta_h = np.array([alpha], np.float32), np.array([0.0], np.float32)
        keep = (desc, la, lb, lc, algo, alpha_h, beta_h)  # alive as long as the launch
        ws_ptr = self.workspace.ptr

        def launch(stream=None):
            lt.matmul(self.handle, keep[0], alpha_h.ctypes.data, b.ptr, la, a.ptr, lb, beta_h.ctypes.data, c.ptr,
                      lc, c.ptr, lc, algo.ctypes.data, ws_ptr, WORKSPACE_BYTES,
                      0 if stream is None else int(stream.handle))

        launch.keep = keep
        launch.release = lambda: self._release(desc, la, lb, lc)
        return launch

    def _describe_algo(self, algo: np.ndarray) -> str:
        lt = self.lt
        attrs = getattr(lt, "MatmulAlgoConfigAttribute", None)
        parts = []
        for name in ("ID", "TILE_ID", "STAGES_ID", "SPLITK_NUM", "CLUSTER_SHAPE_ID"):
            if attrs is None or not hasattr(attrs, name):
                continue
            buf, written = np.zeros(1, np.uint64), np.zeros(1, np.uint64)
            try:
                size = np.dtype(lt.get_matmul_algo_config_attribute_dtype(int(getattr(attrs, name)))).itemsize
                lt.matmul_algo_config_get_attribute(algo.ctypes.data, int(getattr(attrs, name)), buf.ctypes.data,
                                                    size, written.ctypes.data)
                parts.append(f"{name.lower()} {int(buf[0])}{_enum_name(lt, name, int(buf[0]))}")
            except Exception as exc:  # noqa: BLE001 - a field this cuBLASLt does not report
                parts.append(f"{name.lower()} ? ({type(exc).__name__})")
        return "heuristic #0: " + ", ".join(parts)

    def _release(self, *objs) -> None:
        lt = self.lt
        desc, *layouts = objs
        lt.matmul_desc_destroy(desc)
        for layout in layouts:
            lt.matrix_layout_destroy(layout)

    def describe(self) -> str:
        return f"{self.backend}: {self.version}; {self.algo}"

    def close(self) -> None:
        if self.handle:
            self.lt.destroy(self.handle)
            self.handle = 0
        self.workspace.close()


class TorchGemm:
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
        from ..runtime.driver import call, cu

        torch = self.torch
        tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
               "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
        ta = torch.empty((m, k), dtype=tdt[dtype], device="cuda")
        tb = torch.empty((n, k), dtype=tdt[dtype], device="cuda")
        tc = torch.empty((m, n), dtype=tdt[out_dtype], device="cuda")
        call(cu.cuMemcpyDtoD, ta.data_ptr(), a.ptr, ta.numel() * ta.element_size())
        call(cu.cuMemcpyDtoD, tb.data_ptr(), b.ptr, tb.numel() * tb.element_size())
        state = {"verify": True}  # the first call (verified) leaves its result in tc; timed calls skip the copy
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
                raise DrvtmaError(f"torch.mm cannot write {out_dtype} from {dtype}; install nvmath-python")

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

        launch.copy_back = copy_back
        launch.keep = (ta, tb, tc)
        launch.release = lambda: None
        return launch

    def describe(self) -> str:
        return f"{self.backend}: {self.version}; {self.algo}"

    def close(self) -> None:
        pass


def kernel_names(run) -> list[str]:
    """The CUDA kernels one call of `run()` launched, through torch's profiler (CUPTI); [] without torch, or with
    DRVTMA_CUBLAS_KERNEL_NAMES=0 (a process that profiled once was seen to crash at exit on the H200 image)."""
    if os.environ.get("DRVTMA_CUBLAS_KERNEL_NAMES", "1") == "0":
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
