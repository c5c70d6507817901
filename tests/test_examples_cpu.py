"""Every example a `--help` prints is run as written (in a folder holding the files the examples name), here on the
CPU: it exits 0; or 1 where its note says "exit 1" (an example of a broken rule); or, on a machine without a GPU,
3 with the one sentence that says so. Never a usage error (2), never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from drvtma.cli.bench import BENCHMARKS
from drvtma.cli.check import FORMS
from drvtma.cli.main import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"dtype": "float16", "shape": [64, 64], "box": [64, 64]}


def _help(*command: str) -> str:
    """`drvtma COMMAND --help` as the command prints it, in this process: collection runs it for every command and
    benchmark in every pytest-xdist worker, where a Python start per help cost more than the rest of the module.
    The width is a pipe's (COLUMNS, else 80), as a child process writing to a pipe would see."""
    out = io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = columns or "80"
    try:
        with contextlib.redirect_stdout(out):
            try:
                code = main([*command, "--help"])
            except SystemExit as exc:
                code = exc.code
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
    assert code in (0, None), f"drvtma {' '.join(command)} --help: exit {code}"
    return out.getvalue()


def examples(text: str) -> list[tuple[str, str]]:
    """(command, its note) of each `drvtma ...` example: continuation lines joined, the note in parentheses (on
    the line or the indented line below) kept apart."""
    out: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line.startswith("drvtma "):
            i += 1
            continue
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1].rstrip() + " " + lines[i].strip()
        note = ""
        m = re.search(r"\s{2,}\((.*)\)$", line)
        if m:
            line, note = line[:m.start()], m.group(1)
        if i + 1 < len(lines) and re.match(r"^\s+\(.*\)$", lines[i + 1]) and not lines[i + 1].strip().startswith(
                "drvtma"):
            note += lines[i + 1].strip()[1:-1]
            i += 1
        out.append((line.strip(), note))
        i += 1
    return out


def _all_examples() -> list[tuple[str, str]]:
    texts = ([_help(c) for c in COMMANDS] + [_help("check", f) for f in FORMS]
             + [_help("bench", b) for b in BENCHMARKS])
    return [e for t in texts for e in examples(t)]


ALL = _all_examples()
# The fuzz campaigns (seconds to tens of seconds each, and the shard reports `fuzz merge` needs) and the audit run
# with the heavy tests (`-m slow`); every other example is in the default run.
HEAVY = re.compile(r"^drvtma (fuzz (?!list\b)|audit\b)")
CASES = [pytest.param(c, n, marks=pytest.mark.slow) if HEAVY.match(c) else (c, n) for c, n in ALL]


def test_the_helps_have_examples_and_the_reader_finds_them():
    assert len(ALL) >= 20
    assert examples("x\n  drvtma a --b 1 \\\n     --c 2\n     (a note, exit 1)\n") == [("drvtma a --b 1 --c 2",
                                                                                        "a note, exit 1")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """What the examples name: spec files, a training script, a shared volume, shard reports to merge."""
    d = tmp_path_factory.mktemp("examples")
    for name in ("spec.json", "my_map.json"):
        (d / name).write_text(json.dumps(SPEC))
    (d / "train.py").write_text("print('training')\n")
    (d / "shared").mkdir()
    return d


def _shard_reports(d: Path) -> None:
    """The shard reports `drvtma fuzz merge reports` merges (two fuzz processes: made only for the example that
    reads them)."""
    if (d / "reports").is_dir():
        return
    for k in range(2):
        subprocess.run([sys.executable, "-m", "drvtma", "fuzz", "loads", "--fake-device", "--no-db", "--quiet",
                        "--examples", "16", "--seed", "7", "--shard", f"{k}/2", "--out", str(d / "reports")],
                       check=True, capture_output=True, cwd=d, timeout=300)


def _shortened(argv: str) -> str:
    """The example as printed, its campaign capped (--seconds at 3, --examples at 400): the flags and their
    combination are what the test checks, and a 30-second campaign on a GPU says nothing more than a 3-second one."""
    argv = re.sub(r"--seconds (\d+)", lambda m: f"--seconds {min(int(m.group(1)), 3)}", argv)
    return re.sub(r"--examples (\d+)", lambda m: f"--examples {min(int(m.group(1)), 400)}", argv)


def test_the_examples_are_shortened_only_in_length():
    assert _shortened("fuzz encode --seconds 30 --examples 8000 --seed 7") == \
        "fuzz encode --seconds 3 --examples 400 --seed 7"
    assert _shortened("fuzz loads --seconds 2 --examples 16") == "fuzz loads --seconds 2 --examples 16"


@pytest.mark.parametrize("command, note", CASES, ids=[c[:60] for c, _ in ALL])
def test_every_help_example_runs(command, note, folder):
    cwd = folder
    if command.startswith("drvtma fuzz merge"):  # in a folder of its own: other examples write into ./reports too
        cwd = folder / "merging"
        cwd.mkdir(exist_ok=True)
        _shard_reports(cwd)
    if "matplotlib" in note:
        pytest.importorskip("matplotlib", reason="the example draws a PNG (the plot extra)")
    argv = _shortened(command.replace("/shared", str(folder / "shared")).split(" ", 1)[1])
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="1", SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_COUNT="2",
               SLURM_ARRAY_JOB_ID="7", PYTHONPATH=str(ROOT))
    done = subprocess.run(["bash", "-c", f'"{sys.executable}" -m drvtma {argv}'], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)
    err = done.stderr.strip()
    assert "Traceback" not in done.stdout + err, err[-2000:]
    if done.returncode == 3:  # no GPU here: one sentence that says so
        assert "GPU" in err or "driver" in err, err
        assert len(err.splitlines()) == 1, err
    elif done.returncode == 1:
        assert "exit 1" in note, f"exit 1 from an example whose note does not say so: {err[-500:]}"
    else:
        assert done.returncode == 0, f"exit {done.returncode}: {err[-1000:]}"
