"""`for_problem`: the GemmConfig a problem runs with; each choice was timed against cuBLAS (the figures: docs/gemm.md,
"The figures behind for_problem").

- Skinny M (fewer tiles than half the SMs): with a 16-bit C and M <= 256, A and B swapped, so M is wgmma's N (the
  narrowest of 16, 32 ... 256 that covers it) and N is cut in 64-row tiles; one consumer; a K tile of up to four
  128-byte panels while a stage stays within SKINNY_STAGE_BYTES; as many stages as fit; the maps prefetched (a CTA's
  one tile lasts microseconds); never stream-K. B, the large operand read once, loads evict_first and A, which every
  CTA reads, evict_last: B's lines then replace B's spent lines in the L2, not what was there (dirty lines cost a
  write to memory each). Else (a 32-bit C, or M > 256) the small tile, 64 x 128, one consumer, so twice as many SMs
  stream B.
- At least 8 waves of tiles with a partial last one and a long K (STREAMK_MIN_KTILES K tiles or more): stream-K for
  the last wave (at a short K the split tiles' fix-up costs too much).
- Enough waves that each CTA takes several tiles (WHOLE_TILE_WAVES; wgmma only): a staging buffer for every
  epilogue panel, so a tile's stores drain while the CTA's next main loop runs, at the cost of a stage.
- One wave or less (every CTA at most one tile): the maps prefetched, as on the skinny tiles (wgmma only).
- A and B larger than the L2 (128 x 256 tiles): WIDE_GROUP_M tile rows walked together instead of 8, so the tiles
  running at once read as many rows of A as of B, and fewer of them come from memory twice.
"""

from __future__ import annotations

from ..errors import GemmError, as_int

SKINNY_STAGE_BYTES = 64 * 1024  # a stage's wait, release and wgmma commit are the skinny tile's cost: few, large ones
STREAMK_MIN_KTILES = 64
WHOLE_TILE_WAVES = {2: 8, 1: 2}  # input bytes -> waves of tiles from which whole-tile staging pays (fp8's main
#                                  loop is half as long per tile, so its epilogue weighs twice as much)
WIDE_GROUP_M = 16
L2_BYTES = 60 * 2**20  # the H200's L2 (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), where the caller does not give its device's
MAX_CTA_RANGE = 256  # TMA box rows: the most a CTA's tile (and a swapped skinny problem's M) may span
MAX_EXTENT = 2**31 - 1  # the kernel takes int32 extents
MIN_STAGES = 3  # a ring shallower than this loses more than the overlap gains (docs/gemm.md)


def problem_extent(name: str, value) -> int:
    """A problem extent: an int in 1..2^31-1 (the kernel takes int32 extents)."""
    return as_int(value, name, error=GemmError, rule="shape_range", lo=1, hi=MAX_EXTENT,
                  fix="use 1 <= value < 2^31 (the kernel takes int32 extents)")


def for_problem(config, m: int, n: int, k: int, sm_count: int, l2_bytes: int = L2_BYTES):
    """The configuration to run C [m, n] = A [m, k] . B [n, k]^T with on `sm_count` SMs and an L2 of `l2_bytes`
    (rules above)."""
    m, n, k = (problem_extent(name, v) for name, v in (("m", m), ("n", n), ("k", k)))
    sm_count = as_int(sm_count, "sm_count", error=GemmError, rule="shape_range", lo=1)
    l2_bytes = as_int(l2_bytes, "l2_bytes", error=GemmError, rule="shape_range", lo=1)
    tiles = config.tiles(m, n)
    if tiles * 2 < sm_count and (config.bm, config.bn, config.consumers) != (64, 128, 1) and not config.swap_ab:
        return _skinny(config, m, k)
    # (measured with wgmma only, like whole-tile staging below)
    one_wave = tiles <= sm_count and config.mma == "wgmma" and not config.prefetch_maps
    cfg = config.with_(prefetch_maps=True) if one_wave else config
    if ((cfg.bm, cfg.bn, cfg.group_m) == (128, 256, type(cfg).group_m) and cfg.persistent and cfg.cluster_size == 1
            and (m + n) * k * cfg.itemsize > l2_bytes):
        cfg = cfg.with_(group_m=WIDE_GROUP_M)
    if (cfg.persistent and cfg.cluster_size == 1 and not cfg.streamk and tiles >= 8 * sm_count and tiles % sm_count
            and k >= STREAMK_MIN_KTILES * cfg.k_tile):
        cfg = cfg.with_(streamk=True)
    # measured with wgmma only (the mma.sync baseline shares the epilogue but no GPU run has timed or checked it so)
    if (cfg.persistent and cfg.mma == "wgmma" and cfg.epilogue_buffers == 2 and cfg.epilogue_panels > 2
            and tiles >= WHOLE_TILE_WAVES[cfg.itemsize] * sm_count):
        whole = cfg.with_(epilogue_buffers=cfg.epilogue_panels)
        whole = whole.with_(stages=min(cfg.stages, whole.stages_that_fit()))
        if whole.stages >= MIN_STAGES:
            cfg = whole
    return cfg


def _skinny(config, m: int, k: int):
    small = config.with_(bm=64, bn=128, consumers=1, cluster_m=1, cluster_n=1, stages=1, pingpong=False, streamk=False,
                         epilogue_buffers=2)
    if small.out_itemsize == 2 and m <= MAX_CTA_RANGE:
        small = small.with_(swap_ab=True, bn=next(v for v in (16, 32, 64, 128, 256) if v >= m), bk=None,
                            prefetch_maps=True, evict_a="last", evict_b="first")
        # the widest K tile whose stage fits SKINNY_STAGE_BYTES, and no panel past K
        panels = next(p for p in (4, 2, 1) if p == 1 or ((small.bm + small.bn) * small.span * p
                                                         <= SKINNY_STAGE_BYTES and (p - 1) * small.panel_elems < k))
        small = small.with_(bk=panels * small.panel_elems)
    return small.with_(stages=small.stages_that_fit())
