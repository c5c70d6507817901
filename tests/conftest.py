"""Shared fixtures: the GPU context (skipped with the driver's own message), hypothesis profiles."""

import os

import pytest
from hypothesis import HealthCheck, settings

# Profiles live here and nowhere else. `ci` is the default; DRVTMA_HYPOTHESIS_PROFILE=gpu-long for deeper runs.
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("gpu-long", deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("DRVTMA_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def ctx():
    """The primary context of a Hopper GPU, or a skip that quotes why there is none."""
    from drvtma import NoGpuError, context, require_hopper

    try:
        require_hopper()
    except NoGpuError as exc:
        pytest.skip(str(exc))
    return context()


@pytest.fixture(autouse=True)
def _gpu_marker_needs_ctx(request):
    """A test marked gpu always goes through ctx, so it is skipped (never failed) without a GPU."""
    if request.node.get_closest_marker("gpu") is not None:
        request.getfixturevalue("ctx")
