"""docs/testing-your-kernel.md, step 1: your kernel compiles for sm_90a and issues the TMA instruction (no GPU)."""

from drvtma.runtime.compiler import compile_cubin
from drvtma.runtime.sass import instructions

from support.user_kernel import TILE_COPY_SOURCE


def test_tile_copy_compiles_to_a_2d_tensor_load():
    cubin = compile_cubin(TILE_COPY_SOURCE, name="tile_copy.cu")
    ops = instructions(cubin, "tile_copy")
    assert ops["UTMALDG.2D"] == 1, sorted(ops)
