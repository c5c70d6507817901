"""docs/testing-your-kernel.md, step 2: your kernel's tiles, byte for byte against drvtma's oracle (Hopper GPU).

The fixtures come from drvtma's pytest plugin: `drvtma_ctx` skips with the driver's message when there is no GPU.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drvtma.fuzz.coverage import hypothesis_events
from drvtma.fuzz.coverage.tiled import load_classes
from drvtma.runtime.driver import DeviceBuffer
from drvtma.runtime.kernel import Module
from drvtma.runtime.status import StatusBuffer
from drvtma.testing import DrawChooser, build_coordinates
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.spec import TensorMapSpec

from support.user_kernel import TILE_COPY_SOURCE

pytestmark = pytest.mark.gpu

SHAPE, BOX = (200, 296), (16, 64)  # bf16 rows of 592 B: the last box of each row is partly out of bounds


@pytest.fixture(scope="module")
def tile_copy(drvtma_ctx):
    return Module.load(TILE_COPY_SOURCE, name="tile_copy.cu").kernel("tile_copy")


@pytest.fixture(scope="module")
def tensor(drvtma_ctx):
    host = np.random.default_rng(7).integers(0, 1 << 16, SHAPE, dtype=np.uint16)  # fresh random bits
    with DeviceBuffer.from_array(host) as dev:
        yield host, dev


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_tile_copy_matches_the_oracle(tile_copy, tensor, data):
    host, dev = tensor
    spec = TensorMapSpec.from_buffer(dev, "bfloat16", SHAPE, BOX, oob_fill=data.draw(st.sampled_from(["zero", "nan"])))
    ch = DrawChooser(data.draw)  # drvtma's coordinate builder, shrinkable: near the tensor, partly outside
    coords = [build_coordinates(ch, spec) for _ in range(data.draw(st.integers(1, 8)))]
    hypothesis_events(load_classes(spec, coords))  # which coverage classes it reached: --hypothesis-show-statistics
    box_bytes = spec.expect_tx_bytes
    with DeviceBuffer.from_array(np.array([spec.tma_coordinates(c) for c in coords], dtype=np.int32)) as cbuf, \
            DeviceBuffer(len(coords) * box_bytes) as out, StatusBuffer() as status:
        out.fill_u32(0x7FBADBAD)  # poison: a word the kernel never wrote shows
        tile_copy.launch(encode_tiled(spec, dev), cbuf, box_bytes, out, status, grid=len(coords), block=128,
                         shared_mem=spec.smem_bytes + 1024)
        got = out.download(np.uint16, (len(coords),) + BOX)
        status.check("tile_copy")
    want = oracle.box_values(spec, host.view(np.uint8), coords)  # fill, bounds, conversion: drvtma's model
    bad = [c for c, g, w in zip(coords, got, want) if not np.array_equal(g, w)]
    assert not bad, f"tiles at {bad} differ from the oracle\n{spec.describe()}"


def test_the_probe_fixture_loads_the_same_box(tma_probe, tensor):
    """tma_probe: drvtma's own load probe, the raw shared-memory image of any map (swizzle and padding included)."""
    host, dev = tensor
    spec = TensorMapSpec.from_buffer(dev, "bfloat16", SHAPE, BOX, swizzle="128B")
    coords = [(8, 256), (-3, 0)]
    images = tma_probe.run(encode_tiled(spec, dev), coords)
    assert (images == oracle.load_images(spec, host.view(np.uint8), coords, image_bytes=images.shape[1],
                                         poison=0xA5A5A5A5)).all()
