"""Kernels of docs/testing-your-kernel.md's "your own files" and "a cubin built with nvcc" sections, and nvcc."""

import shutil
import subprocess
from pathlib import Path

import pytest

# tests/data/byo: row_copy.cu (+ copy_out.cuh, include/), nvcc_tile_copy.cu
KERNELS = Path(__file__).resolve().parents[1] / "data" / "byo"


def nvcc_build(source: Path, out: Path, kind: str = "cubin", flags=()) -> Path:
    """`nvcc -<kind> -arch=sm_90a [flags]` (kind: cubin, fatbin or ptx), or a skip saying nvcc is absent."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on the PATH (the CUDA toolkit builds the cubin)")
    subprocess.run([nvcc, f"-{kind}", "-arch=sm_90a", *flags, "-o", str(out), str(source)], check=True,
                   capture_output=True, text=True)
    return out
