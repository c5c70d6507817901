"""cu/b08/release_repro.cu: each release protocol builds, and the SASS shows the copy and the arrives it claims."""

import numpy as np
import pytest

from drvtma.b08.release_repro import SOURCE, VARIANTS, WORDS, expected_sums
from drvtma.runtime import compiler, sass


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_variant_compiles_with_its_copy(variant):
    cubin = compiler.compile_cubin(SOURCE, defines={"DRVTMA_RELEASE": VARIANTS[variant]})
    ops = sass.instructions(cubin, "release_repro")
    assert sum(n for op, n in ops.items() if op.startswith("SYNCS.ARRIVE")) >= 1
    if variant == "plain_stores":
        assert not any(op.startswith("UBLKCP") for op in ops) and any(op.startswith("STS") for op in ops)
    else:
        assert any(op.startswith("UBLKCP") for op in ops)


def test_expected_sums_wrap_like_u32_adds():
    data = np.full(2 * WORDS, 0xFFFFFFFF, dtype=np.uint32)
    data[WORDS + 5] = 7  # fill 1, lane 5, word e = 0
    want = expected_sums(data, 2)
    assert want.shape == (2, 32) and want[0, 0] == np.uint32(-32 & 0xFFFFFFFF)
    assert want[1, 5] == np.uint32((31 * 0xFFFFFFFF + 7) & 0xFFFFFFFF)
