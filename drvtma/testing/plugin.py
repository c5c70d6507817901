"""drvtma's pytest plugin (entry point ``pytest11``; or ``pytest_plugins = ["drvtma.testing.plugin"]``).

- the ``gpu`` marker: a test marked ``@pytest.mark.gpu`` goes through ``drvtma_ctx``, so without a TMA GPU it
  is skipped with the driver's own message, never failed;
- the ``needs`` marker: ``@pytest.mark.needs("wgmma")`` skips, with the capability's named sentence ("wgmma needs
  sm_90a; this is sm_120 (...)"), on a GPU or a forced ``DRVTMA_ARCH`` build target without the feature;
- ``drvtma_ctx`` (session): the primary context of a GPU with TMA (compute capability 9.0 or newer), or that skip;
- ``tma_probe`` (session): a `drvtma.tma.tiled.probe.LoadProbe` (the batched load probe), closed at the end;
- ``tma_check``: `drvtma.testing.failures.check_images` writing into the test's tmp_path: on a mismatch a JSON
  reproducer and the picture of the first differing box (SVG, expected vs got), both named in the failure;
- hypothesis profiles ``drvtma-ci`` (no deadline: first calls compile kernels) and ``drvtma-gpu-long`` (2000
  examples), loaded when ``DRVTMA_HYPOTHESIS_PROFILE`` names one (``ci`` and ``gpu-long`` work too), or with
  hypothesis' own ``--hypothesis-profile``;
- pytest-xdist (``pytest -n N``): each worker gets its own GPU, round-robin over the visible ones, through
  ``CUDA_VISIBLE_DEVICES`` set before the driver starts (one GPU: the workers share it). Hypothesis' example
  database stays the one folder every worker of the run shares (``.hypothesis/examples`` or the profile's).

Strategies and builders are in `drvtma.testing` (``valid_specs``, ``load_cases``, ``build_coordinates``, ...).
"""

from __future__ import annotations

import contextlib
import os
import sys

import pytest

from .. import settings
from ..errors import DrvtmaError
from .optional import hypothesis

PROFILES = {"ci": "drvtma-ci", "gpu-long": "drvtma-gpu-long"}
GPU_MARKER = "gpu: needs an NVIDIA GPU with TMA (skipped with the driver's own message when there is none)"
NEEDS_MARKER = ("needs(*features): GPU capabilities the test uses (drvtma.runtime.capabilities.FEATURES); skipped "
                "with the named rule on a GPU or DRVTMA_ARCH target without them")


def visible_gpus() -> list[str]:
    """The GPUs this process may use, known without starting the driver: CUDA_VISIBLE_DEVICES, else the kernel
    driver's list (/proc/driver/nvidia/gpus); empty when neither says."""
    visible = settings.VISIBLE_DEVICES.get()
    if visible is not None:
        return visible
    try:
        return [str(i) for i in range(len(os.listdir("/proc/driver/nvidia/gpus")))]
    except OSError:
        return []


def worker_gpu(worker: str | None, gpus: list[str]) -> str | None:
    """The GPU of xdist worker `worker` (gw0, gw1, ...): round-robin over `gpus`; None outside xdist or with
    fewer than two GPUs (then every worker keeps what it sees and they share it)."""
    if not worker or len(gpus) < 2 or not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    return gpus[int(worker[2:]) % len(gpus)]


def pin_xdist_worker() -> str | None:
    """Under pytest-xdist, give this worker its GPU through CUDA_VISIBLE_DEVICES (before any driver call)."""
    gpu = worker_gpu(settings.XDIST_WORKER.get(), visible_gpus())
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    return gpu


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
    config.addinivalue_line("markers", NEEDS_MARKER)
    pin_xdist_worker()
    try:
        if settings.HYPOTHESIS_PROFILE.get():
            load_profile()
        elif ("hypothesis" in sys.modules  # already paid for: then test modules can name the profiles too
              or str(config.getoption("hypothesis_profile", None) or "") in PROFILES.values()):
            register_profiles()
    except DrvtmaError as exc:
        raise pytest.UsageError(str(exc)) from None


def tma_context():
    """The primary context of a GPU with TMA; pytest.skip quoting the driver (or the capability rule) otherwise."""
    from ..errors import NoGpuError
    from ..runtime.driver import context, require_capability

    try:
        require_capability("tma")
    except NoGpuError as exc:
        pytest.skip(str(exc))
    return context()


def skip_unless(*features: str) -> None:
    """pytest.skip with the capability's named sentence unless device 0, and the DRVTMA_ARCH build target when one
    is forced, offer every one of `features`."""
    from ..errors import CapabilityError
    from ..runtime import capabilities
    from ..runtime.driver import device_capabilities

    row = device_capabilities()
    try:
        for feature in features:
            capabilities.require(feature, row, build=settings.ARCH.get() or "")
    except CapabilityError as exc:
        pytest.skip(str(exc))


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
    """The primary context of a GPU with TMA, or a skip that quotes why there is none."""
    return tma_context()


@pytest.fixture(scope="session")
def tma_probe(drvtma_ctx):
    """The batched tiled-load probe (`LoadProbe`): `tma_probe.run(tmap, coords)` gives raw shared-memory images."""
    from ..tma.tiled.probe import LoadProbe

    probe = LoadProbe()
    yield probe
    probe.close()


@pytest.fixture
def tma_check(tmp_path, request):
    """`tma_check(spec, coords, got, want, box_offset=0)`: passes when the images agree; else fails naming the
    JSON reproducer and the SVG picture it wrote into the test's tmp_path."""
    import functools

    from .failures import check_images

    return functools.partial(check_images, out=tmp_path, name=request.node.name)


@pytest.fixture
def drvtma_audit(tmp_path):
    """The test's own driver calls under `drvtma.audit.audit()`: the AuditLog (`.judgement` after the test body
    ran, `.events` any time); the report lands in the test's tmp_path. Skipped, with the audit's one-sentence
    reason, where it cannot start (no cupti-python, no driver, another CUPTI client)."""
    from ..audit import audit
    from ..errors import AuditError

    try:
        block = audit(tmp_path / "audit")
        log = block.__enter__()
    except AuditError as exc:
        pytest.skip(str(exc))
    try:
        yield log
    finally:
        block.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _drvtma_gpu_marker(request):
    """A test marked gpu always goes through drvtma_ctx, so it is skipped (never failed) without a GPU."""
    if request.node.get_closest_marker("gpu") is not None:
        request.getfixturevalue("drvtma_ctx")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    """A test marked needs(...) is skipped before any of its fixtures is made (a module fixture that loads a wgmma
    kernel would fail, not skip), without a GPU or without those capabilities."""
    needs = [f for m in item.iter_markers("needs") for f in m.args]
    if needs:
        tma_context()
        skip_unless(*needs)
