"""The sanitizer step (scripts/sanitize.py) on the CPU: every family's command exists, and the sanitizer's summary
lines are counted right, so a dirty run can never read as clean."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sanitize = _load("sanitize")
families = _load("sanitize_family")


@pytest.mark.parametrize("name", sorted(sanitize.FAMILIES))
def test_every_family_runs_a_script_that_exists(name):
    script, *args = sanitize.FAMILIES[name]
    assert Path(script).is_file(), script
    if script == sanitize.FAMILY_SCRIPT:
        assert args and all(a in families.FAMILIES for a in args), args


def test_every_kernel_family_of_sanitize_family_is_in_the_step():
    listed = {a for cmd in sanitize.FAMILIES.values() if cmd[0] == sanitize.FAMILY_SCRIPT for a in cmd[1:]}
    assert set(families.FAMILIES) <= listed


def test_a_clean_memcheck_summary():
    out = sanitize.parse_summary("========= COMPUTE-SANITIZER\nok\n========= ERROR SUMMARY: 0 errors\n")
    assert out == {"errors": 0, "api_errors": 0, "summary": True}


def test_errors_api_errors_and_hazards_are_counted():
    text = ("========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to \"invalid argument\" on CUDA API call "
            "to cuKernelGetParamInfo.\n"
            "========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to \"invalid argument\" on CUDA API call "
            "to cuKernelGetParamInfo.\n"
            "========= ERROR SUMMARY: 3 errors\n")
    out = sanitize.parse_summary(text)
    assert (out["errors"], out["api_errors"], out["summary"]) == (3, 2, True)
    assert out["failed_calls"] == ["cuKernelGetParamInfo: CUDA_ERROR_INVALID_VALUE"]
    races = sanitize.parse_summary("========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n")
    assert (races["hazards"], races["errors"], races["warnings"]) == (2, 2, 0)


def test_no_summary_line_is_not_clean():
    assert sanitize.parse_summary("Traceback (most recent call last):\n")["summary"] is False


def test_the_step_refuses_unknown_families(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["sanitize.py", "--families", "no_such_family"])
    assert sanitize.main() == 2
    assert "no_such_family" in capsys.readouterr().err


# Kernels no sanitizer family runs yet, each with why; the test below fails for any other kernel the
# last recorded sanitizer step did not load, and for an entry here that a later run did load (then drop it).
NOT_SANITIZED: dict[str, str] = {
    "region_digests": "new since the last full gpu-check; the store_probe family launches it",
}
SANITIZER_REPORT = ROOT / "docs" / "results" / "gpu-check.md"  # gpu-check's last full run, its sanitizer step


def _sanitized_kernels() -> set[str]:
    import json

    seen = set()
    for line in SANITIZER_REPORT.read_text().splitlines():
        if line.startswith('- `{') and '"test": "sanitizer"' in line:
            seen |= set(json.loads(line[3:-1]).get("kernels", []))
    return seen


@pytest.mark.slow
def test_every_kernel_ran_under_the_sanitizer_or_is_listed_as_not_yet():
    """Every kernel in cu/ (wgmma_probe_n* as one: the same code per N) appears in the kernels the last sanitizer
    step loaded (its figure lines in docs/results/gpu-check.md), or in NOT_SANITIZED with the reason."""
    import re

    from drvtma.runtime import compiler, sass

    base = lambda name: re.sub(r"_n\d+$", "", name)  # noqa: E731
    kernels = {"gemm_ws"}  # built only with GemmConfig's defines (tests/test_gemm_cpu.py compiles it)
    for src in sorted((ROOT / "cu").rglob("*.cu")):
        rel = src.relative_to(ROOT / "cu").as_posix()
        if not rel.startswith("gemm/"):
            kernels |= set(sass.functions(compiler.compile_cubin(rel)))
    sanitized = {base(k) for k in _sanitized_kernels()}
    missing = {base(k) for k in kernels} - sanitized
    assert missing == set(NOT_SANITIZED), (f"never under the sanitizer: {sorted(missing - set(NOT_SANITIZED))}; "
                                           f"sanitized now, drop from NOT_SANITIZED: {sorted(set(NOT_SANITIZED) - missing)}")

