"""`drvtma bench multicast`: when does TMA multicast pay (cu/cluster/multicast_bench.cu).

For k = 1, 2, 4, 8 CTAs per cluster and several tile sizes, the k CTAs of each cluster read the same tiles through a
ring of `stages` stages (default 2), either with one multicast per slice (each tile leaves L2 once per cluster) or each loading its own
copy. Every run is verified first (each CTA's sum of all words it received against NumPy), then timed with events
behind a stream hold. Reported: time, the rate bytes land in shared memory (k copies of every tile) and the rate
tiles leave L2 or HBM (once per cluster with multicast, k times without), and multicast's speedup.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DrvtmaError
from ..runtime.figures import csv_text, table_text
from ..runtime.status import StatusBuffer
from ..tma.tiled.encode import encode_tiled
from ..tma.tiled.spec import TensorMapSpec

SOURCE = "cluster/multicast_bench.cu"
ROW_WORDS = 64  # uint32 per tensor row: 256-byte rows
ROW_BYTES = ROW_WORDS * 4
THREADS = 128
DEFAULT_KS = (1, 2, 4, 8)
DEFAULT_TILE_KIB = (4, 16, 32)
DEFAULT_STAGES = 2
PAYS_MARGIN = 1.05  # multicast "pays" from the first k where it is at least 5% faster


@dataclass(frozen=True)
class BenchPoint:
    k: int
    tile_bytes: int
    mode: str  # "multicast" or "own"
    ms: float
    smem_bytes: int  # bytes landing in shared memory per launch
    l2_bytes: int  # bytes the copy engine reads from L2 / HBM per launch

    @property
    def smem_gbs(self) -> float:
        return self.smem_bytes / (self.ms * 1e-3) / 1e9

    @property
    def l2_gbs(self) -> float:
        return self.l2_bytes / (self.ms * 1e-3) / 1e9


@dataclass
class BenchResult:
    points: list
    ctas: int
    tensor_bytes: int
    stages: int = DEFAULT_STAGES

    def _pairs(self):
        own = {(p.k, p.tile_bytes): p for p in self.points if p.mode == "own"}
        for p in self.points:
            if p.mode == "multicast" and (p.k, p.tile_bytes) in own:
                yield p, own[(p.k, p.tile_bytes)]

    def pays_from(self) -> dict[int, int | None]:
        """Per tile size: the smallest k where multicast is PAYS_MARGIN faster than own copies (None: never)."""
        out: dict[int, int | None] = {}
        for mc, own in sorted(self._pairs(), key=lambda po: (po[0].tile_bytes, po[0].k)):
            out.setdefault(mc.tile_bytes, None)
            if out[mc.tile_bytes] is None and own.ms / mc.ms >= PAYS_MARGIN:
                out[mc.tile_bytes] = mc.k
        return out

    def rows(self) -> list[list]:
        return [[mc.tile_bytes // 1024, mc.k, f"{own.ms * 1e3:.1f}", f"{mc.ms * 1e3:.1f}", f"{own.ms / mc.ms:.2f}",
                 f"{own.smem_gbs:.0f}", f"{mc.smem_gbs:.0f}", f"{own.l2_gbs:.0f}", f"{mc.l2_gbs:.0f}"]
                for mc, own in sorted(self._pairs(), key=lambda po: (po[0].tile_bytes, po[0].k))]

    HEADERS = ["tile KiB", "k", "own us", "multicast us", "speedup", "own smem GB/s", "mcast smem GB/s",
               "own L2 GB/s", "mcast L2 GB/s"]

    def text(self) -> str:
        pays = ", ".join(f"{t // 1024} KiB tiles: {'k = ' + str(k) if k else 'never'}"
                         for t, k in self.pays_from().items())
        return (table_text(self.HEADERS, self.rows(), numparse=True) +
                f"\n\n{self.ctas} CTAs per launch, {THREADS} threads each, {self.stages} stages; tensor {self.tensor_bytes >> 20} "
                f"MiB of uint32.\nmulticast pays (>= {PAYS_MARGIN:.2f}x) from: {pays}")

    def csv_text(self) -> str:
        return csv_text(["k", "tile_bytes", "mode", "ms", "smem_gbs", "l2_gbs"],
                        [[p.k, p.tile_bytes, p.mode, f"{p.ms:.6f}", f"{p.smem_gbs:.1f}", f"{p.l2_gbs:.1f}"]
                         for p in self.points])


def expected_checksums(data: np.ndarray, clusters: int, k: int, tiles: int, tile_rows: int) -> np.ndarray:
    """(clusters * k,) uint32: every CTA of cluster c sums every word of tiles c * tiles + i (wrapping)."""
    tile_sums = data.reshape(-1, tile_rows * ROW_WORDS).sum(axis=1, dtype=np.uint64) & 0xFFFFFFFF
    n_tiles = tile_sums.size
    idx = (np.arange(clusters)[:, None] * tiles + np.arange(tiles)[None, :]) % n_tiles
    per_cluster = (tile_sums[idx].sum(axis=1) & 0xFFFFFFFF).astype(np.uint32)
    return np.repeat(per_cluster, k)


def run_multicast_bench(*, ks=DEFAULT_KS, tile_kib=DEFAULT_TILE_KIB, stages: int = DEFAULT_STAGES,
                        ctas: int | None = None, tensor_mib: int = 128, launch_mib: int = 256, runs: int = 7,
                        warmups: int = 2, seed: int = 13, progress=None) -> BenchResult:
    from ..runtime.driver import DeviceBuffer, device_properties
    from ..runtime.kernel import load_module
    from ..runtime.timing import time_launches

    if ctas is None:
        ctas = 2 * device_properties().sm_count // 8 * 8  # two per SM, a multiple of every k
    rows = (tensor_mib << 20) // ROW_BYTES
    data = np.random.default_rng(seed).integers(0, 1 << 32, rows * ROW_WORDS, dtype=np.uint32)
    if not 1 <= stages <= 8:
        raise DrvtmaError(f"multicast bench: stages must be 1..8, got {stages}")
    kernel = load_module(SOURCE, defines={"DRVTMA_MC_STAGES": stages}).kernel("multicast_bench")
    points = []
    with DeviceBuffer.from_array(data) as buf, DeviceBuffer(4 * ctas) as sums, StatusBuffer() as status:
        for tile in tile_kib:
            tile_bytes = tile * 1024
            tile_rows = tile_bytes // ROW_BYTES
            tiles = max(4, (launch_mib << 20) // (ctas * tile_bytes))
            for k in ks:
                if ctas % k or tile_rows % k:
                    raise DrvtmaError(f"multicast bench: {ctas} CTAs and {tile_rows}-row tiles must split into k={k}")
                slice_rows = tile_rows // k
                spec = TensorMapSpec.create("uint32", (rows, ROW_WORDS), (slice_rows, ROW_WORDS))
                tmap = encode_tiled(spec, buf)
                clusters = ctas // k
                want = expected_checksums(data, clusters, k, tiles, tile_rows)
                for mode in ("own", "multicast"):
                    def launch(mode=mode):
                        kernel.launch(tmap, tiles, slice_rows, slice_rows * ROW_BYTES, rows, int(mode == "multicast"),
                                      sums, status, grid=ctas, block=THREADS, shared_mem=stages * tile_bytes + 1024,
                                      cluster=k)
                    sums.fill_u32(0)
                    status.reset()
                    launch()
                    status.check("multicast_bench")
                    got = sums.download(np.uint32, (ctas,))
                    bad = np.flatnonzero(got != want)
                    if bad.size:
                        raise DrvtmaError(f"multicast bench k={k} tile {tile} KiB {mode}: {bad.size} of {ctas} CTAs "
                                          f"summed wrong words (first CTA {int(bad[0])}: got {int(got[bad[0]]):#x}, "
                                          f"want {int(want[bad[0]]):#x})")
                    t = time_launches(launch, runs=runs, warmups=warmups)
                    smem = ctas * tiles * tile_bytes
                    l2 = smem // k if mode == "multicast" else smem
                    points.append(BenchPoint(k, tile_bytes, mode, t.median, smem, l2))
                    if progress is not None:
                        print(f"multicast bench: tile {tile} KiB k={k} {mode}: {t.median * 1e3:.1f} us", file=progress)
    return BenchResult(points, ctas, rows * ROW_BYTES, stages)
