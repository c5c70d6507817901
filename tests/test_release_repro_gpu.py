"""The one-stage release ring (cu/b08/release_repro.cu) computes the right sums under every release protocol (racecheck's verdicts on
them are in scripts/sanitize.py and docs/results/sanitizer.md)."""

import pytest

from drvtma.b08.release_repro import VARIANTS, run_release_repro

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_release_protocol_delivers_every_fill(ctx, variant):
    run_release_repro(variant, iters=16, blocks=4)
