"""Every exception drvtma raises, in one place."""

from __future__ import annotations


class DrvtmaError(Exception):
    """Base class of drvtma's own errors."""


class NoGpuError(DrvtmaError):
    """No CUDA driver, no device, or no Hopper device: GPU work cannot run here."""


class CudaError(DrvtmaError):
    """A CUDA driver call failed: ``cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)``."""

    def __init__(self, call: str, code: int, name: str, description: str, detail: str = ""):
        self.call, self.code, self.name, self.description = call, code, name, description
        msg = f"{call}: {name} ({description})"
        super().__init__(f"{msg}\n{detail}" if detail else msg)


class NvrtcError(DrvtmaError):
    """NVRTC failed to compile: carries the options, the full log and the source around each reported line."""

    def __init__(self, message: str, *, source_name: str = "", options: tuple[str, ...] = (), log: str = ""):
        self.source_name, self.options, self.log = source_name, tuple(options), log
        super().__init__(message)


class LaunchError(DrvtmaError):
    """A kernel launch was refused before reaching the driver (wrong arguments, bad configuration)."""


class TensorMapError(DrvtmaError, ValueError):
    """A tensor-map spec breaks a rule. ``rule`` names it, ``parameter`` is in the user's (NumPy) order."""

    def __init__(self, rule: str, parameter: str, value, fix: str, detail: str = ""):
        self.rule, self.parameter, self.value, self.fix = rule, parameter, value, fix
        text = f"[{rule}] {parameter} = {value!r}: {detail}" if detail else f"[{rule}] {parameter} = {value!r}"
        super().__init__(f"{text}; fix: {fix}" if fix else text)


class BarrierTimeout(DrvtmaError):
    """A bounded mbarrier wait in a kernel ran out of time; the kernel exited instead of hanging."""

    def __init__(self, kernel: str, block: int, barrier: int, stage: int, parity: int, count: int, where: int = 0):
        self.kernel, self.block, self.barrier, self.stage, self.parity = kernel, block, barrier, stage, parity
        self.count, self.where = count, where
        super().__init__(
            f"{kernel}: mbarrier wait timed out in block {block}, barrier {barrier}, stage {stage}, "
            f"parity {parity} (site {where}; {count} wait(s) timed out in all)")


class StoreStraddleWarning(UserWarning):
    """A store map's inner extent is not a multiple of 16 bytes: stores at the edge write past it."""
