"""Core checks on the GPU: real kernels, real arguments, real errors."""

import numpy as np
import pytest

from drvtma import BarrierTimeout, CudaError, DeviceBuffer, LaunchError, Module, StatusBuffer, load_module
from drvtma.errors import ClusterError
from drvtma.runtime.driver import call, cu
from drvtma.tma.tiled.encode import encode_tiled
from drvtma.tma.tiled.spec import TensorMapSpec

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def core(ctx):
    return load_module("core_roundtrip.cu")


def test_scale_add_round_trip_on_poisoned_output(core):
    rng = np.random.default_rng()
    n = 1_000_003
    x = rng.standard_normal(n).astype(np.float32)
    with DeviceBuffer.from_array(x) as src, DeviceBuffer(4 * n) as dst:
        dst.fill_u32(0x7FBADBAD)
        core.kernel("scale_add").launch(src, dst, n, 1.5, -0.25, grid=264, block=256)
        got = dst.download(np.float32, (n,))
    np.testing.assert_array_equal(got, x * np.float32(1.5) + np.float32(-0.25))


def test_param_layout_is_read_from_the_driver(core):
    params = core.kernel("echo_args").params
    base = params[0][0]  # the driver reports offsets within its own parameter bank; only the layout matters
    print("echo_args params as reported:", params)
    assert [(o - base, s) for o, s in params] == [(0, 128), (128, 4), (136, 8), (144, 1), (152, 8), (160, 4),
                                                  (164, 2), (168, 8)]


class Blob:
    """128 random bytes passed by value, as a TensorMap is."""

    def __init__(self, rng):
        self.raw = np.zeros(256, np.uint8)
        off = (-self.raw.ctypes.data) % 128
        self.data = self.raw[off:off + 128]
        self.data[:] = rng.integers(0, 256, 128, dtype=np.uint8)

    def __drvtma_param__(self):
        return self.data.ctypes.data, 128


def test_every_argument_after_a_128_byte_map_arrives_intact(core):
    rng = np.random.default_rng()
    blob = Blob(rng)
    a, b, c, d, e, f = -123456789, float(rng.standard_normal()), -7, int(rng.integers(0, 2**63)) * 2 + 1, \
        np.float32(rng.standard_normal()), -31000
    with DeviceBuffer(22 * 8) as out:
        out.fill_u8(0xA5)
        core.kernel("echo_args").launch(blob, a, b, np.int8(c), d, e, f, out, grid=1, block=32)
        got = out.download(np.uint64, (22,))
    assert got[:16].tobytes() == blob.data.tobytes()
    assert got[16].astype(np.int64) == a
    assert got[17].tobytes() == np.float64(b).tobytes()
    assert got[18].astype(np.int64) == c
    assert int(got[19]) == d
    assert int(got[20]) == int(np.frombuffer(e.tobytes(), np.uint32)[0])
    assert got[21].astype(np.int64) == f


def test_a_prepared_launch_delivers_what_it_holds_and_what_changed(core):
    """Kernel.prepare on the GPU: the first launch delivers every argument as an ordinary launch does; a call that
    changes a scalar, the map and the output pointer delivers the new values and keeps the rest; shared memory above
    48 KiB is opted in at prepare (scale_add through a 64 KiB launch config)."""
    from drvtma.runtime.launch import LaunchConfig

    rng = np.random.default_rng()
    blob, other_blob = Blob(rng), Blob(rng)
    names = ("map", "a", "b", "c", "d", "e", "f", "out")
    with DeviceBuffer(22 * 8) as out, DeviceBuffer(22 * 8) as out2:
        out.fill_u8(0xA5)
        out2.fill_u8(0xA5)
        prepared = core.kernel("echo_args").prepare(LaunchConfig.make(1, 32), blob, -5, 2.5, np.int8(-3), 7,
                                                    np.float32(1.5), -31000, out, names=names)
        prepared()
        got = out.download(np.uint64, (22,))
        assert got[:16].tobytes() == blob.data.tobytes() and got[16].astype(np.int64) == -5
        prepared(a=123456, map=other_blob, out=out2)
        got2 = out2.download(np.uint64, (22,))
        assert got2[:16].tobytes() == other_blob.data.tobytes() and got2[16].astype(np.int64) == 123456
        assert got2[17].tobytes() == np.float64(2.5).tobytes() and got2[21].astype(np.int64) == -31000
        assert out.download(np.uint64, (22,)).tobytes() == got.tobytes()  # the first output is left alone
    n = 4096
    x = rng.standard_normal(n).astype(np.float32)
    with DeviceBuffer.from_array(x) as src, DeviceBuffer(4 * n) as dst:
        k = core.kernel("scale_add")
        prepared = k.prepare(LaunchConfig.make(n // 256, 256, 64 * 1024), src, dst, n, 1.5, -0.25)
        prepared()
        prepared(src, dst, n, 2.0, -0.25)
        np.testing.assert_array_equal(dst.download(np.float32, (n,)), x * np.float32(2.0) + np.float32(-0.25))


def _encode_2d_f32(buf, rows, cols, box_w, box_h):
    return encode_tiled(TensorMapSpec.create("float32", (rows, cols), (box_h, box_w)), buf)


def _run_box_and_bulk(core, expect_tx_delta):
    rng = np.random.default_rng()
    rows, cols, box_w, box_h, blocks, bulk_bytes = 40, 256, 32, 8, 8, 2048
    y0 = int(rng.integers(0, rows - box_h))
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    s = rng.standard_normal(blocks * bulk_bytes // 4).astype(np.float32)
    with DeviceBuffer.from_array(g) as gbuf, DeviceBuffer.from_array(s) as sbuf, \
            DeviceBuffer(blocks * box_w * box_h * 4) as out_box, DeviceBuffer(s.nbytes) as out_bulk, \
            StatusBuffer() as status:
        tmap = _encode_2d_f32(gbuf, rows, cols, box_w, box_h)
        out_box.fill_u32(0xFFC0FFEE)
        out_bulk.fill_u32(0xFFC0FFEE)
        tx = box_w * box_h * 4 + bulk_bytes + expect_tx_delta
        core.kernel("tma_box_and_bulk").launch(tmap, box_w, y0, sbuf, bulk_bytes, tx, out_box, out_bulk, status,
                                               grid=blocks, block=128, shared_mem=65536)
        status.check("tma_box_and_bulk")
        boxes = out_box.download(np.float32, (blocks, box_h, box_w))
        bulk = out_bulk.download(np.float32, s.shape)
    want = np.stack([g[y0:y0 + box_h, b * box_w:(b + 1) * box_w] for b in range(blocks)])
    np.testing.assert_array_equal(boxes, want)
    np.testing.assert_array_equal(bulk, s)


def test_tensor_box_and_bulk_copy_arrive_bit_exact(core):
    _run_box_and_bulk(core, 0)


def test_expect_tx_too_high_is_a_barrier_timeout_not_a_hang(core):
    with pytest.raises(BarrierTimeout) as info:
        _run_box_and_bulk(core, 16)
    assert info.value.kernel == "tma_box_and_bulk" and info.value.parity == 0 and info.value.where == 1
    _run_box_and_bulk(core, 0)  # the context is still usable


def test_launch_errors_surface_as_cuda_errors(core):
    k = core.kernel("scale_add")
    with DeviceBuffer(4096) as buf:
        with pytest.raises(ClusterError, match="cluster_size_portable"):  # refused before the driver now
            k.launch(buf, buf, 1, 1.0, 0.0, grid=16, block=32, cluster=16)  # 16 > 8, the portable cluster limit
        with pytest.raises(LaunchError, match="exceeds the device"):
            k.launch(buf, buf, 1, 1.0, 0.0, grid=1, block=32, shared_mem=1 << 20)
        k.launch(buf, buf, 1, 1.0, 0.0, grid=1, block=32)  # still fine afterwards
    with pytest.raises(CudaError, match="cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY"):
        DeviceBuffer(1 << 50)


def test_garbage_cubin_is_a_cuda_error_naming_the_call(ctx):
    """Under lazy loading the driver may take the bytes and refuse them at the first kernel lookup."""
    with pytest.raises(CudaError, match=r"cu(LibraryLoadData|LibraryGetKernel): CUDA_ERROR_"):
        Module(b"this is not a cubin\0" * 8).kernel("scale_add")


def test_unknown_kernel_name_is_a_launch_error(core):
    with pytest.raises(LaunchError, match="'nope' not found"):
        core.kernel("nope")


def test_buffers_and_modules_release_their_handles(ctx):
    # cuMemGetInfo counts the whole device, and other test processes (xdist workers) allocate meanwhile: a leak of
    # 21 x 64 MiB shows in every one of three tries, another process's allocation seldom in all three
    drops = []
    for _ in range(3):
        free0, _ = call(cu.cuMemGetInfo)
        for _ in range(20):
            with DeviceBuffer(64 << 20):
                pass
        buf = DeviceBuffer(64 << 20)
        buf.close()
        buf.close()  # idempotent
        free1, _ = call(cu.cuMemGetInfo)
        drops.append(free0 - free1)
        if drops[-1] < 64 << 20:
            break
    assert min(drops) < 64 << 20, f"free memory fell by {[d >> 20 for d in drops]} MiB in each try"
    mod = Module.load("core_roundtrip.cu")
    mod.close()
    assert mod.closed  # the library was unloaded
    mod.close()  # idempotent


def test_a_download_into_pinned_memory_is_the_download(ctx):
    """Pinned scratch (the fuzz sessions' downloads): the same bytes as an ordinary download, at any offset and type,
    growing when a download is larger; closed twice without harm."""
    from drvtma.runtime.host import PinnedScratch

    data = np.random.default_rng().integers(0, 256, 3 << 20, dtype=np.uint8)
    with DeviceBuffer.from_array(data) as buf, PinnedScratch(minimum=4096) as pinned:
        small = buf.download(np.uint32, (2, 5), offset=64, into=pinned)
        np.testing.assert_array_equal(small, data[64:104].view(np.uint32).reshape(2, 5))
        whole = buf.download(np.uint8, (data.size,), into=pinned)
        np.testing.assert_array_equal(whole, data)
        assert whole.ctypes.data == pinned.array(np.uint8, (16,)).ctypes.data  # one pinned block, grown once
    pinned.close()


def test_static_shared_memory_counts_towards_the_48_kib_opt_in(core):
    """tma_box_and_bulk declares an mbarrier: 48 KiB of dynamic memory on top needs the opt-in attribute."""
    mod = Module.load("core_roundtrip.cu")  # a module of its own (a cache hit): its kernel has not opted in yet
    k = mod.kernel("tma_box_and_bulk")
    assert k.static_shared_bytes > 0
    with mod, DeviceBuffer(4096) as buf, StatusBuffer() as status:
        tmap = _encode_2d_f32(buf, 4, 64, 32, 1)
        k.launch(tmap, 32, 0, buf, 16, 128 + 16, buf, buf, status, grid=1, block=32, shared_mem=48 * 1024)
        status.check("tma_box_and_bulk")


@pytest.mark.timing  # an interval of GPU time, measured alone
def test_a_host_slower_than_the_stream_hold_is_timed_again_behind_a_longer_hold(ctx):
    """The hold keeps the host's issue time out of the interval only while the host issues within it. A launch
    that spends 2 ms on the host behind a 100 us hold: each such run is retaken behind a longer hold, and the
    samples are the empty kernel's GPU time, far below the host's 2 ms."""
    import time

    from drvtma.runtime.timing import time_launches

    empty = load_module("runtime/timing.cu").kernel("empty_kernel")

    def slow_host_launch():
        time.sleep(0.002)
        empty.launch(grid=1, block=32)

    t = time_launches(slow_host_launch, runs=5, warmups=1, head_start_ns=100_000)
    assert len(t.samples) == 5
    assert t.retaken >= 1
    assert max(t.samples) < 1.0, t.samples  # ms: the 2 ms the host slept are not in any sample
