"""The bank-conflict timing kernel without a GPU: it compiles for the portable target and its SASS holds the
shared loads it times (LDS, LDS.128); the three requests are aligned, inside its buffer and predicted 8, 1, 32."""

from __future__ import annotations

from drvtma.runtime import compiler, families, sass
from drvtma.show import wavefronts

from support.bank_probe import KERNEL, SMEM_BYTES, cases, predicted, reference


def test_the_kernel_compiles_and_its_sass_holds_the_shared_loads():
    assert families.FAMILIES[KERNEL].portable
    cubin = compiler.compile_cubin((compiler.cu_dir() / KERNEL).read_text(), name="bank_probe.cu",
                                   arch=families.build_target(KERNEL))
    counts = sass.instructions(cubin, "bank_probe")
    assert counts["LDS"] > 0 and counts["LDS.128"] > 0, counts


def test_the_three_requests_and_their_predictions():
    got = {name: predicted(*case) for name, case in cases().items()}
    assert got == {"ldmatrix, no swizzle": 8, "ldmatrix, 128B swizzle": 1, "column, no swizzle": 32}
    for offsets, width, active in cases().values():
        assert (offsets % width == 0).all() and offsets.max() + width <= SMEM_BYTES and active in (8, 32)
    for width in (4, 16):
        assert wavefronts(reference(width)[0][:reference(width)[2]], width) == 1
