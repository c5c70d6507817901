"""The layering checker behind tests/test_layout_cpu.py: which room of drvtma imports which.

The allowed imports are the `layers` block of docs/CONTRACT.md (one line per room: `room: rooms it may import`),
so the map and its enforcement cannot drift apart. Every import counts, also one inside a function.

>>> import textwrap, tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> for f, text in {"pkg/__init__.py": "", "pkg/errors.py": "", "pkg/low/__init__.py": "",
...                 "pkg/low/a.py": "from ..errors import E", "pkg/high/__init__.py": "",
...                 "pkg/high/b.py": "from ..low import a", "pkg/low/c.py": "def f():\\n    from ..high import b"}.items():
...     (root / f).parent.mkdir(parents=True, exist_ok=True); _ = (root / f).write_text(text)
>>> [str(v) for v in violations(root / "pkg", {"errors": set(), "low": {"errors"}, "high": {"errors", "low"}})]
['pkg/low/c.py:2 imports pkg.high: room low may import only errors']
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

FACADE = {"__init__", "__main__"}  # the package's own top level re-exports every room; `facade:` adds aliases


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    target: str
    room: str
    allowed: frozenset

    def __str__(self) -> str:
        may = ", ".join(sorted(self.allowed)) or "nothing"
        return f"{self.path}:{self.line} imports {self.target}: room {self.room} may import only {may}"


def read_layers(contract: Path) -> dict[str, set[str]]:
    """The ```layers block of CONTRACT.md: `room: a b c` per line (`*` = every room)."""
    block = re.search(r"```layers\n(.*?)```", contract.read_text(), re.S)
    if not block:
        raise ValueError(f"{contract} has no ```layers block")
    layers = {}
    for line in block.group(1).splitlines():
        if line.strip():
            room, _, deps = line.partition(":")
            layers[room.strip()] = set(deps.split())
    return layers


def facade(layers: dict[str, set[str]]) -> set[str]:
    """Top-level modules that, like __init__, re-export rooms for users (the `facade:` line); no room imports them."""
    return FACADE | layers.get("facade", set())


def _room_of(module: list[str]) -> str:
    """The room of a module path below the package (['tma', 'spec'] -> 'tma'; ['errors'] -> 'errors')."""
    return module[0] if module else ""


def _imports(tree: ast.AST, here: list[str], package: str):
    """(line, module parts below the package) of every import of the package in a module of package `here`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == package:
                    yield node.lineno, parts[1:]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here[:len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == package:
                parts = node.module.split(".")[1:]
            else:
                continue
            if parts:
                yield node.lineno, parts
            else:  # `from .. import tma` / `from drvtma import x`: each name is what is imported
                for alias in node.names:
                    yield node.lineno, [alias.name]


def violations(package_dir: Path, layers: dict[str, set[str]]) -> list[Violation]:
    """Every import that leaves its room for a room the layers do not allow (a room missing from them is one too)."""
    package, found = package_dir.name, []
    for path in sorted(package_dir.rglob("*.py")):
        rel = list(path.relative_to(package_dir).with_suffix("").parts)
        room = _room_of(rel)
        if len(rel) == 1 and room in facade(layers):
            continue
        where = str(path.relative_to(package_dir.parent))
        allowed = layers.get(room) if room != "facade" else None
        if allowed is None:
            found.append(Violation(where, 0, "(not in the layers table)", room, frozenset()))
            continue
        here = rel[:-1]
        for line, target in _imports(ast.parse(path.read_text()), here, package):
            target_room = _room_of(target)
            if target_room == room or "*" in allowed or target_room in allowed:
                continue
            found.append(Violation(where, line, ".".join([package] + target), room, frozenset(allowed)))
    return found
