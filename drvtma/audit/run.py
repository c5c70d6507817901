"""The audited program's own process: `python -m drvtma.audit.run EVENTS [--follow-pointers] -- script.py ARGS` (or
`-- -m module ARGS`).
Subscribes to CUPTI before the program imports anything, runs it as `__main__` (its own sys.argv), and streams every
new event to EVENTS as it happens, so a program that dies still leaves what was seen; the last line holds the
final launch counts. `drvtma audit` starts this and reads the stream back.

Exit status: the program's own, or REFUSED when the audit could not start (the first line of EVENTS says why).
"""

from __future__ import annotations

import atexit
import json
import runpy
import signal
import sys
import threading

from ..errors import AuditError
from .events import event_line, final_line
from .session import Subscription

REFUSED = 97  # the audit could not start (no cupti-python, another CUPTI client): EVENTS' first line says why


FOLLOW = "--follow-pointers"


def main(argv: list[str]) -> int:
    follow = len(argv) > 1 and argv[1] == FOLLOW
    if follow:
        argv = [argv[0], *argv[2:]]
    if len(argv) < 3 or argv[1] != "--":
        print(f"usage: python -m drvtma.audit.run EVENTS [{FOLLOW}] -- script.py ARGS | -- -m module ARGS",
              file=sys.stderr)
        return 2
    events_path, target = argv[0], argv[2:]

    stream = open(events_path, "w", buffering=1)  # noqa: SIM115 -- open until the process ends (atexit closes it)
    try:
        subscription = Subscription(follow_pointers=follow)
    except AuditError as exc:
        stream.write(json.dumps({"kind": "refused", "why": str(exc)}) + "\n")
        stream.close()
        return REFUSED
    capture = subscription.capture
    lock = threading.Lock()

    def sink(event) -> None:
        with lock:
            stream.write(event_line(event))

    capture.sink = sink
    stream.write(json.dumps({"kind": "start", "program": target}) + "\n")

    def finish() -> None:
        with lock:
            if not stream.closed:
                subscription.close()
                stream.write(final_line(capture.launches.values(), capture.counts))
                stream.close()

    atexit.register(finish)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run atexit on a polite kill too
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(target)
        sys.path.insert(0, str(__import__("pathlib").Path(target[0]).resolve().parent))
        runpy.run_path(target[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
