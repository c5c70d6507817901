"""The layout stays true: rooms import only the rooms docs/CONTRACT.md allows, no module grows past 450 lines, the
public API of the top level keeps working, and every room ships its kernels."""

import doctest
import subprocess
import sys
from pathlib import Path

import pytest

import drvtma

from support import layering

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(drvtma.__file__).resolve().parent
MAX_LINES = 450


def test_checker_catches_a_forbidden_import(tmp_path):
    """The checker on a small fake tree: an import down the layers passes, one up them (even in a function) fails."""
    files = {"pkg/__init__.py": "from .high import b\n", "pkg/errors.py": "", "pkg/low/__init__.py": "",
             "pkg/low/a.py": "from ..errors import E\nimport pkg.low.a\n", "pkg/high/__init__.py": "",
             "pkg/high/b.py": "from ..low import a\nfrom pkg.errors import E\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    layers = {"errors": set(), "low": {"errors"}, "high": {"errors", "low"}}
    assert layering.violations(tmp_path / "pkg", layers) == []
    (tmp_path / "pkg/low/c.py").write_text("def late():\n    from ..high import b\n")
    (tmp_path / "pkg/low/d.py").write_text("from pkg import high\n")
    (tmp_path / "pkg/extra").mkdir()
    (tmp_path / "pkg/extra/e.py").write_text("")
    found = [str(v) for v in layering.violations(tmp_path / "pkg", layers)]
    assert found == ["pkg/extra/e.py:0 imports (not in the layers table): room extra may import only nothing",
                     "pkg/low/c.py:2 imports pkg.high: room low may import only errors",
                     "pkg/low/d.py:1 imports pkg.high: room low may import only errors"]


def test_checker_docstring_example():
    assert doctest.testmod(layering).failed == 0


def test_rooms_import_only_what_the_contract_allows():
    layers = layering.read_layers(ROOT / "docs" / "CONTRACT.md")
    assert {"errors", "runtime", "tma", "b08", "testing", "cli"} <= set(layers)
    assert layers["runtime"] == {"errors", "settings", "compat"}, "runtime must know nothing of tensor maps"
    assert layers["settings"] <= {"errors"} and layers["compat"] <= {"errors"}, "settings and compat import no room"
    found = layering.violations(PACKAGE, layers)
    assert not found, "\n".join(map(str, found))
    # Inside tma, a mode room imports only those below it in the tma-rooms block; every mode room is in it.
    order = layering.read_layers(ROOT / "docs" / "CONTRACT.md", "tma-rooms")
    rooms = {p.parent.name for p in (PACKAGE / "tma").glob("*/__init__.py")}
    assert rooms == set(order), f"tma's sub-rooms {sorted(rooms)}, the tma-rooms block {sorted(order)}"
    found_inside = layering.sub_room_violations(PACKAGE, "tma", order)
    assert not found_inside, "\n".join(found_inside)


def test_checker_finds_an_import_loop_a_function_hides(tmp_path):
    """A loop through a function-level import fails, named module by module; one closed only by an import under
    `if TYPE_CHECKING:` (never run) does not, nor does a module importing its own package's __init__ names."""
    files = {"pkg/__init__.py": "", "pkg/room/__init__.py": "from .a import A\n",
             "pkg/room/a.py": "from typing import TYPE_CHECKING\nfrom . import b\nA = 1\n"
                              "if TYPE_CHECKING:\n    from .c import C\n",
             "pkg/room/b.py": "import pkg.room.c\n", "pkg/room/c.py": "from pkg.room import a\nC = 1\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    loops = [str(c) for c in layering.cycles(layering.module_graph(tmp_path / "pkg"))]
    assert loops == ["pkg.room.a -> pkg.room.b (pkg/room/a.py:2) -> pkg.room.c (pkg/room/b.py:1) "
                     "-> pkg.room.a (pkg/room/c.py:1)"]
    (tmp_path / "pkg/room/c.py").write_text("def late():\n    from .a import A\n    return A\nC = 1\n")
    assert [str(c) for c in layering.cycles(layering.module_graph(tmp_path / "pkg"))] == [
        "pkg.room.a -> pkg.room.b (pkg/room/a.py:2) -> pkg.room.c (pkg/room/b.py:1) "
        "-> pkg.room.a (pkg/room/c.py:2, in a function)"]
    (tmp_path / "pkg/room/c.py").write_text("from pkg.room import A\nC = 1\n")  # __init__'s name: a loop too
    assert len(layering.cycles(layering.module_graph(tmp_path / "pkg"))) == 1
    (tmp_path / "pkg/room/c.py").write_text("C = 1\n")
    assert layering.cycles(layering.module_graph(tmp_path / "pkg")) == []


def test_no_import_loops():
    """No module of drvtma reaches itself through imports, function-level ones included (CONTRACT.md, Layers); nor
    does a package: each module of tma imported first, before any other drvtma module (as a user's first import
    would be), loads without meeting its package half-initialised."""
    graph = layering.module_graph(PACKAGE)
    assert len(graph.modules) > 100 and sum(map(len, graph.edges.values())) > 300
    found = layering.cycles(graph)
    assert not found, "import loops:\n" + "\n".join(map(str, found))
    names = sorted(name for name in graph.modules if name.startswith("drvtma.tma"))
    code = ("import importlib, sys\nfor name in sys.argv[1:]:\n"
            "    for m in [m for m in sys.modules if m == 'drvtma' or m.startswith('drvtma.')]:\n"
            "        del sys.modules[m]\n"
            "    importlib.import_module(name)\n")
    proc = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert len(names) > 30 and proc.returncode == 0, proc.stderr[-2000:]


def test_contract_names_every_module():
    missing = layering.unnamed_modules(PACKAGE, ROOT / "docs" / "CONTRACT.md")
    assert not missing, f"modules CONTRACT.md's rooms table does not name: {missing}"


def test_every_room_is_in_the_contract_and_packaged():
    """Every room is in the layers, and every package (sub-rooms such as tma.tiled too) in pyproject's packages:
    setuptools ships only the packages listed there."""
    layers = layering.read_layers(ROOT / "docs" / "CONTRACT.md")
    rooms = {p.parent.name for p in PACKAGE.glob("*/__init__.py") if p.parent.name != "cu"}
    assert rooms <= set(layers), f"rooms missing from CONTRACT.md's layers: {rooms - set(layers)}"
    packages = (ROOT / "pyproject.toml").read_text()
    for init in PACKAGE.rglob("__init__.py"):
        name = ".".join(("drvtma", *init.parent.relative_to(PACKAGE).parts))
        assert f'"{name}"' in packages, f"{name} is not listed in pyproject.toml's packages"


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "drvtma").rglob("*.py")))
def test_no_module_above_450_lines(path):
    lines = len((ROOT / path).read_text().splitlines())
    assert lines <= MAX_LINES, f"{path} has {lines} lines: split it along its seams"


def test_public_api_of_the_top_level():
    """What users import from `drvtma` directly, as the README does, keeps working after the move into rooms."""
    from drvtma import (  # noqa: F401
        BarrierTimeout,
        CudaError,
        DeviceBuffer,
        LaunchError,
        Module,
        StatusBuffer,
        TensorMap,
        TensorMapError,
        TensorMapSpec,
        encode_tiled,
        load_module,
    )

    assert set(drvtma.__all__) <= set(dir(drvtma))


def test_readme_examples_run_unchanged_up_to_the_gpu():
    """The README's Python blocks, run as written: they must get as far as needing a GPU (or finish on one)."""
    import re

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        proc = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=ROOT, timeout=120)
        shown = re.search(r"# (\w+Error: \[\w+\])", block)  # an error the README shows on purpose
        assert (proc.returncode == 0 or "NoGpuError" in proc.stderr
                or (shown and shown.group(1) in proc.stderr)), proc.stderr[-2000:]


def test_an_installed_drvtma_ships_every_kernel_and_header():
    """pyproject's package data for drvtma.cu (= cu/) covers every kernel and header, so a non-editable install
    finds them all (`compiler.cu_dir()` looks in drvtma/cu first)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"]["drvtma.cu"] == "cu" and "drvtma.cu" in config["packages"]
    patterns = config["package-data"]["drvtma.cu"]
    cu = ROOT / "cu"
    shipped = {p for pattern in patterns for p in cu.glob(pattern)}
    needed = {p for p in cu.rglob("*") if p.suffix in (".cu", ".cuh")}
    assert needed and needed <= shipped, f"not shipped: {sorted(str(p.relative_to(cu)) for p in needed - shipped)}"


def test_no_kernel_has_a_generic_lambda():
    """NVRTC 13.0 (the H200 image's) takes a generic lambda (`auto` parameters) in device code for a host function
    and refuses the kernel ("host functions are not allowed in JIT mode"); NVRTC 13.5 (CI's) compiles it, so only
    this check catches it before a GPU run. Device code passes a typed lambda to a __device__ template instead."""
    import re

    generic = re.compile(r"\[[^\]\n]*\]\s*\([^)\n]*\bauto\b")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "cu").rglob("*.cu*"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if generic.search(line)]
    assert not found, f"generic lambdas in device code: {found}"
    assert generic.search("auto f = [&](auto&& panel) {") and not generic.search("[&](int a, int p) {")
