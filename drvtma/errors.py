"""Every exception drvtma raises, in one place; the `Rule` record that rule tables are made of; what an integer is."""

from __future__ import annotations

import numbers
from typing import Callable, Iterable, NamedTuple


class DrvtmaError(Exception):
    """Base class of drvtma's own errors."""


class NoGpuError(DrvtmaError):
    """No CUDA driver, no device, or no device with what the work needs: GPU work cannot run here."""


class CapabilityError(NoGpuError):
    """The GPU (or the build target) lacks a feature the work needs: ``rule`` (``needs_wgmma``) and ``feature`` name
    it, the message says which targets have it and what is unavailable (drvtma.runtime.capabilities)."""

    def __init__(self, rule: str, feature: str, message: str):
        self.rule, self.feature = rule, feature
        super().__init__(message)


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


class AuditError(DrvtmaError):
    """`drvtma audit` cannot watch a program here: no cupti-python, a CUPTI that does not match the driver, or
    another CUPTI client (Nsight Systems, Nsight Compute, compute-sanitizer) already subscribed. One sentence."""


class RuleError(DrvtmaError, ValueError):
    """Input that breaks one of drvtma's named rules, refused before the driver: ``[rule] parameter = value: why;
    fix: ...``. ``rule``, ``parameter``, ``value`` and ``fix`` are attributes; each room has its own subclass."""

    def __init__(self, rule: str, parameter: str, value, fix: str, detail: str = ""):
        self.rule, self.parameter, self.value, self.fix, self.detail = rule, parameter, value, fix, detail
        text = f"[{rule}] {parameter} = {value!r}: {detail}" if detail else f"[{rule}] {parameter} = {value!r}"
        super().__init__(f"{text}; fix: {fix}" if fix else text)

    def __reduce__(self):
        """Pickled with its fields (an error raised in a worker process is raised again in the caller's)."""
        return type(self), (self.rule, self.parameter, self.value, self.fix, self.detail)


class ArgumentError(RuleError):
    """A wrong argument that no room's own rules cover (a buffer size, a kernel source, a fuzz campaign's or a
    strategy's parameters), refused before any driver call; shaped like TensorMapError."""


class UnknownNameError(ArgumentError, KeyError):
    """A name looked up in a registry that does not hold it (a fuzz target); also a KeyError for old callers."""

    __str__ = Exception.__str__  # the message, not KeyError's quoted repr


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


class Rule(NamedTuple):
    """One entry of a room's table of rules, the one definition that both its full check and its fast path run.

    ``holds(*subject)`` is the quick test: True exactly when ``broken(*subject)`` would yield nothing. ``broken``
    yields the RuleErrors (each naming its parameter, value and fix) and runs only where ``holds`` said no.
    ``rules`` are the names it reports (one, or a few checked axis by axis together); ``scope`` says what part of the
    subject it reads, so a fast path may remember or skip a part; ``after``: rules whose breaking makes this one
    meaningless (it is skipped then); ``stop``: nothing after it is checked unless every rule so far holds.
    """

    rules: tuple[str, ...]
    holds: Callable[..., bool]
    broken: Callable[..., Iterable[RuleError]]
    scope: str = ""
    after: frozenset = frozenset()
    stop: bool = False


def broken_rules(table: Iterable[Rule], *subject) -> list[RuleError]:
    """Every broken rule of `table` for `subject`, in table order (the errors of a rule in the order it yields)."""
    errors: list[RuleError] = []
    for rule in table:
        if rule.after and errors and any(e.rule in rule.after for e in errors):
            continue
        if not rule.holds(*subject):
            errors += rule.broken(*subject)
        if rule.stop and errors:
            break
    return errors


class RuleOutcome(NamedTuple):
    """One entry of a table for one subject: the `errors` it yielded (none: it holds), or, when it was not checked,
    `skipped_after`: the broken rules that made it meaningless."""

    rule: Rule
    errors: tuple[RuleError, ...] = ()
    skipped_after: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        return "skipped" if self.skipped_after else "broken" if self.errors else "ok"


def rule_outcomes(table: Iterable[Rule], *subject, before: Iterable[RuleError] = ()) -> list[RuleOutcome]:
    """Every entry of `table` for `subject`, in order, walked as `broken_rules` walks it (its errors, in order, are
    exactly theirs): what explains a subject rule by rule. `before`: the errors of tables walked earlier, which an
    entry's `after` may name too."""
    out: list[RuleOutcome] = []
    earlier = list(before)
    errors: list[RuleError] = []  # this table's: `stop` reads them only, as broken_rules does
    stopped: tuple[str, ...] = ()
    for rule in table:
        if stopped:
            out.append(RuleOutcome(rule, skipped_after=stopped))
            continue
        hit = tuple(dict.fromkeys(e.rule for e in earlier + errors if e.rule in rule.after)) if rule.after else ()
        if hit:
            out.append(RuleOutcome(rule, skipped_after=hit))
            continue
        mine = () if rule.holds(*subject) else tuple(rule.broken(*subject))
        errors += mine
        out.append(RuleOutcome(rule, mine))
        if rule.stop and errors:
            stopped = tuple(dict.fromkeys(e.rule for e in errors))
    return out


class StoreStraddleWarning(UserWarning):
    """A store map's inner extent is not a multiple of 16 bytes: stores at the edge write past it."""


# ---------------------------------------------------------------------------------------------- argument values
# The one definition of what drvtma takes as an integer, used by every room: Python and NumPy integers
# (numbers.Integral), never bool (True is not a size), float (1.5 would be truncated) or None.

def is_int(value) -> bool:
    """True for Python and NumPy integers; False for bool, float, str, None and everything else."""
    if type(value) is int:  # the common case, without the ABC check (a bool's type is bool)
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # np.bool_ is no Integral


def as_int(value, parameter: str, *, error: type = ArgumentError, rule: str = "integer", lo: int | None = None,
           hi: int | None = None, text: bool = False, fix: str = "") -> int:
    """`value` as an int, or `error(rule, parameter, value, fix, why)`. `lo` / `hi` bound it (inclusive);
    `text=True` also takes integer text: "0x10", "16", "0b1" (addresses, descriptor values)."""
    if text and isinstance(value, str):
        try:
            value = int(value.strip().replace("_", ""), 0)
        except ValueError:
            raise error(rule, parameter, value, fix or "give an integer or integer text such as 0x7f0000001000",
                        "not an integer: write hex with 0x, decimal without a prefix") from None
    if not is_int(value):
        kinds = "an int (or integer text such as '0x10')" if text else "an int"
        raise error(rule, parameter, value, fix or f"give {kinds}",
                    f"{type(value).__name__} is not an integer" + (" (a bool is not a count)"
                                                                    if isinstance(value, bool) else ""))
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"{lo}..{hi}" if lo is not None and hi is not None else f">= {lo}" if lo is not None else f"<= {hi}"
        raise error(rule, parameter, value, fix or f"use a value {span}", f"{value} is outside {span}")
    return value


def as_ints(values, parameter: str, *, error: type = ArgumentError, rule: str = "integer") -> tuple[int, ...]:
    """A tuple of ints from one int or a sequence of them (each as `as_int`, named ``parameter[i]``)."""
    if type(values) is tuple and all(type(v) is int for v in values):  # already what this returns
        return values
    if is_int(values):
        return (int(values),)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise error(rule, parameter, values, "give a tuple of ints, one per axis",
                    f"{type(values).__name__} is not a sequence of integers")
    return tuple(as_int(v, f"{parameter}[{i}]", error=error, rule=rule) for i, v in enumerate(values))


def address(value, parameter: str = "base_address", *, error: type = ArgumentError,
            rule: str = "address_range") -> int:
    """A device address: an int or integer text ("0x7f0000001000"), in 0..2^64-1."""
    return as_int(value, parameter, error=error, rule=rule, lo=0, hi=(1 << 64) - 1, text=True,
                  fix="give the device address as a non-negative int or hex text such as 0x7f0000001000")
