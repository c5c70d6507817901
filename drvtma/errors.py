"""Every exception drvtma raises, in one place."""

from __future__ import annotations

from typing import NamedTuple


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


class RuleError(DrvtmaError, ValueError):
    """Input that breaks one of drvtma's named rules, refused before the driver: ``[rule] parameter = value: why;
    fix: ...``. ``rule``, ``parameter``, ``value`` and ``fix`` are attributes; each room has its own subclass."""

    def __init__(self, rule: str, parameter: str, value, fix: str, detail: str = ""):
        self.rule, self.parameter, self.value, self.fix = rule, parameter, value, fix
        text = f"[{rule}] {parameter} = {value!r}: {detail}" if detail else f"[{rule}] {parameter} = {value!r}"
        super().__init__(f"{text}; fix: {fix}" if fix else text)


class ClusterError(RuleError, LaunchError):
    """A cluster launch or a multicast breaks a rule, refused before the driver. ``rule`` names it."""


class TensorMapError(RuleError):
    """A tensor-map spec breaks a rule. ``rule`` names it, ``parameter`` is in the user's (NumPy) order."""


class WgmmaError(RuleError):
    """A wgmma descriptor, shape or operand breaks a rule. ``rule`` names it; same shape as TensorMapError."""


class GemmError(RuleError):
    """A GEMM configuration or problem shape the kernel cannot take. ``rule`` names it; shaped like TensorMapError."""


class TimedOutWait(NamedTuple):
    """One bounded wait that ran out of time, as the kernel recorded it (struct DrvtmaTimeout)."""

    block: int
    thread: int
    barrier: int  # kernel-chosen barrier id
    stage: int
    parity: int
    where: int  # kernel-chosen call-site id
    since_ns: int  # %globaltimer when the wait began
    cta_rank: int = 0  # the waiting CTA's rank in its cluster
    cluster_ctas: int = 1  # CTAs in that cluster (1: not a cluster launch)

    def who(self) -> str:
        """`block 3`, or `block 3 (cluster rank 1 of 4)` in a cluster launch."""
        rank = f" (cluster rank {self.cta_rank} of {self.cluster_ctas})" if self.cluster_ctas > 1 else ""
        return f"block {self.block}{rank}"


def _plain_wait(w: TimedOutWait) -> str:
    return f"barrier {w.barrier}, stage {w.stage}, parity {w.parity} (site {w.where})"


class BarrierTimeout(DrvtmaError):
    """Bounded mbarrier waits in a kernel ran out of time; the kernel exited instead of hanging.

    ``waits`` holds the recorded ones (up to 8), the earliest-begun first: in a stuck protocol the first wait to
    begin is the likeliest root cause, the later ones its knock-on effects. ``block``, ``barrier``, ``stage``,
    ``parity`` and ``where`` are that first wait's; ``count`` counts every timeout of the launch.
    ``describe(wait) -> str`` names a wait's barrier and site for the message (default: the kernel's ids).
    """

    def __init__(self, kernel: str, waits, count: int, describe=None):
        describe = describe or _plain_wait
        self.kernel, self.waits, self.count = kernel, tuple(waits), count
        first = self.waits[0] if self.waits else TimedOutWait(-1, -1, -1, -1, -1, -1, 0)
        self.block, self.thread, self.barrier, self.stage = first.block, first.thread, first.barrier, first.stage
        self.parity, self.where = first.parity, first.where
        self.cta_rank, self.cluster_ctas = first.cta_rank, first.cluster_ctas
        text = f"{kernel}: {count} mbarrier wait(s) timed out"
        if self.waits:
            text += f"; the first to begin: {first.who()} thread {first.thread}, {describe(first)}"
            later = [f"{w.who()} {describe(w)} +{(w.since_ns - first.since_ns) / 1e3:.1f} us"
                     for w in self.waits[1:4]]
            if later:
                text += "; then " + "; ".join(later)
        unrecorded = count - len(self.waits)
        if unrecorded > 0:
            text += f" ({unrecorded} more not recorded)"
        super().__init__(text)

    def __reduce__(self):  # picklable across processes (child-process probes)
        return (BarrierTimeout, (self.kernel, self.waits, self.count))


class StoreStraddleWarning(UserWarning):
    """A store map's inner extent is not a multiple of 16 bytes: stores at the edge write past it."""
