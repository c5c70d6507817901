"""The command line as users run it (`python -m drvtma ...` in a child process): a usage error is one line on
stderr, exit status 2, and no traceback; help prints help and documents the exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def drvtma(*argv: str, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "drvtma", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


@pytest.mark.parametrize("argv, names", [
    (("decode", "xyz"), ("drvtma decode", "HEX", "xyz")),
    (("check", "--dtype", "f32", "--shape", "64", "--box", "16", "--address=-16"), ("drvtma check", "--address",
                                                                                     "-16")),
    (("fuzz", "loads", "--examples=-5", "--fake-device"), ("drvtma fuzz", "--examples", "-5")),
    (("wgmma", "--tile", "128"), ("drvtma wgmma", "--tile", "MNxK")),
    (("repro", "no-such-reproducer.json"), ("drvtma repro", "no-such-reproducer.json")),
], ids=["decode-not-hex", "check-negative-address", "fuzz-negative-examples", "wgmma-tile", "repro-missing"])
def test_usage_error_is_one_line_and_exit_2(argv, names, tmp_path):
    run = drvtma(*argv, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert all(n in lines[0] for n in names), lines[0]
    assert lines[0].endswith(f"run {names[0]} --help")


def test_help_prints_help_and_exit_codes(tmp_path):
    top = drvtma("--help", cwd=tmp_path)
    assert top.returncode == 0 and "exit status" in top.stdout
    assert all(f"  {code}  " in top.stdout for code in "0123")
    info = drvtma("info", "--help", cwd=tmp_path)  # help, not the command (which needs the driver)
    assert info.returncode == 0 and info.stdout.startswith("usage: drvtma info") and not info.stderr
    check = drvtma("check", "--help", cwd=tmp_path)
    assert check.returncode == 0
    for accepted in ("bfloat16", "128B", "16B", "256B", "nan", "examples:", "drvtma check --dtype"):
        assert accepted in check.stdout, accepted


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`drvtma --help | head -1`: the pipe closes under the writer; the command ends quietly."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    read, write = os.pipe()
    os.close(read)  # nobody will read: the first write meets a closed pipe
    with os.fdopen(write, "w") as out:
        run = subprocess.run([sys.executable, "-m", "drvtma", "--help"], stdout=out, stderr=subprocess.PIPE,
                             text=True, env=env, timeout=120)
    assert "Traceback" not in run.stderr and "BrokenPipeError" not in run.stderr, run.stderr
    assert run.returncode == 1
