"""drvtma.settings is the one reader of the DRVTMA_* environment variables and documents each; drvtma.compat
answers the version questions. No GPU needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drvtma import compat, settings
from drvtma.errors import ArgumentError

ROOT = Path(__file__).resolve().parents[1]
READ = re.compile(r"""(?:environ\.get|getenv)\(\s*["'](DRVTMA_\w+)|environ\[\s*["'](DRVTMA_\w+)["']\](?!\s*=)""")


def test_each_setting_has_a_name_default_and_meaning():
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names)) and all(n.startswith("DRVTMA_") for n in names)
    assert all(s.default and s.meaning for s in settings.SETTINGS)


def test_no_module_reads_a_drvtma_variable_but_settings():
    """The package, the scripts and the tests read DRVTMA_* through drvtma.settings (writing one for a child, or
    saving and restoring one around a change, is not reading it)."""
    paths = [*ROOT.glob("drvtma/**/*.py"), *ROOT.glob("scripts/*"), *ROOT.glob("tests/*.py")]
    found = [f"{p.relative_to(ROOT)}: {m.group(1) or m.group(2)}" for p in paths if p.is_file() and p.name != "settings.py"
             for m in READ.finditer(p.read_text(errors="replace"))]
    allowed = {"scripts/bench_core.py: DRVTMA_CACHE_DIR"}  # saved before it is set for a cold compile, then restored
    assert set(found) <= allowed, found


def test_values_are_read_at_each_call_and_typed(monkeypatch):
    monkeypatch.delenv("DRVTMA_FUZZ_SEED", raising=False)
    assert settings.FUZZ_SEED.get() == 1
    monkeypatch.setenv("DRVTMA_FUZZ_SEED", "7")
    assert settings.FUZZ_SEED.get() == 7
    monkeypatch.setenv("DRVTMA_FUZZ_SECONDS", "0.5")
    assert settings.FUZZ_SECONDS.get() == 0.5
    monkeypatch.setenv("DRVTMA_CACHE_DIR", "")  # empty is unset
    assert settings.CACHE_DIR.get() is None


@pytest.mark.parametrize("value, no_cache, kernel_names", [(None, False, True), ("0", False, False),
                                                          ("1", True, True), ("yes", True, True)])
def test_switches_are_off_only_at_zero(monkeypatch, value, no_cache, kernel_names):
    for name in ("DRVTMA_NO_CACHE", "DRVTMA_CUBLAS_KERNEL_NAMES"):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert settings.NO_CACHE.get() is no_cache and settings.CUBLAS_KERNEL_NAMES.get() is kernel_names


def test_a_value_of_the_wrong_kind_names_the_variable(monkeypatch):
    monkeypatch.setenv("DRVTMA_FUZZ_SPECS", "many")
    with pytest.raises(ArgumentError, match=r"DRVTMA_FUZZ_SPECS = 'many'.*fix: set it to an integer or unset it "
                                            r"\(default 500\)"):
        settings.FUZZ_SPECS.get()


def test_compat_answers_for_the_installed_versions():
    from types import SimpleNamespace

    from cuda.core.utils import StridedMemoryView

    assert compat.strided_view_maker("dlpack") == getattr(StridedMemoryView, "from_dlpack", StridedMemoryView)
    assert compat.kernel_param_count(SimpleNamespace()) is None
    query = object()
    assert compat.kernel_param_count(SimpleNamespace(cuKernelGetParamCount=query)) is query
    assert compat.hypothesis_choices_to_bytes() is None or callable(compat.hypothesis_choices_to_bytes())
