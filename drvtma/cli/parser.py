"""The command line's one argument parser and the value types its commands share.

A usage error is one line on stderr (`drvtma check: --box: wants ...; run drvtma check --help`) and exit status 2,
found before anything touches the GPU: every type here checks its value completely, and names what would be right.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from pathlib import Path
from typing import NamedTuple, NoReturn

from .. import settings

USAGE = 2  # exit status of a usage error (0 ok, 1 rules broken, 2 usage, 3 no usable GPU)


def one_line(text: object) -> str:  # any value: exceptions too
    return " ".join(str(text).split())


def usage_error(prog: str, message: str) -> int:
    """Print a usage error as the parsers do and return its exit status (for checks outside a parser)."""
    print(f"{prog}: {one_line(message)}; run {prog} --help", file=sys.stderr)
    return USAGE


class Entry(NamedTuple):
    """A line of a dispatch table (`main.COMMANDS`, `bench.BENCHMARKS`): the module and function (argv -> exit
    status) that run it, imported only when it runs, and its one-line help."""

    module: str
    function: str
    help: str

    def run(self, argv: list[str]) -> int:
        return int(getattr(importlib.import_module(self.module), self.function)(argv) or 0)


def listing(table: dict[str, Entry], width: int) -> list[str]:
    """A dispatch table's names and helps, one indented line each."""
    return [f"  {name:<{width}} {entry.help}" for name, entry in table.items()]


def dispatch(prog: str, what: str, table: dict[str, Entry], argv: list[str], usage, run=None) -> int:
    """`prog NAME ARGS...`: NAME's entry runs ARGS (through `run(name, args)` where given); -h / --help / help
    prints `usage()`; no NAME or an unknown one is a usage error that lists the names."""
    if not argv:
        return usage_error(prog, f"a {what} is needed: {', '.join(table)}")
    name, rest = argv[0], argv[1:]
    if name in ("-h", "--help", "help"):
        print(usage())
        return 0
    if name not in table:
        return usage_error(prog, f"unknown {what} {name!r}; {what}s: {', '.join(table)}")
    return run(name, rest) if run is not None else table[name].run(rest)


class Parser(argparse.ArgumentParser):
    """argparse, but `error` prints one line that names the option, the value and what would be right."""

    def __init__(self, *args, **kwargs):
        if kwargs.get("epilog"):  # example runs keep their lines
            kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        message = message.removeprefix("argument ")
        self.exit(USAGE, f"{self.prog}: {one_line(message)}; run {self.prog} --help\n")


def _fail(what: str, text: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"wants {what}, got {text!r}")


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip().replace("_", ""), 0)
    except (ValueError, AttributeError):
        _fail(what, text)


def int_at_least(low: int, what: str | None = None, high: int | None = None):
    """A type: a whole number >= low (decimal or 0x hex), and <= high where given."""
    what = what or ("a positive whole number" if low == 1 else f"a whole number >= {low}")
    if high is not None:
        what += f" up to {high:,}"

    def parse(text: str) -> int:
        value = _int(text, what)
        if value < low or (high is not None and value > high):
            _fail(what, text)
        return value

    return parse


count = int_at_least(1)  # runs, examples, loads, threads: at least one
natural = int_at_least(0)  # warm-ups, seeds, hold times: zero allowed


def address(text: str) -> int:
    """A 64-bit address or descriptor value (0 .. 2^64 - 1)."""
    what = "an address 0 .. 0xffffffffffffffff (decimal or 0x hex)"
    value = _int(text, what)
    if not 0 <= value < 1 << 64:
        _fail(what, text)
    return value


def seconds(text: str) -> float:
    what = "a positive number of seconds"
    try:
        value = float(text)
    except ValueError:
        _fail(what, text)
    if not (math.isfinite(value) and value > 0):
        _fail(what, text)
    return value


items = settings.names  # a comma-separated list's items, stripped, the empty ones dropped


def list_of(item, what: str, *, separators: str = ","):
    """A type: values separated by any of `separators`, each `item(text)` (which returns the value or raises
    ValueError / ArgumentTypeError), at least one; otherwise "wants `what`" with the whole text."""

    def parse(text: str) -> tuple:
        joined = text
        for sep in separators:
            joined = joined.replace(sep, ",")
        try:
            values = tuple(item(v) for v in items(joined))
        except (ValueError, argparse.ArgumentTypeError):
            values = ()
        if not values:
            _fail(what, text)
        return values

    return parse


def choice_list(choices, what: str):
    """A type: comma-separated values, each one of `choices`."""

    def item(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text

    return list_of(item, what)


def int_list(low: int):
    """A type: comma-separated whole numbers >= low ('1,2,4' -> (1, 2, 4))."""
    what = ("comma-separated positive whole numbers such as 1,2,4" if low == 1 else
            f"comma-separated whole numbers >= {low} such as {low},{low + 1}")
    return list_of(int_at_least(low, what), what)


count_list = int_list(1)
natural_list = int_list(0)


def _writable_base(path: Path, text: str, what: str, fix: str) -> None:
    """The nearest existing folder at or above `path` must be writable (checked now, so a long run does not fail at
    its end)."""
    base = path.absolute()
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot {what} {text!r} ({base} is not a writable folder); {fix}")


def out_dir(text: str) -> str:
    """A folder drvtma may create or write into."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder; give a folder to write into")
    _writable_base(path, text, "create or write", "give a writable folder")
    return text


def existing_file(text: str) -> str:
    """A file that exists and can be read."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file; give the path of an existing file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be read; give a readable file")
    return text


def _overwritable(text: str) -> Path:
    """The path, where nothing there stops drvtma writing a file: not a folder, not a read-only file."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not writable; give a writable file")
    return path


def out_file(text: str) -> str:
    """A file drvtma may create or overwrite."""
    path = _overwritable(text)
    if not path.parent.absolute().is_dir():
        raise argparse.ArgumentTypeError(f"cannot create {text!r}: there is no folder {str(path.parent)!r}; give a "
                                         "file in an existing folder")
    _writable_base(path.parent, text, "create", "give a file in a writable folder")
    return text


def out_file_and_folder(text: str) -> str:
    """A file drvtma may create or overwrite, in a folder it may create."""
    out_dir(str(_overwritable(text).parent))
    return text


def in_file(text: str) -> Path:
    """An existing, readable file."""
    path = Path(text)
    if not path.is_file():
        why = "is a folder" if path.is_dir() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {why}; give an existing file")
    return path


def json_object(path: Path, what: str) -> dict:
    """The JSON object in a file; ArgumentTypeError (naming the file and what it should hold) otherwise."""
    try:
        value = json.loads(path.read_text())
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(f"{str(path)!r} is not valid JSON ({one_line(exc)}); it should hold "
                                         f"{what}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{str(path)!r} holds a JSON {type(value).__name__}, not an object; it "
                                         f"should hold {what}")
    return value
