"""Fault children import the drvtma their parent runs, and keep the caller's PYTHONPATH (a child that imported
another drvtma once tested the wrong code)."""

import os

import drvtma
from drvtma.testing.children import child_env, run_child, source_root


def test_the_callers_pythonpath_is_kept_and_the_source_root_comes_first(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    paths = child_env()["PYTHONPATH"].split(os.pathsep)
    assert paths[-2:] == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert source_root() is not None and paths[0] == str(source_root())  # these tests run from the checkout
    monkeypatch.setenv("PYTHONPATH", str(source_root()))
    assert child_env()["PYTHONPATH"] == str(source_root())  # not added twice


def test_a_child_imports_the_same_drvtma_and_sees_the_callers_modules(monkeypatch, tmp_path):
    (tmp_path / "callers_helper.py").write_text("VALUE = 42\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    proc = run_child("import drvtma, callers_helper; print(drvtma.__file__, callers_helper.VALUE)", timeout=60,
                     cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [drvtma.__file__, "42"]
