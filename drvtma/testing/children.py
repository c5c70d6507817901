"""Child processes for tests that provoke device faults (a fault ends the context, so it happens in a child).

The child must import the same drvtma as its parent: `child_env` keeps the caller's PYTHONPATH and adds the source
root only when drvtma runs from a source checkout (an installed drvtma is found as it is); `run_child` runs
``python -c script args...`` with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def source_root() -> Path | None:
    """The checkout this drvtma is imported from (the folder holding drvtma/, cu/ and pyproject.toml), or None."""
    root = Path(__file__).resolve().parents[2]  # drvtma/testing/children.py -> the folder holding drvtma/
    return root if (root / "pyproject.toml").is_file() and (root / "cu").is_dir() else None


def child_env(**extra: str) -> dict[str, str]:
    """os.environ plus `extra`, with a PYTHONPATH that finds this drvtma first and keeps every caller's entry."""
    env = {**os.environ, **extra}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    root = source_root()
    if root is not None and str(root) not in paths:
        paths.insert(0, str(root))
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_child(script: str, *args: str, timeout: float, cwd=None, **extra_env: str) -> subprocess.CompletedProcess:
    """Run ``python -c script *args`` with `child_env`, capturing text output."""
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout,
                          env=child_env(**extra_env), cwd=cwd if cwd is not None else source_root())
