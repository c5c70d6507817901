"""scripts/gpu-check on the CPU: every step runs something that exists, the tests spread over pytest-xdist workers
with the timing tests alone, its test counts add up every pytest step (a failure in any of them is a failure of the
check), and the report's header carries the wall time and a verdict that is green only when all is."""

import importlib.machinery
import importlib.util
import sys
import types
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


def _step(steps, name):
    return next(s for s in steps if s["name"] == name)


def test_tests_spread_over_xdist_workers_and_timing_tests_run_alone():
    steps = gpu_check.steps(False, workers=8)
    spread, timing = _step(steps, "tests")["cmd"], _step(steps, "tests_timing")["cmd"]
    assert spread[spread.index("-n") + 1] == "8" and spread[spread.index("--dist") + 1] == "loadgroup"
    assert spread[spread.index("-m", 3) + 1] == "not timing" and timing[timing.index("-m", 3) + 1] == "timing"
    assert "-n" not in timing and "-n" not in _step(steps, "gemm_tests")["cmd"]
    for cmd in (spread, timing):  # the whole tests folder, so test_bad_inputs_cpu.py records the bad_inputs figure
        assert cmd[-1] == "tests" and "tests/test_bad_inputs_cpu.py" not in cmd
        assert cmd[cmd.index("--ignore") + 1] == "tests/test_gemm_gpu.py"
    assert "-n" not in _step(gpu_check.steps(False, workers=0), "tests")["cmd"]
    assert (ROOT / "tests" / "test_bad_inputs_cpu.py").is_file()


def test_every_gemm_step_is_in_the_default_run_within_the_budget():
    names = [s["name"] for s in gpu_check.steps(False, workers=8)]
    assert {"gemm_tests", "bench_gemm", "gemm_profile", "bench_conv", "gemm_claims"} <= set(names)
    assert gpu_check.BUDGET_S <= 540
    assert all(s["timeout"] <= gpu_check.BUDGET_S for s in gpu_check.steps(False, workers=8))


def test_the_gemm_profile_covers_every_point_the_gemm_bench_times():
    """A point that misses cuBLAS gets its account (clock, issue rate, waits, epilogue, tail) from the same run."""
    steps = gpu_check.steps(False, workers=8)
    bench, profile = _step(steps, "bench_gemm")["cmd"], _step(steps, "gemm_profile")["cmd"]
    assert "--profile" in profile and "--shapes" not in bench and "--shapes" not in profile
    assert bench[bench.index("--dtypes") + 1] == profile[profile.index("--dtypes") + 1]


def test_timing_marker_is_registered_and_used():
    assert "timing:" in (ROOT / "tests" / "conftest.py").read_text()
    marked = [p.name for p in sorted((ROOT / "tests").glob("test_*gpu.py")) if "pytest.mark.timing" in p.read_text()]
    assert {"test_fuzz_gpu.py", "test_probe_gpu.py", "test_cluster_gpu.py"} <= set(marked)


def test_without_xdist_the_tests_run_serially_and_the_report_says_why(monkeypatch):
    monkeypatch.setattr(gpu_check, "have_xdist", lambda: False)
    workers, line = gpu_check.tests_mode(8)
    assert workers == 0 and "pytest-xdist is not installed" in line
    monkeypatch.setattr(gpu_check, "have_xdist", lambda: True)
    assert gpu_check.tests_mode(8)[0] == 8 and gpu_check.tests_mode(0)[0] == 0


def _report(tmp_path, monkeypatch, status_rows, junit: dict, run=None):
    import datetime

    monkeypatch.setattr(gpu_check, "RESULTS", tmp_path)
    monkeypatch.setattr(gpu_check, "environment", lambda: ["- device: fake"])
    monkeypatch.setattr(gpu_check, "commit", lambda: "abc")
    for name, xml in junit.items():
        if xml is not None:
            (tmp_path / f".gpu-check-junit-{name}.xml").write_text(xml)
    counts, _ = gpu_check.write_report(datetime.datetime(2026, 1, 1), status_rows, [], list(junit),
                                       tmp_path / "none.jsonl", "", run=run)
    return counts, (tmp_path / "gpu-check.md").read_text()


OK_XML = '<testsuite><testcase classname="t" name="ok"/></testsuite>'


def test_header_has_the_wall_time_and_a_green_verdict_only_when_all_is_ok(tmp_path, monkeypatch):
    run = {"wall_s": 431.25, "budget_s": 540, "done": True, "tests": "8 pytest-xdist workers"}
    _, report = _report(tmp_path, monkeypatch, [("tests", "ok", "1 s")], {"tests": OK_XML}, run)
    assert "- wall time: 431.2 s for the whole run (budget 540 s)" in report
    assert "- result: green: every step ok, failed 0, errors 0" in report and "- tests: 8 pytest-xdist" in report
    _, report = _report(tmp_path, monkeypatch, [("tests", "ok", "1 s"), ("gemm_claims", "not run (out of time "
                        "budget)", "")], {"tests": OK_XML}, {**run, "done": False})
    assert "- result: NOT green" in report and "gemm_claims" in report and "so far" in report


def test_a_pytest_step_without_a_junit_file_is_an_error_not_failed_0(tmp_path, monkeypatch):
    counts, report = _report(tmp_path, monkeypatch, [("tests", "FAILED (exit timeout)", "240 s")], {"tests": None})
    assert counts["errors"] == 1 and "NOT green" in report and "pytest did not finish" in report
    counts, report = _report(tmp_path, monkeypatch, [("tests", "FAILED (exit 1)", "9 s")], {"tests": "<testsu"})
    assert counts["errors"] == 1 and "NOT green" in report


def test_unreadable_figure_lines_are_listed_not_fatal(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"test": "a", "n": 1}\n{"test": "b", tru\n')
    assert gpu_check.read_figures(path) == ['{"n": 1, "test": "a"}', 'unreadable figure line: {"test": "b", tru']


def test_a_step_past_its_timeout_is_ended_with_every_process_it_started(tmp_path):
    import os
    import time

    pid_file = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
              f"time.sleep(60)']); open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    t0 = time.perf_counter()
    rc, output = gpu_check.run_step([sys.executable, "-c", script], dict(os.environ), timeout=3)
    assert rc == "timeout" and "killed after 3 s" in output and time.perf_counter() - t0 < 30
    pid = int(pid_file.read_text())
    for _ in range(50):  # the grandchild is gone (reaped by init once its parent died)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"process {pid} outlived the step's timeout")


def test_the_sanitizer_runs_before_the_tests_that_read_its_record():
    """tests/test_sanitize_cpu.py reads the sanitizer's figure lines from docs/results/gpu-check.md, which the run
    rewrites after every step: the sanitizer step must come first, or a run after a kernel change fails on the
    previous report."""
    names = [s["name"] for s in gpu_check.steps(False, workers=8)]
    assert names.index("sanitizer") < names.index("tests") < names.index("tests_timing")


def test_portable_build_step_counts_its_junit(tmp_path):
    assert "portable_build" in [s["name"] for s in gpu_check.steps(False, workers=4)]
    loader = importlib.machinery.SourceFileLoader("portable_build", str(ROOT / "scripts" / "portable_build.py"))
    spec = importlib.util.spec_from_loader("portable_build", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    junit = tmp_path / "j.xml"
    junit.write_text('<testsuite><testcase name="a"/><testcase name="b"><skipped/></testcase>'
                     '<testcase name="c"><error/></testcase><testcase name="d"/></testsuite>')
    assert mod.outcome_counts(junit) == {"passed": 2, "failed": 1, "skipped": 1}
    assert mod.outcome_counts(tmp_path / "missing.xml")["failed"] == 1


def test_every_step_of_the_full_run_has_a_row_in_the_committed_report():
    """Every step of the full run has a row in HEAD's committed report. Inside a gpu-check run the check is moot:
    HEAD's report is the one the run replaces, and it predates any step the run's commit adds."""
    import subprocess

    from drvtma import settings

    full = [s["name"] for s in gpu_check.steps(False, workers=8)]
    if settings.REPORT_JSONL.get():
        pytest.skip("inside a gpu-check run: HEAD's report is the one this run replaces")
    if not (ROOT / ".git").exists():
        pytest.skip("no git history here: the committed report cannot be told from a run rewriting it")
    report = subprocess.run(["git", "-C", str(ROOT), "show", "HEAD:docs/results/gpu-check.md"], capture_output=True,
                            text=True).stdout
    missing = [name for name in full if f"| {name} | " not in report]
    assert not missing, f"the committed report lacks steps of the full run: {missing}"

def test_fuzz_shards_add_the_campaigns_over_that_many_processes_and_refuse_one(monkeypatch, capsys):
    names = [s["name"] for s in gpu_check.steps(False, workers=8, fuzz_shards=4)]
    assert {"fuzz_loads_4_shards", "fuzz_stores_4_shards", "fuzz_reductions_4_shards"} <= set(names)
    step = next(s for s in gpu_check.steps(False, workers=8, fuzz_shards=4) if s["name"] == "fuzz_loads_4_shards")
    assert step["cmd"][step["cmd"].index("--devices") + 1] == "0,0,0,0"
    pooled = {s["name"]: s["cmd"] for s in gpu_check.steps(False, workers=8, fuzz_shards=4) if "oracle" in s["name"]}
    assert set(pooled) == {"fuzz_loads_4_oracle_workers", "fuzz_im2col_4_oracle_workers",
                           "fuzz_stores_4_oracle_workers", "fuzz_reductions_4_oracle_workers",
                           "fuzz_loads_2_shards_2_oracle_workers"}
    assert [cmd[cmd.index("--oracle-workers") + 1] for cmd in pooled.values()] == ["4", "4", "4", "4", "2"]
    both = pooled["fuzz_loads_2_shards_2_oracle_workers"]
    assert both[both.index("--devices") + 1] == "0,0"
    profiled = {s["name"]: s["cmd"] for s in gpu_check.steps(False, workers=8, fuzz_shards=4)
                if s["name"].startswith("fuzz_") and "profile" in s["name"]}
    assert set(profiled) == {"fuzz_loads_profile", "fuzz_im2col_profile", "fuzz_stores_profile"}
    assert all(cmd[cmd.index("--profile") + 1].endswith(".prof") and "--oracle-workers" in cmd
               for cmd in profiled.values())
    assert not [n for n in gpu_check.steps(False, workers=8) if "shards" in n["name"] or "oracle" in n["name"]
                or n["name"].startswith("fuzz_") and "profile" in n["name"]]
    monkeypatch.setattr("sys.argv", ["gpu-check", "--fuzz-shards", "1"])
    with pytest.raises(SystemExit) as done:
        gpu_check.main()
    assert done.value.code == 2 and "--fuzz-shards" in capsys.readouterr().err


def _fake_machine(monkeypatch, tmp_path, clock: list, run_step, steps: list) -> None:
    """gpu-check over fakes: its results in tmp_path, commit abc, `steps` run by `run_step`, which advances
    `clock[0]` (what gpu-check reads as time)."""
    monkeypatch.setattr(gpu_check, "RESULTS", tmp_path)
    monkeypatch.setattr(gpu_check, "environment", lambda: ("- device: fake",))
    monkeypatch.setattr(gpu_check, "commit", lambda: "abc")
    monkeypatch.setattr(gpu_check, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(gpu_check, "run_step", run_step)
    monkeypatch.setattr(gpu_check, "steps", lambda *a, **k: steps)


def _gpu_check(monkeypatch, tmp_path, *argv: str) -> tuple[int, str]:
    """(gpu-check's exit status, its report) for these options."""
    monkeypatch.setattr(sys, "argv", ["gpu-check", *argv, "--out", ""])
    return gpu_check.main(), (tmp_path / "gpu-check.md").read_text()


def _step_results(report: str) -> list[str]:
    """The result column of the steps a, b and c."""
    return [line.split(" | ")[1] for line in report.splitlines() if line.startswith(("| a ", "| b ", "| c "))]


def test_resume_runs_only_the_steps_not_run_and_refuses_another_runs_state(tmp_path, monkeypatch):
    """A run cut by its budget goes on with --resume, on a fresh machine too (only the state file kept): the steps it
    ran keep their rows, junit counts and figure lines, the rest run, and the report's wall time is the parts' sum;
    a saved run of another commit is refused with one line. The clock and the steps are fakes: a step advances the
    clock by its duration and writes what a real one would (a pytest step its junit file, each a figure line)."""
    from drvtma import settings

    clock = [0.0]
    durations = {"a": 1.0, "b": 5.0, "c": 1.0}

    def run_step(cmd, env, timeout):
        name = cmd[-1]
        clock[0] += durations[name]
        if "--junitxml" in cmd:
            Path(cmd[cmd.index("--junitxml") + 1]).write_text(
                f'<testsuite><testcase classname="t" name="{name}"/></testsuite>')
        with open(env[settings.REPORT_JSONL.name], "a") as f:
            f.write(f'{{"test": "{name}"}}\n')
        return 0, f"step {name} ran"

    _fake_machine(monkeypatch, tmp_path, clock, run_step, [
        {"name": "a", "cmd": [sys.executable, "-m", "pytest", "a"], "timeout": 60},
        {"name": "b", "cmd": [sys.executable, "b"], "timeout": 60},
        {"name": "c", "cmd": [sys.executable, "c"], "timeout": 60}])
    # a budget of 15 s: a and b start with 10 s or more left, c (after 6 s) with 9 s: not run
    status, report = _gpu_check(monkeypatch, tmp_path, "--budget-s", "15")
    assert status == 1
    assert "| a | ok |" in report and "| b | ok |" in report and "| c | not run (out of time budget) |" in report
    for leftover in [*tmp_path.glob(".gpu-check-junit-*.xml"), tmp_path / ".gpu-check-figures.jsonl"]:
        leftover.unlink()  # a fresh machine: only the state file came along
    status, report = _gpu_check(monkeypatch, tmp_path, "--budget-s", "15", "--resume")
    assert status == 0 and _step_results(report) == ["ok", "ok", "ok"]
    assert "- wall time: 7.0 s for the whole run in 2 parts (--resume)" in report
    assert "- result: green" in report and "passed 1, failed 0" in report
    assert '{"test": "a"}' in report and '{"test": "c"}' in report
    monkeypatch.setattr(gpu_check, "commit", lambda: "def")
    with pytest.raises(SystemExit, match="saved run's commit is 'abc'"):
        gpu_check.main()


def test_a_step_the_budget_cuts_short_runs_again_on_resume(tmp_path, monkeypatch):
    """A step killed because the budget ran out (not by its own timeout) is "cut by the time budget", not a failure
    of the step: --resume runs it again, and the report keeps only its new row and output."""
    clock, durations = [0.0], {"a": 1.0, "b": 20.0, "c": 1.0}

    def run_step(cmd, env, timeout):
        name = cmd[-1]
        if durations[name] > timeout:
            clock[0] += timeout
            return "timeout", f"step {name} killed"
        clock[0] += durations[name]
        return 0, f"step {name} ran"

    _fake_machine(monkeypatch, tmp_path, clock, run_step,
                  [{"name": n, "cmd": [sys.executable, n], "timeout": 60} for n in "abc"])
    status, report = _gpu_check(monkeypatch, tmp_path, "--budget-s", "12")
    assert status == 1  # b gets the 11 s left of its 60 and is killed; c never starts
    assert "| b | cut by the time budget |" in report and "| c | not run (out of time budget) |" in report
    durations["b"] = 5.0
    status, report = _gpu_check(monkeypatch, tmp_path, "--budget-s", "100", "--resume")
    assert status == 0 and _step_results(report) == ["ok", "ok", "ok"]
    assert "step b ran" in report and "step b killed" not in report and report.count("### b (") == 1
    assert "- result: green" in report


def test_a_step_its_own_timeout_kills_is_a_failure_that_resume_keeps(tmp_path, monkeypatch):
    """A step that outruns its own timeout with budget to spare failed: --resume does not run it again."""
    clock = [0.0]

    def run_step(cmd, env, timeout):
        clock[0] += timeout
        return "timeout", "killed"

    _fake_machine(monkeypatch, tmp_path, clock, run_step, [{"name": "a", "cmd": [sys.executable, "a"], "timeout": 5}])
    status, report = _gpu_check(monkeypatch, tmp_path, "--budget-s", "100")
    assert status == 1 and "| a | FAILED (exit timeout) |" in report
    status, _ = _gpu_check(monkeypatch, tmp_path, "--budget-s", "100", "--resume")
    assert status == 1 and clock[0] == 5.0  # not run again
