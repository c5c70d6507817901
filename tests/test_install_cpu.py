"""What a bare install (`pip install .`, no extras) promises, checked without one: the pins in pyproject.toml, the
pytest plugin loading in a project without hypothesis (simulated by blocking the import), and nvdisasm missing
or broken as one DrvtmaError. scripts/smoke-bare-install (.ci/run's second step) checks the real thing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from drvtma.errors import DrvtmaError
from drvtma.runtime import sass

ROOT = Path(__file__).resolve().parents[1]

# Run first in a child: hypothesis (and any of its submodules) cannot be imported, as in a bare install.
BLOCK_HYPOTHESIS = """
import sys
class _NoHypothesis:
    def find_spec(self, name, path=None, target=None):
        if name == "hypothesis" or name.startswith("hypothesis."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoHypothesis())
"""


def child(code: str, *args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """`code` after BLOCK_HYPOTHESIS, in a fresh interpreter that finds this checkout's drvtma."""
    full_env = {key: value for key, value in os.environ.items() if key != "DRVTMA_HYPOTHESIS_PROFILE"}
    full_env.update({"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                     "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})})
    return subprocess.run([sys.executable, "-c", BLOCK_HYPOTHESIS + textwrap.dedent(code), *args],
                          capture_output=True, text=True, cwd=cwd, env=full_env, timeout=120)


def pytest_in(project: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """pytest in `project` with only drvtma's plugin loaded (as its entry point would) and hypothesis blocked."""
    return child("import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))",
                 "-p", "drvtma.testing.plugin", "-p", "no:cacheprovider", "-q", *args, cwd=project, env=env)


# ------------------------------------------------------------------------------------------------ pyproject pins

def test_pyproject_pins_what_the_code_imports():
    """cuda.bindings and cuda.core (not the cuda-python meta package), NVRTC and nvdisasm of CUDA 13; the license
    as an SPDX string, which needs setuptools >= 77 (a table is deprecated)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = {d.split(">")[0].split("<")[0].split("=")[0].strip(): d for d in config["project"]["dependencies"]}
    assert deps["cuda-bindings"].replace(" ", "") == "cuda-bindings>=13.0,<14"
    assert deps["nvidia-cuda-nvrtc"].replace(" ", "") == "nvidia-cuda-nvrtc>=13.0,<14"
    assert deps["nvidia-cuda-nvdisasm"].replace(" ", "") == "nvidia-cuda-nvdisasm>=13.2,<14"
    assert deps["cuda-core"].startswith("cuda-core>=0.7")  # TensorMapDescriptorOptions, bf16 StridedMemoryViews
    assert "cuda-python" not in deps
    assert config["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in config["project"].get("classifiers", []))
    assert config["build-system"]["requires"] == ["setuptools>=77"]
    extras = " ".join(d for ds in config["project"]["optional-dependencies"].values() for d in ds)
    assert "cuda" not in extras, "CUDA packages belong in the main dependencies: a bare install must run them"


def test_the_lower_bounds_ci_installs_are_pyprojects():
    """.ci/lowest.txt (what CI's lower-bounds step installs) pins every dependency, and hypothesis of the test
    extra, at a release of its lower bound: raising a bound without the pin (or the reverse) fails here."""
    import re

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [*config["project"]["dependencies"],
              *(d for d in config["project"]["optional-dependencies"]["test"] if d.startswith("hypothesis"))]
    bounds = {}
    for dep in wanted:
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)", dep)
        assert m, f"{dep}: every dependency needs a lower bound (>=) for CI to install"
        bounds[m.group(1).lower().replace("_", "-")] = m.group(2)
    pins = {}
    for line in (ROOT / ".ci" / "lowest.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    assert set(pins) == set(bounds), f"pinned {sorted(pins)}, bounded {sorted(bounds)}"
    for name, low in bounds.items():
        assert pins[name] == low or pins[name].startswith(low + "."), f"{name}: bound {low}, CI installs {pins[name]}"


# --------------------------------------------------------------------------------------- the plugin, no hypothesis

def test_loading_the_plugin_imports_no_hypothesis_numpy_or_cuda():
    """pytest loads the plugin in every project where drvtma is installed: it must cost nothing heavy."""
    proc = child("""
        import sys
        import drvtma.testing.plugin
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("hypothesis", "numpy", "cuda", "ml_dtypes"))
        print(heavy)
        assert not heavy, heavy
        assert drvtma.testing.plugin.load_profile() is None  # no name, no $DRVTMA_HYPOTHESIS_PROFILE: no import
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_project_that_does_not_use_drvtma_passes_without_hypothesis(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    proc = pytest_in(tmp_path)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "drvtma" not in proc.stdout + proc.stderr


def test_a_strategy_without_hypothesis_says_what_to_install(tmp_path):
    (tmp_path / "test_strategy.py").write_text(textwrap.dedent("""
        from drvtma.testing import valid_specs

        def test_uses_a_strategy():
            valid_specs()
    """))
    proc = pytest_in(tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("DrvtmaError: drvtma.testing.valid_specs needs hypothesis, which is not installed here: "
            "pip install hypothesis (or pip install 'drvtma[test]')") in proc.stdout


def test_drvtma_ctx_without_hypothesis_skips_or_runs(tmp_path):
    """The GPU fixture needs no hypothesis: without a GPU it skips with the driver's reason, never errors."""
    (tmp_path / "test_ctx.py").write_text("def test_ctx(drvtma_ctx):\n    assert drvtma_ctx is not None\n")
    proc = pytest_in(tmp_path, "-rs")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout or "1 skipped" in proc.stdout


def test_a_profile_asked_for_without_hypothesis_is_one_usage_error(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    proc = pytest_in(tmp_path, env={"DRVTMA_HYPOTHESIS_PROFILE": "ci"})
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]  # pytest's usage error
    assert "needs hypothesis, which is not installed here: pip install hypothesis" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_profiles_load_with_hypothesis():
    pytest.importorskip("hypothesis")
    from hypothesis import settings

    from drvtma.compat import hypothesis_profile_name
    from drvtma.testing.plugin import load_profile

    before = hypothesis_profile_name()
    try:
        assert load_profile("gpu-long") == "drvtma-gpu-long"
        assert settings.default.max_examples == 2000 and settings.default.deadline is None
    finally:
        settings.load_profile(before)


# ------------------------------------------------------------------------------------------------------- nvdisasm

@pytest.fixture
def fresh_nvdisasm_lookup():
    sass.nvdisasm_path.cache_clear()
    yield
    sass.nvdisasm_path.cache_clear()


def test_no_nvdisasm_is_one_drvtma_error(monkeypatch, tmp_path, fresh_nvdisasm_lookup):
    monkeypatch.delenv("DRVTMA_NVDISASM", raising=False)
    monkeypatch.setitem(sys.modules, "nvidia", None)  # no NVIDIA wheels: `import nvidia` fails
    monkeypatch.setenv("PATH", str(tmp_path))  # nor one on the PATH
    with pytest.raises(DrvtmaError) as info:
        sass.disassemble(b"not a cubin")
    message = str(info.value)
    assert "\n" not in message
    assert "nvdisasm not found" in message and "pip install 'nvidia-cuda-nvdisasm>=13,<14'" in message
    assert "DRVTMA_NVDISASM" in message


def test_drvtma_nvdisasm_naming_nothing_is_one_drvtma_error(monkeypatch, tmp_path, fresh_nvdisasm_lookup):
    monkeypatch.setenv("DRVTMA_NVDISASM", str(tmp_path / "nvdisasm"))
    with pytest.raises(DrvtmaError, match=r"DRVTMA_NVDISASM = '.*nvdisasm' is not an executable file; fix: "):
        sass.nvdisasm_path()


def test_a_failing_nvdisasm_is_a_drvtma_error(monkeypatch, tmp_path, fresh_nvdisasm_lookup):
    fake = tmp_path / "nvdisasm"
    fake.write_text("#!/bin/sh\necho 'unsupported architecture' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("DRVTMA_NVDISASM", str(fake))
    with pytest.raises(DrvtmaError, match=r"nvdisasm failed \(3\): unsupported architecture; fix: pip install"):
        sass.disassemble(b"not a cubin")


def test_drvtma_compile_without_nvdisasm_exits_1_with_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DRVTMA_NVDISASM": str(tmp_path / "missing"),
           "DRVTMA_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "drvtma", "compile", "runtime/core_roundtrip.cu"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "DRVTMA_NVDISASM" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_package_ships_its_type_annotations():
    """PEP 561: drvtma/py.typed, installed as package data, tells type checkers to read drvtma's annotations."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert (ROOT / "drvtma" / "py.typed").is_file()
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["drvtma"]


def test_every_subpackage_is_installed():
    """pyproject.toml lists its packages one by one: a new subpackage missing there is absent from an install."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "drvtma").rglob("__init__.py")}
    assert found - listed == set(), f"subpackages missing from pyproject.toml's packages: {sorted(found - listed)}"
