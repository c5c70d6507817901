"""What the audit records of a running program: each map encoded, each address replaced, each distinct launch (with
how many times it ran). Plain values only, so a stream is saved as JSON lines and replayed (`load_events`): the CPU
tests replay recorded streams through the judge and the report, and a program that crashes leaves its stream."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path


@dataclass
class Encode:
    """One cuTensorMapEncode* call: its arguments by the driver's names, the 128 bytes it wrote (None: it failed)."""

    seq: int
    api: str
    args: dict
    map_bytes: bytes | None
    result: int
    library: str
    caller: str
    kind: str = "encode"


@dataclass
class Replace:
    """One cuTensorMapReplaceAddress call: the new address and the map's bytes after it."""

    seq: int
    api: str
    address: int
    map_bytes: bytes | None
    result: int
    library: str
    caller: str
    kind: str = "replace"


@dataclass
class Launch:
    """A distinct launch (same kernel, geometry and argument bytes) and how many times it ran. `arguments`: the
    argument bytes as the kernel sees them (None: unreadable, and `unreadable` says why); `layout`: (offset, size)
    of each parameter where known (None: a packed buffer, or no parameter information)."""

    seq: int
    api: str
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    arguments: bytes | None
    layout: list[tuple[int, int]] | None
    unreadable: str | None
    library: str
    caller: str
    count: int = 1
    kind: str = "launch"
    # --follow-pointers: the maps read behind the argument words that point to device memory ({"offset", "pointer",
    # "delta", "map" (hex)}, and "near" for a map-like window where no map was); None: not followed, and
    # `behind_note` says why where it was tried
    behind: list | None = None
    behind_note: str = ""

    @staticmethod
    def key_of(kernel, api, grid, block, shared_bytes, arguments) -> tuple:
        """What makes two launches the same one (counted, not recorded again)."""
        return (kernel, api, grid, block, shared_bytes, arguments)


EVENT_KINDS = {"encode": Encode, "replace": Replace, "launch": Launch}
_BYTES = ("map_bytes", "arguments")


def to_json(event) -> dict:
    # a shallow copy, not `asdict`: its deep copy of the arguments was most of an audited encode's cost; the
    # values are ints, strings, bytes and lists of ints, which json writes as they are
    d = {name: getattr(event, name) for name in event.__dataclass_fields__}  # in field order, as asdict
    for k in _BYTES:
        if k in d and d[k] is not None:
            d[k] = d[k].hex()
    return d


def from_json(d: dict):
    cls = EVENT_KINDS[d["kind"]]
    names = {f.name for f in fields(cls)}
    d = {k: v for k, v in d.items() if k in names}
    for k in _BYTES:
        if d.get(k) is not None:
            d[k] = bytes.fromhex(d[k])
    for k in ("grid", "block"):
        if k in d:
            d[k] = tuple(d[k])
    if d.get("layout") is not None:
        d["layout"] = [tuple(x) for x in d["layout"]]
    return cls(**d)


def event_line(event) -> str:
    return json.dumps(to_json(event)) + "\n"


def final_line(launches, counts: Counts) -> str:
    """The stream's last line: each launch's final count (a stream holds a launch once, when first seen)."""
    return json.dumps({"kind": "final", "launch_counts": {str(x.seq): x.count for x in launches},
                       "counts": asdict(counts)}) + "\n"


def save_events(events, counts: Counts, path) -> None:
    launches = [e for e in events if isinstance(e, Launch)]
    Path(path).write_text("".join(event_line(e) for e in events) + final_line(launches, counts))


@dataclass
class Stream:
    """A saved stream read back. `complete` is False when the program died before the last line (the events seen
    until then are all there; launch counts are those of first sight); `refused`: why the audit never started."""

    events: list
    counts: Counts
    complete: bool
    refused: str | None = None


def load_events(path) -> Stream:
    events: list[Encode | Replace | Launch] = []
    counts, complete, refused = Counts(), False, None
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            break  # a line cut by a crash
        if d.get("kind") == "final":
            by_seq = {x.seq: x for x in events if isinstance(x, Launch)}
            for seq, n in d["launch_counts"].items():
                if int(seq) in by_seq:
                    by_seq[int(seq)].count = n
            counts, complete = Counts(**d["counts"]), True
        elif d.get("kind") == "refused":
            refused = d["why"]
        elif d.get("kind") in EVENT_KINDS:
            events.append(from_json(d))
    return Stream(events, counts, complete, refused)


@dataclass
class Counts:
    """What the capture saw that it could not record as a map: launches of each reason, calls it could not read."""

    unreadable_launches: dict = field(default_factory=dict)  # reason -> launches
    runtime_launches: int = 0  # launches seen through the runtime API (cudaLaunchKernel*): how cuBLAS/cuDNN launch
    errors: list = field(default_factory=list)  # the capture's own failures, one line each (never raised)
    # kernel name -> the TMA instructions its SASS holds (UTMALDG.2D, UTMACCTL.IV, ...), read from the cubins seen
    # as modules loaded; a str: why it was not read. Launched kernels only.
    kernel_tma: dict = field(default_factory=dict)
