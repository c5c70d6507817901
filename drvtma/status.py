"""The status record that bounded mbarrier waits report into (cu/include/drvtma/status.cuh)."""

from __future__ import annotations

import numpy as np

from .driver import DeviceBuffer
from .errors import BarrierTimeout

# Mirrors struct DrvtmaStatus; keep the field order identical.
STATUS_FIELDS = ("timeouts", "claimed", "block", "thread", "barrier", "stage", "parity", "where")
STATUS_DTYPE = np.dtype([(f, "<u4") for f in STATUS_FIELDS])


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
        rec = self.read()
        if rec["timeouts"]:
            raise BarrierTimeout(kernel, int(rec["block"]), int(rec["barrier"]), int(rec["stage"]),
                                 int(rec["parity"]), int(rec["timeouts"]), int(rec["where"]))
