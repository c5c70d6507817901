"""`for_problem`: the GemmConfig a problem runs with, each choice measured against cuBLAS on the H200 (docs/gemm.md).

- Skinny M (too few tiles to give every other SM one: 16 x 8192 has 32 tiles of 128 x 256): with a 16-bit C and
  M <= 256, A and B swapped, so M is wgmma's N (the narrowest of 16, 32 ... 256 that covers it) and N is cut in
  64-row tiles; one consumer; a K tile of up to four 128-byte panels while a stage stays within SKINNY_STAGE_BYTES
  (one panel: 0.75x cuBLAS at 64 x 4096 x 4096, two: 0.92-0.94x; with the L2 hints below, four panels and 3 stages
  read 0.99-1.02 (e4m3) and 1.05-1.09 (bf16) against two panels' 0.95-0.97 and 0.98-1.02, four readings each);
  as many stages as fit; the maps prefetched (a CTA's one tile lasts microseconds: +1.1% on average over the six
  skinny points); never stream-K (0.70-0.92x).
  B, the large operand read once, loads evict_first and A, which every CTA reads, evict_last: B's lines then
  replace B's spent lines in the L2 instead of what was there before (dirty lines: a write to memory each). Three
  same-run readings a point, L2 flushed: 0.97-1.01 -> 1.09-1.10 (bf16 M = 16), 0.96-0.98 -> 0.99-1.01 (M = 64),
  0.92-0.98 -> 1.02-1.04 (M = 128); e4m3 1.00 -> 1.14-1.16, 0.95-0.97 -> 0.97-0.99, 0.97-1.00 -> 1.13.
  Else (a 32-bit C, or M > 256) the small tile, 64 x 128, one consumer, so twice as many SMs stream B.
- At least 8 waves of tiles with a partial last one and a long K (STREAMK_MIN_KTILES K tiles or more): stream-K for
  the last wave (8192^3; at K = 1024 the fix-up of the split tiles cost 4-9%).
- Enough waves that each CTA takes several tiles (WHOLE_TILE_WAVES; wgmma only): a staging buffer for every
  epilogue panel, so a tile's stores drain while the CTA's next main loop runs, at the cost of a stage (3 instead
  of 4 at 128 x 256).
  Same-run ratios to the 4-stage kernel: 8192 x 8192 x 1024 1.025 (bf16) and 1.04 (e4m3), e4m3 4096^3 1.01,
  4096 x 14336 x 4096 1.003-1.037; one to four waves of bf16 tiles (2048^3 to 4224 x 4096 x 4096) 0.985-0.996.
- One wave or less (every CTA at most one tile: 2048^3's 128 tiles): the maps prefetched, as on the skinny tiles; the
  whole kernel lasts tens of microseconds. Five same-run pairs against the plain kernel: e4m3 2048^3 +0.4 to +1.4%,
  bf16 -0.3 to +1.2% (+0.3% on average). wgmma only: no GPU run timed or checked mma.sync with it.
- A and B larger than the L2 (128 x 256 tiles): WIDE_GROUP_M tile rows walked together instead of 8, so the 132
  tiles running at once read as many rows of A as of B (16 x 8.25 tiles), and fewer of them come from memory twice.
  Three same-run readings a point: +0.4 to +1.8% on the eight such points of the bench (bf16 4096^3 and larger but
  8192 x 8192 x 1024; e4m3 8192^3, 4096 x 14336 x 4096, 8192 x 4096 x 8192), -0.5 to -1.6% on three e4m3 that fit.
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
MIN_STAGES = 3  # a ring shallower than this loses more than the overlap gains (2 stages: 0.82x of 3 at 8192^3)


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
