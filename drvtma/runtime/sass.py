"""Disassemble cubins with nvdisasm (from the nvidia-cuda-nvdisasm wheel or the PATH). Needs no GPU.
Without one, a one-line DrvtmaError says what to install (`drvtma compile` prints it and exits 1)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from functools import lru_cache
from pathlib import Path

from .. import settings
from ..errors import DrvtmaError

INSTALL = "pip install 'nvidia-cuda-nvdisasm>=13,<14', or set DRVTMA_NVDISASM to an nvdisasm of CUDA 13"


@lru_cache(maxsize=1)
def nvdisasm_path() -> str:
    """nvdisasm from $DRVTMA_NVDISASM, the nvidia-cuda-nvdisasm wheel, or the PATH."""
    override = settings.NVDISASM.get()
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise DrvtmaError(f"DRVTMA_NVDISASM = {override!r} is not an executable file; fix: point it at "
                              "nvdisasm, or unset it to use the nvidia-cuda-nvdisasm wheel")
        return override
    try:
        import nvidia  # namespace package of NVIDIA's wheels
        for root in nvidia.__path__:
            for candidate in sorted(Path(root).glob("cu*/bin/nvdisasm")) + sorted(Path(root).glob("*/bin/nvdisasm")):
                if os.access(candidate, os.X_OK):
                    return str(candidate)
    except ImportError:
        pass
    found = shutil.which("nvdisasm")
    if found:
        return found
    raise DrvtmaError(f"nvdisasm not found (SASS listings need it; no GPU needed): {INSTALL}")


def disassemble(cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([nvdisasm_path(), "-c", f.name], capture_output=True, text=True)
    if out.returncode != 0:  # e.g. an nvdisasm older than the cubin's architecture
        raise DrvtmaError(f"nvdisasm failed ({out.returncode}): {out.stderr.strip()}; fix: {INSTALL}")
    return out.stdout


_FUNC = re.compile(r"^\s*\.text\.(\S+):\s*$")
_INSN = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)")


def functions(cubin: bytes) -> dict[str, list[str]]:
    """Opcodes (with modifiers, e.g. UTMALDG.2D) of each kernel, in order."""
    out: dict[str, list[str]] = {}
    current = None
    for line in disassemble(cubin).splitlines():
        m = _FUNC.match(line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        m = _INSN.match(line)
        if m and current is not None:
            current.append(m.group(1))
    return out


def instructions(cubin: bytes, kernel: str | None = None) -> Counter:
    """Counter of opcodes in one kernel (or all of them)."""
    funcs = functions(cubin)
    if kernel is not None:
        if kernel not in funcs:
            raise KeyError(f"kernel {kernel!r} not in cubin; it has {sorted(funcs)}")
        return Counter(funcs[kernel])
    return Counter(op for ops in funcs.values() for op in ops)


def has_opcode(counts: Counter, prefix: str) -> bool:
    """True when any opcode starts with prefix (e.g. 'UTMALDG' matches 'UTMALDG.2D')."""
    return any(op == prefix or op.startswith(prefix + ".") for op in counts)
