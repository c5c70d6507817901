"""Shared-memory bank conflicts of a warp reading a TMA image, in a stated model.

Model: 32 banks of 4 bytes (bank = (address / 4) mod 32). A warp's request is served in phases of 128 bytes'
worth of threads (32 threads reading 4 B, 16 reading 8 B, 8 reading 16 B: ldmatrix serves each 8x16-B matrix in
one); a phase takes as many wavefronts as the most distinct 4-byte words any one bank is asked for in it (threads
reading the same word share it). Addresses are the oracle's placement of each box byte (`Picture.row_addresses`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .grid import check_choice
from .image import Picture

BANKS = 32
BANK_BYTES = 4
PATTERNS = ("ldmatrix", "column", "row")
MODEL = ("32 banks x 4 B; a request is served in phases of 128 B of threads (8 threads x 16 B for ldmatrix, "
         "32 x 4 B otherwise); a phase costs as many wavefronts as the most distinct 4-byte words one bank serves")


def wavefronts(addresses, width: int) -> int:
    """Wavefronts of one warp request: thread i reads `width` bytes at addresses[i] (4, 8 or 16)."""
    a = np.asarray(addresses, dtype=np.int64).reshape(-1)
    per_phase = 128 // width
    total = 0
    for start in range(0, a.size, per_phase):
        words = (a[start:start + per_phase, None] // BANK_BYTES + np.arange(width // BANK_BYTES)).reshape(-1)
        words = np.unique(words)
        total += int(np.bincount(words % BANKS, minlength=BANKS).max())
    return total


@dataclass(frozen=True)
class Access:
    """One 4-byte word a lane reads: its bank and the wavefront that serves it (in the model above: a phase's
    wavefronts follow the previous phase's; a bank serves its distinct words in address order, one a wavefront)."""

    lane: int
    address: int
    bank: int
    wavefront: int


def accesses(addresses, width: int) -> list[Access]:
    """Every word of one warp request (lane i reads `width` bytes at addresses[i]) with its bank and wavefront;
    the last wavefront + 1 is `wavefronts(addresses, width)`."""
    a = [int(x) for x in np.asarray(addresses, dtype=np.int64).reshape(-1)]
    per_phase, out, base = 128 // width, [], 0
    for start in range(0, len(a), per_phase):
        lanes = range(start, min(start + per_phase, len(a)))
        words = {lane: [a[lane] // BANK_BYTES + k for k in range(width // BANK_BYTES)] for lane in lanes}
        order: dict[int, list[int]] = {}  # bank -> its distinct words, in address order
        for word in sorted({w for ws in words.values() for w in ws}):
            order.setdefault(word % BANKS, []).append(word)
        for lane, ws in words.items():
            out += [Access(lane, w * BANK_BYTES, w % BANKS, base + order[w % BANKS].index(w)) for w in ws]
        base += max(len(v) for v in order.values())
    return out


@dataclass(frozen=True)
class BankReport:
    pattern: str
    requests: int
    worst: int
    mean: float
    ideal: int  # wavefronts of the same request without a single conflict
    worst_request: tuple[Access, ...] = ()  # every word of the first request that takes `worst` wavefronts

    def describe(self) -> str:
        return (f"{self.pattern}: {self.requests} warp request(s), wavefronts per request: worst {self.worst}, "
                f"mean {self.mean:.2f} (conflict-free: {self.ideal})")


def requests(picture: Picture, pattern: str) -> tuple[list[np.ndarray], int]:
    """Every warp request of `pattern` over the box (thread addresses) and the bytes each thread reads.

    ldmatrix: 8 consecutive box rows, one 16-byte chunk of each (the rows of one 8x8 b16 matrix);
    column: 32 consecutive box rows, one 4-byte word of each; row: 32 consecutive 4-byte words of one row.
    """
    check_choice(pattern, "pattern", PATTERNS)
    rows = picture.row_addresses()  # (box rows, row bytes), absolute, swizzle applied
    n_rows, row_bytes = rows.shape
    out = []
    if pattern == "ldmatrix":
        for r in range(0, n_rows, 8):
            out += [rows[r:r + 8, c] for c in range(0, row_bytes, 16)]
        return out, 16
    if pattern == "column":
        for r in range(0, n_rows, 32):
            out += [rows[r:r + 32, w] for w in range(0, row_bytes, 4)]
        return out, 4
    for r in range(n_rows):
        out += [rows[r, w:w + 128:4] for w in range(0, row_bytes, 128)]
    return out, 4


def bank_notes(banks) -> list[str]:
    """The lines under a picture that name the bank model and each report ([] without reports)."""
    return [f"bank model: {MODEL}", *(f"  {b.describe()}" for b in banks)] if banks else []


def bank_report(picture: Picture, pattern: str) -> BankReport:
    reqs, width = requests(picture, pattern)
    counts = [wavefronts(a, width) for a in reqs]
    ideal = max(-(-len(a) * width // 128) for a in reqs) if reqs else 0
    worst = max(counts, default=0)
    layout = tuple(accesses(reqs[counts.index(worst)], width)) if reqs else ()
    return BankReport(pattern, len(reqs), worst, float(np.mean(counts)) if counts else 0.0, ideal, layout)
