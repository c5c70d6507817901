"""Your kernel, your toolchain, on a Hopper GPU: a kernel from your own file (found by its relative name, with your
headers) and a cubin built by nvcc, each loaded by drvtma and launched with a tensor map by value, the tiles
compared with drvtma's oracle over poisoned output. Passes on the H200.
"""

import shutil

import numpy as np
import pytest

from drvtma.runtime.driver import DeviceBuffer
from drvtma.runtime.kernel import load_module
from drvtma.runtime.status import StatusBuffer
from drvtma.testing import RngChooser, build_coordinates
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.spec import TensorMapSpec

from support.byo_builds import KERNELS, nvcc_build

pytestmark = pytest.mark.gpu

SHAPE, BOX = (200, 296), (16, 64)  # bf16 rows of 592 B: the last box of each row is partly out of bounds
POISON = 0x7FBADBAD


@pytest.fixture(scope="module")
def tensor(ctx):
    host = np.random.default_rng(11).integers(1, 1 << 16, SHAPE, dtype=np.uint16)  # never zero: fill shows
    with DeviceBuffer.from_array(host) as dev:
        yield host, dev


def _coords(spec, n=24):
    ch = RngChooser(np.random.default_rng(5))
    return [(0, 0), (8, 256), (-3, -8), (192, 288)] + [build_coordinates(ch, spec) for _ in range(n)]


def _run(kernel, spec, dev, coords, smem_pad, *extra):
    """Launch one CTA per box; the tiles as the kernel wrote them (poison where it wrote nothing)."""
    box_bytes = spec.expect_tx_bytes
    with DeviceBuffer.from_array(np.array([spec.tma_coordinates(c) for c in coords], dtype=np.int32)) as cbuf, \
            DeviceBuffer(len(coords) * box_bytes) as out:
        out.fill_u32(POISON)
        kernel.launch(encode_tiled(spec, dev), cbuf, box_bytes, out, *extra, grid=len(coords), block=128,
                      shared_mem=box_bytes + smem_pad)
        return out.download(np.uint16, (len(coords),) + BOX)


def _assert_matches(spec, host, coords, got):
    want = oracle.box_values(spec, host.view(np.uint8), coords)
    bad = [c for c, g, w in zip(coords, got, want) if not np.array_equal(g, w)]
    assert not bad, f"tiles at {bad} differ from the oracle\n{spec.describe()}"


def test_my_kernel_file_runs_against_the_oracle(tensor, tmp_path, monkeypatch):
    shutil.copytree(KERNELS, tmp_path / "proj")
    monkeypatch.chdir(tmp_path / "proj")
    row_copy = load_module("row_copy.cu", include_dirs=["include"]).kernel("row_copy")
    host, dev = tensor
    for fill in ("zero", "nan"):
        spec = TensorMapSpec.from_buffer(dev, "bfloat16", SHAPE, BOX, oob_fill=fill)
        coords = _coords(spec)
        with StatusBuffer() as status:
            got = _run(row_copy, spec, dev, coords, 1024, status)
            status.check("row_copy")
        _assert_matches(spec, host, coords, got)


def test_an_nvcc_cubin_runs_against_the_oracle(tensor, tmp_path):
    cubin = nvcc_build(KERNELS / "nvcc_tile_copy.cu", tmp_path / "nvcc_tile_copy.cubin")
    kernel = load_module(cubin).kernel("nvcc_tile_copy")  # the file; its bytes load the same way
    assert [s for _, s in kernel.params] == [128, 8, 4, 8]
    host, dev = tensor
    spec = TensorMapSpec.from_buffer(dev, "bfloat16", SHAPE, BOX)
    coords = _coords(spec)
    _assert_matches(spec, host, coords, _run(kernel, spec, dev, coords, 128))


@pytest.mark.parametrize("kind", ["fatbin", "ptx"])
def test_nvcc_fatbins_and_ptx_load_from_bytes(tensor, tmp_path, kind):
    """A fatbin's cubin and PTX (JIT-compiled by the driver) as bytes: layouts from their own records."""
    data = nvcc_build(KERNELS / "nvcc_tile_copy.cu", tmp_path / f"k.{kind}", kind).read_bytes()
    kernel = load_module(data).kernel("nvcc_tile_copy")
    assert [s for _, s in kernel.params] == [128, 8, 4, 8]
    host, dev = tensor
    spec = TensorMapSpec.from_buffer(dev, "bfloat16", SHAPE, BOX, oob_fill="nan")
    coords = _coords(spec, 8)
    _assert_matches(spec, host, coords, _run(kernel, spec, dev, coords, 128))
