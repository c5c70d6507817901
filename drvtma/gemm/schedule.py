"""The GEMM's work split, as cu/gemm/gemm_ws.cu walks it (StreamK, for_each_run), for the host: which runs of
k-blocks of which tiles each CTA computes, who owns each split tile and whose partial sums it adds. CPU tests
check the split covers every k-block of every tile once and that an owner waits only on CTAs above it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    cta: int
    tile: int
    kb0: int
    kb1: int


def split(tiles: int, kblocks: int, ctas: int, streamk: bool) -> tuple[int, int]:
    """(whole, units): tiles handed out whole (the wave-filling ones), and k-blocks of the split rest."""
    whole = tiles // ctas * ctas if streamk and tiles % ctas else tiles
    return whole, (tiles - whole) * kblocks


def runs(tiles: int, kblocks: int, ctas: int, streamk: bool) -> list[list[Run]]:
    """Per CTA, its runs in order (the kernel's for_each_run)."""
    whole, units = split(tiles, kblocks, ctas, streamk)
    out = []
    for c in range(ctas):
        mine = [Run(c, t, 0, kblocks) for t in range(c, whole, ctas)]
        u, end = units * c // ctas, units * (c + 1) // ctas
        while u < end:
            tile, kb0 = whole + u // kblocks, u % kblocks
            kb1 = min(kblocks, kb0 + end - u)
            mine.append(Run(c, tile, kb0, kb1))
            u += kb1 - kb0
        out.append(mine)
    return out


def cta_of(unit: int, units: int, ctas: int) -> int:
    """The CTA whose range holds split unit `unit` (the kernel's StreamK::cta_of)."""
    return ((unit + 1) * ctas - 1) // units


def contributors(run: Run, tiles: int, kblocks: int, ctas: int) -> list[int]:
    """The CTAs whose partial sums the owner of a split tile adds (empty for a whole tile)."""
    if run.kb0 != 0 or run.kb1 == kblocks:
        return []
    whole, units = split(tiles, kblocks, ctas, True)
    last = cta_of((run.tile - whole) * kblocks + kblocks - 1, units, ctas)
    # with fewer units than CTAs some ranges are empty: those CTAs write no partial, nobody waits for them
    return [c for c in range(run.cta + 1, last + 1) if units * (c + 1) // ctas > units * c // ctas]
