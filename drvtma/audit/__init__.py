"""Watch a running program's tensor maps: every map it encodes (cuTensorMapEncode*), every address it replaces,
every kernel launch whose arguments hold a map, caught through CUPTI's callback API (cupti-python, the `audit`
extra), then decoded, checked against every drvtma rule and reported (JSON, Markdown, pictures).

`drvtma audit -- python script.py` from the shell; `with drvtma.audit.audit() as log:` in Python; the pytest
fixture `drvtma_audit`. `structs` (CUPTI's C records), `capture` (records -> events), `events` (plain records,
saved and replayed), `session` (the CUPTI subscription), `judge`, `report`, `run` (the audited child process).
"""

from __future__ import annotations

from contextlib import contextmanager

from .capture import Capture
from .events import Counts, Encode, Launch, Replace, Stream, load_events, save_events
from .judge import Judgement, MapVerdict, judge, spec_from_encode
from .report import figure_lines, library_rows, write_report


class AuditLog:
    """What an `audit()` block saw; `judgement` and `write(directory)` once the block has ended."""

    def __init__(self, capture: Capture):
        self.capture = capture
        self._judgement: Judgement | None = None

    @property
    def events(self) -> list:
        return self.capture.events()

    @property
    def judgement(self) -> Judgement:
        if self._judgement is None:
            self._judgement = judge(self.events)
        return self._judgement

    def write(self, directory, *, program: str = "audit() block", pictures: bool = False):
        return write_report(directory, self.judgement, self.capture.counts, program, pictures=pictures)


@contextmanager
def audit(report=None, *, pictures: bool = False, follow_pointers: bool = False):
    """Watch the block's driver calls; `report`: a folder to write the report to when the block ends;
    `follow_pointers`: also read maps behind the arguments that point to device memory (each new launch waits to
    finish: audit.follow). Raises AuditError (one sentence) without cupti-python or with another CUPTI client
    subscribed."""
    from .session import Subscription

    subscription = Subscription(follow_pointers=follow_pointers)
    log = AuditLog(subscription.capture)
    try:
        yield log
    finally:
        subscription.close()
        if report is not None:
            log.write(report, pictures=pictures)


__all__ = ["AuditLog", "Capture", "Counts", "Encode", "Judgement", "Launch", "MapVerdict", "Replace", "Stream",
           "audit", "figure_lines", "judge", "library_rows", "load_events", "save_events", "spec_from_encode",
           "write_report"]
