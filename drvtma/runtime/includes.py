"""A user's include directories and the headers a kernel pulls from them, for the compile cache's key. No GPU.

drvtma's own headers are hashed whole (compiler._headers_digest); a user's include directory may be a large tree
(CUTLASS, CuTe), so only the headers a kernel names are hashed: every `#include` followed from the source through
the user's directories (conditional ones too: a header edit can only cost a recompile, never a stale cubin).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ..errors import ArgumentError

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def include_dirs(dirs, parameter: str = "include_dirs") -> tuple[Path, ...]:
    """The user's directories as absolute paths (a relative one is taken from the current directory)."""
    if dirs is None:
        return ()
    if isinstance(dirs, (str, Path)):
        dirs = (dirs,)
    if not isinstance(dirs, (list, tuple)):
        raise ArgumentError("include_dir", parameter, type(dirs).__name__, "give a list of directories")
    out = []
    for d in dirs:
        if not isinstance(d, (str, Path)) or not Path(d).is_dir():
            raise ArgumentError("include_dir", parameter, str(d), "give existing directories of your headers",
                                "not a directory" if isinstance(d, (str, Path)) else "not a path")
        out.append(Path(d).resolve())
    return tuple(out)


def user_headers(text: bytes, source_dir: Path | None, dirs: tuple[Path, ...]) -> list[Path]:
    """Every header `text` includes, directly or through another, found next to the including file (quoted
    includes) or in `dirs`. Headers found nowhere there (drvtma's, CUDA's, the system's) are not followed."""
    seen: dict[Path, None] = {}
    todo = [(text, source_dir)]
    while todo:
        body, here = todo.pop()
        for quote, name in _INCLUDE.findall(body):
            found = _find(name.decode(errors="replace"), here if quote == b'"' else None, dirs)
            if found is not None and found not in seen:
                seen[found] = None
                todo.append((found.read_bytes(), found.parent))
    return list(seen)


def _find(name: str, here: Path | None, dirs: tuple[Path, ...]) -> Path | None:
    if os.path.isabs(name):
        return Path(name) if Path(name).is_file() else None
    for folder in ((here,) if here is not None else ()) + dirs:
        path = folder / name
        if path.is_file():
            return path.resolve()
    return None


def headers_digest(paths: list[Path]) -> str:
    """One hash of the headers' paths and contents ("" for none: keys of kernels with no user header unchanged)."""
    if not paths:
        return ""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()
