"""The layering checker behind tests/test_layout_cpu.py: which room of drvtma imports which, and which module.

The allowed imports are the `layers` block of docs/CONTRACT.md (one line per room: `room: rooms it may import`),
so the map and its enforcement cannot drift apart. Every import counts, also one inside a function.

`module_graph` reads every import of the package's modules (ast over each file: at module top, in a function, in a
try or an if) and `cycles` finds the import loops in it: a loop that a function-level import hides still fails. An
import inside `if TYPE_CHECKING:` never runs and is left out of the graph (annotations only). `from pkg.a import b`
is an edge to the module pkg.a.b when that is a module, else to pkg.a; the implicit import of a module's parent
packages is not an edge (every module would loop with its package's __init__).

>>> import textwrap, tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> for f, text in {"pkg/__init__.py": "", "pkg/errors.py": "", "pkg/low/__init__.py": "",
...                 "pkg/low/a.py": "from ..errors import E\\nfrom . import c", "pkg/high/__init__.py": "",
...                 "pkg/high/b.py": "from ..low import a", "pkg/low/c.py": "def f():\\n    from ..high import b"}.items():
...     (root / f).parent.mkdir(parents=True, exist_ok=True); _ = (root / f).write_text(text)
>>> [str(v) for v in violations(root / "pkg", {"errors": set(), "low": {"errors"}, "high": {"errors", "low"}})]
['pkg/low/c.py:2 imports pkg.high: room low may import only errors']
>>> [str(c) for c in cycles(module_graph(root / "pkg"))]
['pkg.high.b -> pkg.low.a (pkg/high/b.py:1) -> pkg.low.c (pkg/low/a.py:2) -> pkg.high.b (pkg/low/c.py:2, in a function)']
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
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


def read_layers(contract: Path, block_name: str = "layers") -> dict[str, set[str]]:
    """The ```layers block of CONTRACT.md (or another, such as ```tma-rooms): `room: a b c` per line (`*` = every
    room)."""
    block = re.search(rf"```{re.escape(block_name)}\n(.*?)```", contract.read_text(), re.S)
    if not block:
        raise ValueError(f"{contract} has no ```{block_name} block")
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


@dataclass(frozen=True)
class Edge:
    """One import: `source` imports `target` at `path`:`line` (`late`: inside a function)."""

    source: str
    target: str
    path: str
    line: int
    late: bool


@dataclass(frozen=True)
class Cycle:
    """An import loop: edges[0].source imports edges[0].target ... and the last edge comes back to the first."""

    edges: tuple[Edge, ...]

    def __str__(self) -> str:
        hops = [f"{e.target} ({e.path}:{e.line}{', in a function' if e.late else ''})" for e in self.edges]
        return " -> ".join([self.edges[0].source] + hops)


@dataclass
class ModuleGraph:
    """Modules of a package by dotted name (a package by its own name, for its __init__) and their imports."""

    modules: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, dict[str, Edge]] = field(default_factory=dict)  # source -> target -> its first import


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).split(".")[-1] == "TYPE_CHECKING":
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def _function_nodes(tree: ast.AST) -> set[int]:
    return {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for n in ast.walk(f) if n is not f}


def module_graph(package_dir: Path) -> ModuleGraph:
    """Every import of `package_dir`'s modules by one another, function-level included, TYPE_CHECKING blocks not."""
    package, graph = package_dir.name, ModuleGraph()
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        graph.modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text())
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        skip, late = _type_checking_nodes(tree), _function_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.split(".")[0] == package]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                elif node.module and node.module.split(".")[0] == package:
                    base = node.module.split(".")
                else:
                    continue
                dotted = ".".join(base)
                targets = [f"{dotted}.{a.name}" if f"{dotted}.{a.name}" in graph.modules else dotted
                           for a in node.names]
            for target in targets:
                while target not in graph.modules and "." in target:  # `import pkg.a.b` of a name, not a module
                    target = target.rsplit(".", 1)[0]
                if target == name:
                    continue
                edge = Edge(name, target, str(path.relative_to(package_dir.parent)), node.lineno, id(node) in late)
                graph.edges.setdefault(name, {}).setdefault(target, edge)
    return graph


def cycles(graph: ModuleGraph) -> list[Cycle]:
    """One loop per strongly connected group of modules (Tarjan), the shortest through its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the package's module count
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph.modules):
        if v not in index:
            visit(v)
    return [_shortest_loop(graph, group) for group in sorted(groups)]


def _shortest_loop(graph: ModuleGraph, group: list[str]) -> Cycle:
    """The shortest import loop from group[0] back to itself inside the group (breadth first)."""
    start, members = group[0], set(group)
    came: dict[str, Edge] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w, edge in sorted(graph.edges.get(v, {}).items()):
            if w not in members or w in came:
                continue
            came[w] = edge
            if w == start:
                path = [edge]
                while path[0].source != start:
                    path.insert(0, came[path[0].source])
                return Cycle(tuple(path))
            queue.append(w)
    raise AssertionError(f"no loop through {start}")  # a strongly connected group always has one


def sub_room_violations(package_dir: Path, room: str, order: dict[str, set[str]]) -> list[str]:
    """Imports inside `room` that go up its sub-rooms' `order` (`sub: subs it may import`), function-level ones
    included. The room's own top-level modules are shared by every sub-room and import none; a sub-room not in
    `order` is one too. Sub-rooms re-export their modules in their `__init__`, so an import back up would let a
    module meet its package half-initialised, a loop `cycles` cannot see (it leaves parent packages out).

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for f, text in {"pkg/__init__.py": "", "pkg/room/__init__.py": "", "pkg/room/shared.py": "",
    ...                 "pkg/room/low/__init__.py": "from .a import A", "pkg/room/low/a.py": "from ..shared import S",
    ...                 "pkg/room/high/__init__.py": "", "pkg/room/high/b.py": "from ..low import a",
    ...                 "pkg/room/low/c.py": "def f():\\n    from ..high import b"}.items():
    ...     (root / f).parent.mkdir(parents=True, exist_ok=True); _ = (root / f).write_text(text)
    >>> sub_room_violations(root / "pkg", "room", {"low": set(), "high": {"low"}})
    ['pkg/room/low/c.py:2 imports pkg.room.high.b: room.low may import only the shared modules']
    """
    graph = module_graph(package_dir)
    prefix = f"{package_dir.name}.{room}"

    def sub(name: str) -> str | None:
        """The sub-room of a module of `room` ('' for a shared top-level one), None outside `room`."""
        parts = name.split(".")
        if parts[:2] != prefix.split(".") or len(parts) < 3:
            return None
        is_package = graph.modules[name].name == "__init__.py"
        return parts[2] if len(parts) > 3 or is_package else ""

    found = []
    for source, targets in sorted(graph.edges.items()):
        for target, edge in sorted(targets.items()):
            here, there = sub(source), sub(target)
            if here is None or there is None or there in ("", here):
                continue
            where = f"{edge.path}:{edge.line}"
            if not here:
                found.append(f"{where} imports {target}: {room}'s shared modules import no sub-room")
            elif here not in order:
                found.append(f"{where}: sub-room {room}.{here} is not in the order")
            elif there not in order[here]:
                may = ", ".join(sorted(order[here])) or "only the shared modules"
                found.append(f"{where} imports {target}: {room}.{here} may import {may}")
    return found


def unnamed_modules(package_dir: Path, contract: Path) -> list[str]:
    """Modules CONTRACT.md does not name: a room's module must appear in backticks in its room's row of the rooms
    table (`spec`, `coverage` ... `core`; one of a sub-room also with the sub-room: `tiled/`), a top-level one as
    `drvtma/<name>.py` or on the `facade:` line."""
    text = contract.read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `[\w]+/(\w+)/` \|.*$", text, re.M)}
    facade_line = re.search(r"^facade:(.*)$", text, re.M)
    facades = set(facade_line.group(1).split()) if facade_line else set()
    missing = []
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).with_suffix("").parts
        if parts[-1].startswith("__"):
            continue
        if len(parts) == 1:
            named = f"`{package_dir.name}/{parts[0]}.py`" in text or parts[0] in facades
        else:
            row = rows.get(parts[0], "")
            named = re.search(rf"`{re.escape(parts[-1])}\b", row) is not None
            named = named and all(re.search(rf"`{re.escape(sub)}/?`", row) for sub in parts[1:-1])
        if not named:
            missing.append(str(path.relative_to(package_dir.parent)))
    return missing
