"""The status record that bounded mbarrier waits report into (cu/include/drvtma/status.cuh)."""

from __future__ import annotations

from typing import cast

import numpy as np

from ..errors import BarrierTimeout, TimedOutWait
from .driver import DeviceBuffer

# Mirrors struct DrvtmaTimeout / DrvtmaStatus; keep the field order identical.
STATUS_SLOTS = 8  # kStatusSlots
TIMEOUT_DTYPE = np.dtype([(f, "<u4") for f in ("block", "thread", "barrier", "stage", "parity", "where")]
                         + [("since_ns", "<u8"), ("cta_rank", "<u4"), ("cluster_ctas", "<u4")])
STATUS_DTYPE = np.dtype([("timeouts", "<u4"), ("claimed", "<u4"), ("reserved", "<u4", (2,)),
                         ("slot", TIMEOUT_DTYPE, (STATUS_SLOTS,))])


def timed_out_waits(rec: np.void) -> list[TimedOutWait]:
    """The stored timeouts of one status record, the earliest-begun wait first."""
    stored = min(int(rec["claimed"]), STATUS_SLOTS)
    names = cast("tuple[str, ...]", TIMEOUT_DTYPE.names)  # a structured dtype: never None
    waits = [TimedOutWait(*(int(s[f]) for f in names)) for s in rec["slot"][:stored]]
    return sorted(waits, key=lambda w: (w.since_ns, w.block, w.thread))


def barrier_timeout(kernel: str, rec: np.void, describe=None) -> BarrierTimeout | None:
    """The BarrierTimeout a status record reports, or None when no wait timed out. `describe` names a wait's
    barrier and site in the message (BarrierTimeout's default shows the kernel's ids)."""
    if not rec["timeouts"]:
        return None
    return BarrierTimeout(kernel, timed_out_waits(rec), int(rec["timeouts"]), describe)


class StatusBuffer(DeviceBuffer):
    """A zeroed DrvtmaStatus in device memory; pass it to a kernel as `DrvtmaStatus*`."""

    def __init__(self):
        super().__init__(STATUS_DTYPE.itemsize)
        self.reset()

    def reset(self) -> None:
        self.fill_u8(0)

    def read(self) -> np.void:
        return self.download(STATUS_DTYPE, (1,))[0]

    def check(self, kernel: str) -> None:
        """Raise BarrierTimeout if any wait of the last launches timed out (synchronises through the copy)."""
        error = barrier_timeout(kernel, self.read())
        if error is not None:
            raise error
