"""Wire a `Capture` to CUPTI's callback API through NVIDIA's cupti-python (the `audit` extra): subscribe, enable the
driver calls that make and launch maps, the runtime's launches (counted) and module loads (parameter layouts),
and hand each callback's record to the capture. CUPTI must match the driver's CUDA major version (docs/audit.md,
Requirements: a pair that works)."""

from __future__ import annotations

import sys

from ..errors import AuditError
from .capture import DRIVER_CALLS, RUNTIME_LAUNCHES, Capture
from .follow import PointerReader
from .structs import API_EXIT, read_callback

INSTALL = "pip install cupti-python (or pip install 'drvtma[audit]'), of the CUDA major version of your driver"
PARAM_COUNT_DRIVER_VERSION = 13020  # cuFuncGetParamCount: a driver that answers "how many" needs no failing query


def cupti_module():
    """cupti-python's `cupti.cupti`, or an AuditError that says how to get it."""
    try:
        from cupti import cupti
    except ImportError as exc:
        raise AuditError(f"drvtma audit needs cupti-python, which is not importable here ({exc}): {INSTALL}") from None
    return cupti


def driver_param_layout(function: int):
    """A function's parameter layout from the driver where it can count them (CUDA 13.2+), else None: asking
    cuFuncGetParamInfo index after index until it fails would leave a driver error in the audited program."""
    from cuda.bindings import driver as cu

    count_query = getattr(cu, "cuFuncGetParamCount", None)
    err, version = cu.cuDriverGetVersion()
    if count_query is None or err != cu.CUresult.CUDA_SUCCESS or version < PARAM_COUNT_DRIVER_VERSION:
        return None
    f = cu.CUfunction(function)
    err, count = count_query(f)
    if err != cu.CUresult.CUDA_SUCCESS:
        return None
    out = []
    for i in range(int(count)):
        err, offset, size = cu.cuFuncGetParamInfo(f, i)
        if err != cu.CUresult.CUDA_SUCCESS:
            return None
        out.append((int(offset), int(size)))
    return out


def _address(cbdata) -> int:
    """The address of CUPTI's record, whether cupti-python hands an object (`.ptr`) or an integer."""
    ptr = getattr(cbdata, "ptr", None)
    return int(ptr) if ptr is not None else int(cbdata)


class Subscription:
    """One CUPTI subscriber feeding `capture`; `close()` unsubscribes (also as a context manager)."""

    def __init__(self, capture: Capture | None = None, *, follow_pointers: bool = False):
        cupti = cupti_module()
        if capture is None:
            capture = Capture(driver_param_layout, follow=PointerReader() if follow_pointers else None)
        self.capture = capture
        self._cupti = cupti
        driver_ids = {m: int(v) for m, v in cupti.driver_api_trace_cbid.__members__.items()}
        runtime_ids = {m: int(v) for m, v in cupti.runtime_api_trace_cbid.__members__.items()}
        self._driver = {driver_ids[n]: n for n in DRIVER_CALLS if n in driver_ids}
        self._runtime = {runtime_ids[n]: n for n in RUNTIME_LAUNCHES if n in runtime_ids}
        self._domains = (int(cupti.CallbackDomain.DRIVER_API), int(cupti.CallbackDomain.RUNTIME_API),
                         int(cupti.CallbackDomain.RESOURCE))
        self._module_loaded = int(cupti.CallbackIdResource.MODULE_LOADED)
        try:
            self._handle = cupti.subscribe(self._callback, 0)
        except Exception as exc:  # noqa: BLE001 -- cuptiError, or cupti-python's NotSupportedError without a driver
            if "MULTIPLE_SUBSCRIBERS" in str(exc).upper().replace(" ", "_"):
                raise AuditError("another CUPTI client is already watching this process (Nsight Systems, Nsight "
                                 "Compute, compute-sanitizer, cuda-gdb or a second audit): run the program "
                                 "without it") from None
            if "driver is not found" in str(exc).lower() or "libcuda" in str(exc):
                raise AuditError(f"CUPTI found no CUDA driver here ({exc}): the audit watches programs on a GPU "
                                 "machine") from None
            raise AuditError(f"CUPTI refused to subscribe ({exc}); its version must match the driver's CUDA "
                             f"major version: {INSTALL}") from None
        driver, runtime, resource = self._domains
        for cbid in self._driver:
            cupti.enable_callback(1, self._handle, driver, cbid)
        for cbid in self._runtime:
            cupti.enable_callback(1, self._handle, runtime, cbid)
        cupti.enable_callback(1, self._handle, resource, self._module_loaded)

    def _callback(self, userdata, domain, cbid, cbdata) -> None:
        try:
            domain, cbid = int(domain), int(cbid)
            driver, runtime, resource = self._domains
            if domain == driver and cbid in self._driver:
                address = _address(cbdata)
                if read_callback(address).callbackSite == API_EXIT:
                    # the frame that made the call: None on a thread with no Python frame (XLA's and other C++ threads)
                    self.capture.on_driver_exit(self._driver[cbid], address, sys._getframe(0).f_back)
            elif domain == runtime and cbid in self._runtime:
                if read_callback(_address(cbdata)).callbackSite != API_EXIT:
                    self.capture.on_runtime_enter(self._runtime[cbid])
            elif domain == resource and cbid == self._module_loaded:
                self.capture.on_module_loaded(_address(cbdata))
        except Exception as exc:  # noqa: BLE001 -- never raise into the audited program
            self.capture.counts.errors.append(f"callback: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Stop watching, then read the TMA instructions of the launched kernels (capture.read_kernel_tma)."""
        if self._handle is not None:
            self._cupti.unsubscribe(self._handle)
            self._handle = None
            self.capture.read_kernel_tma()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
