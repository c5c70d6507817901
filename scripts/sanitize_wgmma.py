#!/usr/bin/env python3
"""A small correct run of the wgmma probe for compute-sanitizer (scripts/sanitize.py family `wgmma`): every operand
type's module, the smallest and largest N, SS and RS forms, K- and MN-major, every swizzle, and one gather launch.
Only valid descriptors go in (wrong ones read what the oracle says, but a sanitizer run is for correct programs);
every case is checked against the oracle; exits non-zero on a mismatch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drvtma.runtime.driver import context  # noqa: E402
from drvtma.wgmma import cases as wc  # noqa: E402
from drvtma.wgmma.descriptor import SmemDescriptor  # noqa: E402
from drvtma.wgmma.dtypes import ALL_TYPES  # noqa: E402
from drvtma.wgmma.probe import WgmmaProbe, predict  # noqa: E402


def main() -> int:
    context()
    rng = np.random.default_rng(4)
    bad = total = 0
    with WgmmaProbe() as probe:
        for t in ALL_TYPES:
            for n, config in ((8, {"rs": True}), (256, {"rs": False})):
                group = wc.random_group(rng, t, n=n, cases=4, wrong_fraction=0.0, config=config)
                got, _ = probe.run(group)
                bad += int((got != predict(group)).any(axis=(1, 2)).sum())
                total += len(group.cases)
        lo, hi = wc.gather_groups([SmemDescriptor(8192, lbo=16, sbo=1024, swizzle="128B")], "K", 16)
        for group in (lo, hi):
            got, _ = probe.run(group)
            bad += int((got != predict(group)).any(axis=(1, 2)).sum())
            total += len(group.cases)
    print(f"wgmma: {total} cases, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
