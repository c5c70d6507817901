"""scripts/gpu-check on the CPU: every step runs something that exists, and its test counts add up every pytest
step (a failure in any of them is a failure of the check)."""

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
loader = importlib.machinery.SourceFileLoader("gpu_check", str(ROOT / "scripts" / "gpu-check"))
spec = importlib.util.spec_from_loader("gpu_check", loader)
gpu_check = importlib.util.module_from_spec(spec)
loader.exec_module(gpu_check)


@pytest.mark.parametrize("quick", [False, True])
def test_every_step_runs_a_file_or_command_that_exists(quick):
    names = [s["name"] for s in gpu_check.steps(quick)]
    assert len(names) == len(set(names)) and "tests" in names and "sanitizer" in names
    for step in gpu_check.steps(quick):
        cmd = step["cmd"][1:]
        if cmd[0] == "-m":
            assert cmd[1] in ("pytest", "drvtma"), step["name"]
            paths = [a for a in cmd if a.startswith("tests")]
            assert all((ROOT / p).exists() for p in paths), (step["name"], paths)
        else:
            assert (ROOT / cmd[0]).is_file(), (step["name"], cmd[0])


def test_counts_add_every_pytest_step(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "RESULTS", tmp_path)
    (tmp_path / ".gpu-check-junit-a.xml").write_text(
        '<testsuite><testcase classname="t" name="ok"/><testcase classname="t" name="bad"><failure/></testcase>'
        '</testsuite>')
    (tmp_path / ".gpu-check-junit-b.xml").write_text(
        '<testsuite><testcase classname="u" name="skip"><skipped/></testcase><testcase classname="u" name="ok"/>'
        '</testsuite>')
    monkeypatch.setattr(gpu_check, "environment", lambda: ["- device: fake"])
    monkeypatch.setattr(gpu_check, "commit", lambda: "abc")
    import datetime

    counts, failures = gpu_check.write_report(datetime.datetime(2026, 1, 1), [("a", "ok", "1 s")], [], ["a", "b"],
                                              tmp_path / "none.jsonl", "")
    assert counts == {"passed": 2, "failed": 1, "errors": 0, "skipped": 1} and failures == ["t::bad"]
    report = (tmp_path / "gpu-check.md").read_text()
    assert "passed 2, failed 1" in report and "- FAILED: t::bad" in report
