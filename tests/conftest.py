"""Shared fixtures come from drvtma's pytest plugin (drvtma/testing/plugin.py): the gpu marker, drvtma_ctx
(skipped with the driver's own message), tma_probe and the hypothesis profiles. `ctx` is drvtma_ctx by its old name.
"""

import pytest

# Loaded here too when the package is not installed (the device machine runs from the tree): same module, one plugin.
pytest_plugins = ["drvtma.testing.plugin"]


TIMING_MARKER = ("timing: measures speed, runs for a fixed time, or counts on a short bounded wait; "
                 "scripts/gpu-check runs these alone, after the tests it spreads over pytest-xdist workers")


def pytest_configure(config):
    """`ci` is the suite's default profile; DRVTMA_HYPOTHESIS_PROFILE=gpu-long for deeper runs."""
    from drvtma import settings
    from drvtma.testing.plugin import load_profile

    config.addinivalue_line("markers", TIMING_MARKER)
    # `drvtma fuzz --db SHARED` also uses the local example database: the suite's own, never the user's ~/.cache
    import os
    import tempfile

    os.environ["DRVTMA_FUZZ_DB"] = tempfile.mkdtemp(prefix="drvtma-test-fuzz-db-")
    load_profile(settings.HYPOTHESIS_PROFILE.get() or "ci")


@pytest.fixture(scope="session")
def ctx(drvtma_ctx):
    """The primary context of a GPU with TMA, or a skip that quotes why there is none (the plugin's drvtma_ctx)."""
    return drvtma_ctx


@pytest.fixture(scope="module")
def pool(ctx, request):
    """The test module's POOL_BYTES of random bytes (seed SEED) on the device, and the same bytes on the host."""
    from drvtma.testing.plugin import random_device_bytes

    with random_device_bytes(request.module.POOL_BYTES, request.module.SEED) as pool:
        yield pool


@pytest.fixture(scope="session")
def runner(ctx):
    """One GlobalMapRunner (cu/tma/global_map.cu) for the global-map and pitfall tests."""
    from drvtma.tma.maps.global_maps import GlobalMapRunner

    with GlobalMapRunner() as r:
        yield r
