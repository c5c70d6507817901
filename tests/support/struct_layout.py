"""Check that NumPy dtypes mirror CUDA structs: static_asserts of sizes and field offsets, compiled by NVRTC.

NVRTC 13.0 (the device image) lacks __builtin_offsetof; there the check skips, and CI (NVRTC 13.5) runs it.
"""

from __future__ import annotations

import numpy as np
import pytest

from drvtma.errors import NvrtcError
from drvtma.runtime import compiler


def layout_asserts(struct: str, dtype: np.dtype) -> list[str]:
    checks = [f"static_assert(sizeof({struct}) == {dtype.itemsize}, \"sizeof {struct}\");"]
    for name in dtype.names:
        checks.append(f"static_assert(__builtin_offsetof({struct}, {name}) == {dtype.fields[name][1]}, "
                      f"\"{struct}.{name}\");")
    return checks


def compile_layout_check(source: str, structs: dict[str, np.dtype], name: str) -> None:
    """Compile `source` (the text itself, so the cache key covers it) followed by the asserts for every struct."""
    checks = [c for struct, dtype in structs.items() for c in layout_asserts(struct, dtype)]
    try:
        cubin = compiler.compile_cubin(source + "\n" + "\n".join(checks) + "\n", name=name)
    except NvrtcError as exc:
        if '"__builtin_offsetof" is undefined' in exc.log:
            pytest.skip("NVRTC %d.%d has no __builtin_offsetof" % compiler.nvrtc_version())
        raise
    assert cubin[:4] == b"\x7fELF"
