#!/usr/bin/env python3
"""Run one kernel family in a small configuration, every result checked against its NumPy oracle, for
compute-sanitizer to watch (scripts/sanitize.py runs it under each tool). `python3 scripts/sanitize_family.py NAME`;
`--list` names the families. Exits non-zero if any result is wrong. No expected faults here: those stay in the
fault-child tests."""

from __future__ import annotations

import sys

import numpy as np

FAMILIES = {}


def family(fn):
    FAMILIES[fn.__name__] = fn
    return fn


def _b08(configs, tiles: int, fma: int = 3) -> None:
    from drvtma.b08.modes import B08Runner

    rng = np.random.default_rng()
    runner = B08Runner.upload(rng.standard_normal(tiles * 1024).astype(np.float32))
    for cfg in configs:
        runner.run_checked(cfg, fma)  # poisons, launches, checks status, verifies the per-tile sums
    runner.close()


@family
def b08_modes() -> None:
    """sync, bulk1d, tensor2d, pipe2: 4 blocks of 64 threads, 4 tiles each."""
    from drvtma.b08.modes import ARTICLE_MODES, ModeConfig

    _b08([ModeConfig(m, threads=64, tiles_per_block=4) for m in ARTICLE_MODES], tiles=16)


def _rings(split: str) -> None:
    from drvtma.b08.modes import ModeConfig

    # 2 stages of 2 tiles and 8 tiles a block: every stage is refilled after its release (two laps)
    _b08([ModeConfig(m, threads=64, tiles_per_block=8, stages=2, tiles_per_stage=2, split=split)
          for m in ("pipeN", "ws")], tiles=16)


@family
def rings_thread() -> None:
    """pipeN and ws, every consumer thread taking elements of every tile."""
    _rings("thread")


@family
def rings_warp() -> None:
    """pipeN and ws, each consumer warp owning whole tiles."""
    _rings("warp")


@family
def load_probe() -> None:
    """Tiled loads of a few maps (swizzles, out-of-bounds fill, element strides, ranks 1-5), bit for bit, and their
    digests."""
    from drvtma import DeviceBuffer
    from drvtma.tma.tiled.encode import encode_tiled
    from drvtma.tma.tiled.oracle import image_digests
    from drvtma.tma.tiled.probe import LoadProbe, check_loads
    from drvtma.tma.tiled.spec import TensorMapSpec

    host = np.random.default_rng().integers(0, 256, 1 << 20, dtype=np.uint8)
    specs = [
        (TensorMapSpec.create("float32", (40, 72), (8, 32), swizzle="128B"), [(0, 0), (36, 48), (-3, -8)]),
        (TensorMapSpec.create("bfloat16", (5, 20, 64), (2, 8, 32), swizzle="64B", oob_fill="nan"),
         [(0, 0, 0), (4, 16, 48)]),
        (TensorMapSpec.create("uint8", (64, 128), (16, 64), element_strides=(2, 1)), [(0, 0), (50, 96)]),
        (TensorMapSpec.create("float16", (300,), (64,)), [(0,), (280,)]),
        (TensorMapSpec.create("int32", (2, 3, 4, 5, 8), (1, 2, 2, 2, 4)), [(0, 0, 0, 0, 0), (1, 2, 3, 4, 4)]),
    ]
    probe = LoadProbe()
    with DeviceBuffer.from_array(host) as buf:
        for spec, coords in specs:
            result = check_loads(spec.replace(base_address=buf.ptr), host, coords, probe=probe)
            if not result.ok:
                raise AssertionError(result.report)
            # the digests a campaign with oracle workers compares (write_image_digest: shuffles, shared partials)
            pending = probe.launch(encode_tiled(spec.replace(base_address=buf.ptr)), coords, digests=True)
            if not (pending.digests() == image_digests(pending.wait())).all():
                raise AssertionError(f"the probe's digests are not the host's: {spec.describe()}")
    probe.close()


@family
def im2col_probe() -> None:
    """im2col loads of ranks 3-5 (random specs, corners, offsets and fills, as tests/test_im2col_gpu.py draws
    them), bit for bit against the oracle, and their digests."""
    from drvtma import DeviceBuffer
    from drvtma.testing.im2col import build_im2col_loads, build_im2col_spec
    from drvtma.testing.strategies import RngChooser
    from drvtma.tma.im2col.encode import encode_im2col
    from drvtma.tma.im2col.probe import Im2colProbe, check_im2col_loads
    from drvtma.tma.tiled.oracle import image_digests

    ch = RngChooser(np.random.default_rng(3))
    with Im2colProbe() as probe:
        for rank in (3, 4, 5):
            spec = build_im2col_spec(ch, ranks=(rank,))
            coords, offsets = build_im2col_loads(ch, spec, 4)
            host = np.random.default_rng(rank).integers(0, 256, max(spec.extent_bytes, 16), dtype=np.uint8)
            with DeviceBuffer.from_array(host) as buf:
                result = check_im2col_loads(spec, host, coords, offsets, target=buf, probe=probe)
                pending = probe.launch(encode_im2col(spec, buf), coords, offsets, digests=True)
                digests_agree = (pending.digests() == image_digests(pending.wait())).all()
            if not result.ok:
                raise AssertionError(result.report)
            if not digests_agree:
                raise AssertionError(f"the probe's digests are not the host's: {spec.describe()}")


@family
def store_probe() -> None:
    """Tensor stores and reductions (one box per CTA, guards checked), their regions' digests, and 1D bulk
    stores."""
    from drvtma.tma.stores import StoreCase
    from drvtma.tma.stores import probe as P
    from drvtma.tma.tiled.spec import TensorMapSpec

    rng = np.random.default_rng()
    cases = [
        StoreCase(TensorMapSpec.create("float32", (16, 64), (8, 32)), (3, 32)),
        StoreCase(TensorMapSpec.create("float32", (16, 64), (8, 32), swizzle="128B"), (8, 16), "add"),
        StoreCase(TensorMapSpec.create("bfloat16", (12, 96), (4, 32), swizzle="64B"), (10, 64), "max"),
        StoreCase(TensorMapSpec.create("uint32", (9, 40), (4, 8)), (7, 36), "inc", smem_offset=256),
        StoreCase(TensorMapSpec.create("uint64", (4, 8), (4, 8)), (0, 0), "xor"),
    ]
    result = P.run_store_cases(cases, rng)
    if result.failures:
        raise AssertionError(result.report())
    # as a campaign with oracle workers runs them: the oracle's region digests, the region_digests kernel after
    plan = P.store_oracle(P.plan_store_cases(cases, rng))
    plan.digests, plan.expected = P.region_digests(plan.expected, plan.regions), None
    result = P.run_store_plan(plan)
    if result.failures or result.expected is not None:
        raise AssertionError(f"region digests: {result.report()}")
    expected, got = P.run_bulk_stores([(0, 256), (512, 1024), (2048, 16)], rng)
    if (expected != got).any():
        raise AssertionError(f"bulk stores: {(expected != got).sum()} bytes differ")


@family
def core() -> None:
    """Every core kernel, checked: scale_add element for element, echo_args's arguments after a 128-byte
    by-value blob, tma_box_and_bulk's tensor box and 1D bulk copy onto one mbarrier (bounded wait, status)."""
    from drvtma import DeviceBuffer, StatusBuffer, TensorMapSpec, encode_tiled, load_module, synchronize

    rng = np.random.default_rng(3)
    mod = load_module("core_roundtrip.cu")
    x = rng.standard_normal(4096).astype(np.float32)
    with DeviceBuffer.from_array(x) as src, DeviceBuffer(x.nbytes) as dst:
        dst.fill_u32(0x7FBADBAD)
        mod.kernel("scale_add").launch(src, dst, x.size, 2.0, 1.0, grid=4, block=256)
        synchronize()
        got = dst.download(np.float32, x.shape)
    want = x * np.float32(2.0) + np.float32(1.0)
    if not np.array_equal(got, want):
        raise AssertionError(f"scale_add: {(got != want).sum()} elements differ")

    class Blob:  # 128 bytes by value, as a tensor map is passed
        def __init__(self):
            self.raw = np.zeros(256, np.uint8)
            self.data = self.raw[(-self.raw.ctypes.data) % 128:][:128]
            self.data[:] = rng.integers(0, 256, 128, dtype=np.uint8)

        def __drvtma_param__(self):
            return self.data.ctypes.data, 128

    blob = Blob()
    with DeviceBuffer(22 * 8) as out:
        out.fill_u8(0xA5)
        mod.kernel("echo_args").launch(blob, -123, 0.5, np.int8(-7), 2**63 + 1, np.float32(1.5), -31000, out,
                                       grid=1, block=32)
        got = out.download(np.uint64, (22,))
    if got[:16].tobytes() != blob.data.tobytes() or got[16].astype(np.int64) != -123 or int(got[19]) != 2**63 + 1:
        raise AssertionError(f"echo_args: the arguments came back wrong: {got.tolist()}")

    rows, cols, box_w, box_h, blocks, bulk_bytes = 40, 256, 32, 8, 4, 2048
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    s = rng.standard_normal(blocks * bulk_bytes // 4).astype(np.float32)
    with DeviceBuffer.from_array(g) as gbuf, DeviceBuffer.from_array(s) as sbuf, \
            DeviceBuffer(blocks * box_w * box_h * 4) as out_box, DeviceBuffer(s.nbytes) as out_bulk, \
            StatusBuffer() as status:
        tmap = encode_tiled(TensorMapSpec.create("float32", (rows, cols), (box_h, box_w)), gbuf)
        tx = box_w * box_h * 4 + bulk_bytes
        mod.kernel("tma_box_and_bulk").launch(tmap, box_w, 3, sbuf, bulk_bytes, tx, out_box, out_bulk, status,
                                              grid=blocks, block=128, shared_mem=65536)
        status.check("tma_box_and_bulk")
        boxes = out_box.download(np.float32, (blocks, box_h, box_w))
        bulk = out_bulk.download(np.float32, s.shape)
    want = np.stack([g[3:3 + box_h, b * box_w:(b + 1) * box_w] for b in range(blocks)])
    if not (np.array_equal(boxes, want) and np.array_equal(bulk, s)):
        raise AssertionError("tma_box_and_bulk: the box or the bulk copy differs")


@family
def release_repro() -> None:
    """The one-stage release ring (cu/b08/release_repro.cu) with the release ws_ring uses (every consumer thread arrives)."""
    from drvtma.b08.release_repro import run_release_repro

    run_release_repro("thread_arrive")  # the other variants draw racecheck reports: docs/results/sanitizer.md


@family
def bank_probe() -> None:
    """The bank-conflict timing kernel (cu/show/bank_probe.cu), 2 warps: a 32-lane word request and an 8-lane
    16-byte one. Each lane XORs an even number of loads of one address, so every sink word must be 0."""
    from drvtma import DeviceBuffer, load_module, synchronize

    kernel = load_module("show/bank_probe.cu").kernel("bank_probe")
    for width, active, step in ((4, 32, 128), (16, 8, 16)):
        offsets = np.arange(32, dtype=np.uint32) * step
        with DeviceBuffer.from_array(offsets) as offs, DeviceBuffer(8) as cycles, DeviceBuffer(4 * 64) as sink:
            kernel.launch(offs, width, active, 4, cycles, sink, grid=1, block=64)
            synchronize()
            if sink.download(np.uint32).any() or not cycles.download(np.uint64)[0]:
                raise SystemExit(f"bank_probe width {width}: sink {sink.download(np.uint32)[:8]}, cycles 0?")


@family
def bench_kernels() -> None:
    """The benchmarks' own kernels, small and verified as the benchmarks verify them: the roof's plain read kernel
    and a TMA ring, the multicast bench (own copies and multicast), the launch-cost kernels and the empty kernel."""
    from drvtma import DeviceBuffer, TensorMapSpec, encode_tiled, load_module, synchronize
    from drvtma.b08.roof import run_roof
    from drvtma.cluster.bench import run_multicast_bench

    run_roof(nbytes=1 << 22, runs=1, warmups=0, threads=64, stages=(2,), tiles_per_stage=(2,), blocks_per_sm=(1,),
             splits=("warp",), article_modes=False, progress=None)  # raises on a wrong word sum or checksum
    run_multicast_bench(ks=(2,), tile_kib=(4,), ctas=16, tensor_mib=1, launch_mib=1, runs=1, warmups=0)
    mod = load_module("runtime/launch_cost.cu")
    with DeviceBuffer(4 * 64 * 256) as out:  # the map spans the whole buffer; the kernels write its first 256
        tmap = encode_tiled(TensorMapSpec.create("float32", (64, 256), (8, 32)), out)
        for kernel, args in ((mod.kernel("plain_args"), ()), (mod.kernel("map_args"), (tmap,))):
            out.fill_u32(0x7FBADBAD)
            kernel.launch(*args, out, 200, 2.5, grid=1, block=256)
            got = out.download(np.float32, (256,))
            if not ((got[:200] == 2.5).all() and (got.view(np.uint32)[200:] == 0x7FBADBAD).all()):
                raise AssertionError(f"{kernel.name}: wrote the wrong elements")
    empty = load_module("runtime/timing.cu").kernel("empty_kernel")  # the launch-overhead floor (drvtma bench floors)
    empty.launch(grid=2, block=32)
    synchronize()


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    if argv[0] == "--list":
        for name, fn in FAMILIES.items():
            print(f"{name}: {fn.__doc__}")
        return 0
    unknown = [a for a in argv if a not in FAMILIES]
    if unknown:
        print(f"unknown famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
              f"families: {', '.join(FAMILIES)}", file=sys.stderr)
        return 2
    for name in argv:
        FAMILIES[name]()
        print(f"{name}: every result matches its oracle", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
