"""drvtma's pytest plugin (entry point ``pytest11``; or ``pytest_plugins = ["drvtma.testing.plugin"]``).

- the ``gpu`` marker: a test marked ``@pytest.mark.gpu`` goes through ``drvtma_ctx``, so without a Hopper GPU it
  is skipped with the driver's own message, never failed;
- ``drvtma_ctx`` (session): the primary context of a Hopper GPU, or that skip;
- ``tma_probe`` (session): a `drvtma.tma.probe.LoadProbe` (the batched load probe), closed at the end;
- hypothesis profiles ``drvtma-ci`` (no deadline: first calls compile kernels) and ``drvtma-gpu-long`` (2000
  examples), loaded when ``DRVTMA_HYPOTHESIS_PROFILE`` names one (``ci`` and ``gpu-long`` work too), or with
  hypothesis' own ``--hypothesis-profile``.

Strategies and builders are in `drvtma.testing` (``valid_specs``, ``load_cases``, ``build_coordinates``, ...).
"""

from __future__ import annotations

import contextlib
import sys

import pytest

from .. import settings
from ..errors import DrvtmaError
from .optional import hypothesis

PROFILES = {"ci": "drvtma-ci", "gpu-long": "drvtma-gpu-long"}
GPU_MARKER = "gpu: needs an NVIDIA Hopper GPU (skipped with the driver's own message when there is none)"


def register_profiles() -> None:
    """Register drvtma-ci and drvtma-gpu-long with hypothesis (a DrvtmaError naming what to install without it)."""
    hyp = hypothesis("the drvtma-ci / drvtma-gpu-long hypothesis profiles")
    settings, health = hyp.settings, hyp.HealthCheck
    settings.register_profile("drvtma-ci", deadline=None, suppress_health_check=[health.too_slow])
    settings.register_profile("drvtma-gpu-long", deadline=None, max_examples=2000,
                              suppress_health_check=[health.too_slow, health.data_too_large])


def load_profile(name: str | None = None) -> str | None:
    """Load `name` (or $DRVTMA_HYPOTHESIS_PROFILE); short names map to drvtma's. Returns what was loaded.
    With neither, nothing is imported: projects without hypothesis never reach it."""
    name = name or settings.HYPOTHESIS_PROFILE.get()
    if not name:
        return None
    name = PROFILES.get(name, name)
    register_profiles()
    hypothesis(f"the hypothesis profile {name!r}").settings.load_profile(name)
    return name


# Loaded in every pytest run of every project where drvtma is installed, so this module imports only pytest at
# load time; hypothesis, NumPy and cuda-bindings come inside the hooks and fixtures that use them.
@pytest.hookimpl(tryfirst=True)  # before hypothesis' own plugin, which loads --hypothesis-profile
def pytest_configure(config) -> None:
    config.addinivalue_line("markers", GPU_MARKER)
    try:
        if settings.HYPOTHESIS_PROFILE.get():
            load_profile()
        elif ("hypothesis" in sys.modules  # already paid for: then test modules can name the profiles too
              or str(config.getoption("hypothesis_profile", None) or "") in PROFILES.values()):
            register_profiles()
    except DrvtmaError as exc:
        raise pytest.UsageError(str(exc)) from None


def hopper_context():
    """The primary context of a Hopper GPU; pytest.skip quoting the driver when there is none."""
    from ..errors import NoGpuError
    from ..runtime.driver import context, require_hopper

    try:
        require_hopper()
    except NoGpuError as exc:
        pytest.skip(str(exc))
    return context()


@contextlib.contextmanager
def random_device_bytes(nbytes: int, seed: int):
    """(DeviceBuffer, host copy): `nbytes` random bytes from `seed`, on the device and on the host, for probes that
    load from anywhere in them and check against an oracle of the host bytes. Closed on exit."""
    import numpy as np

    from ..runtime.driver import DeviceBuffer

    host = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    with DeviceBuffer.from_array(host) as buf:
        yield buf, host


@pytest.fixture(scope="session")
def drvtma_ctx():
    """The primary context of a Hopper GPU, or a skip that quotes why there is none."""
    return hopper_context()


@pytest.fixture(scope="session")
def tma_probe(drvtma_ctx):
    """The batched tiled-load probe (`LoadProbe`): `tma_probe.run(tmap, coords)` gives raw shared-memory images."""
    from ..tma.probe import LoadProbe

    probe = LoadProbe()
    yield probe
    probe.close()


@pytest.fixture(autouse=True)
def _drvtma_gpu_marker(request):
    """A test marked gpu always goes through drvtma_ctx, so it is skipped (never failed) without a GPU."""
    if request.node.get_closest_marker("gpu") is not None:
        request.getfixturevalue("drvtma_ctx")
