"""The bad-input campaign's machinery: a wrong input is a case, and each case ends in one of four outcomes.

- ``ok``: refused as promised. On the command line: the expected exit status, one line on stderr naming the field,
  no traceback. In Python: the expected `DrvtmaError` subclass, its message naming the field.
- ``traceback``: anything else escaped (a raw Python error, or a traceback printed by the command line).
- ``silent``: accepted (exit status 0, or no exception) although the input is wrong.
- ``wrong``: refused, but not as promised (another exit status or class, a message that does not name the field,
  more than one line).

The cases themselves live in `bad_inputs_cli.py` (every command) and `bad_inputs_api.py` (the public Python API);
`test_bad_inputs_cpu.py` runs them one by one and all together (the campaign's figure).
"""

from __future__ import annotations

import contextlib
import io
import json
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# Files every command-line case may name as {name} in its argv (written once per run into a temporary folder).
# {tmp} is that folder; {missing} a path that does not exist; {unwritable} a path below a regular file (root can
# write anywhere else).
FILES: dict[str, str] = {
    "bad_json": "{not json",
    "list_json": "[1, 2, 3]",
    "number_json": "42",
    "empty_file": "",
    "spec_json": '{"dtype": "float32", "shape": [64, 64], "box": [16, 16]}',
    "spec_no_box_json": '{"dtype": "float32", "shape": [64, 64]}',
    "spec_broken_json": '{"dtype": "float32", "shape": [64, 64], "box": [16, 300]}',
    "syntax_cu": 'extern "C" __global__ void broken(int *p) { int x = ; p[0] = x }\n',
    "not_repro_json": '{"hello": "world"}',
    "repro_partial_json": '{"drvtma_reproducer": 1, "target": "loads"}',
    "repro_unknown_target_json": '{"drvtma_reproducer": 1, "target": "nonesuch", "options": {}, "case": {}, '
                                 '"describe": "", "campaign": {"seed": 1}, "result": {"first_differences": []}}',
    "repro_bad_case_json": '{"drvtma_reproducer": 1, "target": "loads", "options": {}, "case": {"x": 1}, '
                           '"describe": "", "campaign": {"seed": 1}, "result": {"first_differences": []}}',
    "report_no_size_json": '{"target": "loads", "seed": 1, "drvtma_version": "0", "options": {}, "budget": {}, '
                           '"shard": [0, 1], "failures": [], "by": [], "cases": 1}',
    "report_bad_shard_json": '{"target": "loads", "seed": 1, "drvtma_version": "0", "options": {}, "budget": {}, '
                             '"shard": "0/1", "failures": [], "by": [], "cases": 1, "size": 1, "mismatches": 0, '
                             '"seconds": 1}',
    "report_bad_row_json": '{"target": "loads", "seed": 1, "drvtma_version": "0", "options": {}, "budget": {}, '
                           '"shard": [0, 1], "failures": [], "by": [{"x": 1}], "cases": 1, "size": 1, '
                           '"mismatches": 0, "seconds": 1}',
}


def materialize(tmp: Path) -> dict[str, str]:
    """Write FILES under tmp and return the names an argv may use."""
    names = {"tmp": str(tmp), "missing": str(tmp / "no-such-file.json"), "unwritable": str(tmp / "a-file" / "out")}
    (tmp / "a-file").write_text("a regular file, so nothing can be created below it")
    for name, text in FILES.items():
        suffix = ".cu" if name.endswith("_cu") else ".json" if name.endswith("_json") else ".txt"
        path = tmp / f"{name}{suffix}"
        path.write_text(text)
        names[name] = str(path)
    return names


@dataclass(frozen=True)
class CliCase:
    """`drvtma ARGV...` must exit with `status` and print one line on stderr that contains `names` (each,
    case-insensitively). argv items may use {tmp}, {missing}, {unwritable} and the FILES names. `one_line=False`
    lets the message go on below its first line (a compiler's log); the first line must still name the fields."""

    id: str
    argv: tuple[str, ...]
    names: tuple[str, ...]
    status: int = 2
    one_line: bool = True

    def run(self, files: dict[str, str]) -> tuple[str, str]:
        from drvtma.cli.main import main

        argv = [a.format(**files) for a in self.argv]
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = main(argv)
        except SystemExit as exc:  # argparse exits this way
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - the outcome says what escaped
            return "traceback", traceback.format_exc(limit=3)
        text = err.getvalue().strip()
        if "Traceback (most recent call last)" in text + out.getvalue():
            return "traceback", text
        if status == 0:
            return "silent", f"exit 0; stdout: {out.getvalue()[-300:]!r}"
        if status != self.status:
            return "wrong", f"exit {status}, expected {self.status}: {text!r}"
        if not text or (self.one_line and "\n" in text):
            return "wrong", f"stderr is not one line: {text!r}"
        first = text.splitlines()[0]
        missing = [n for n in self.names if n.lower() not in first.lower()]
        if missing:
            return "wrong", f"the message does not name {missing}: {text!r}"
        return "ok", text


@dataclass(frozen=True)
class ApiCase:
    """`call()` must raise `error` (a DrvtmaError subclass) whose message contains `names` (each,
    case-insensitively)."""

    id: str
    call: Callable[[], object]
    error: type
    names: tuple[str, ...] = field(default=())

    def run(self, files: dict[str, str]) -> tuple[str, str]:
        from drvtma.errors import DrvtmaError

        try:
            value = self.call()
        except DrvtmaError as exc:
            text = str(exc)
            if not isinstance(exc, self.error):
                return "wrong", f"{type(exc).__name__}, expected {self.error.__name__}: {text}"
            missing = [n for n in self.names if n.lower() not in text.lower()]
            if missing:
                return "wrong", f"the message does not name {missing}: {text}"
            return "ok", text
        except BaseException:  # noqa: BLE001 - a raw Python error is the defect this campaign looks for
            return "traceback", traceback.format_exc(limit=3)
        return "silent", f"accepted; returned {value!r:.300}"


def summary(results: list[tuple[str, str, str]]) -> dict:
    """The campaign's figure from (id, outcome, detail) rows."""
    counts = {k: sum(1 for _, o, _ in results if o == k) for k in ("ok", "traceback", "silent", "wrong")}
    return {"test": "bad_inputs", "cases": len(results), "tracebacks": counts["traceback"],
            "silent": counts["silent"], "wrong": counts["wrong"]}


def dumps(results) -> str:
    return json.dumps([r for r in results if r[1] != "ok"], indent=1)
