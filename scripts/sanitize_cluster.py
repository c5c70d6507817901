#!/usr/bin/env python3
"""A small correct run of the cluster kernels for compute-sanitizer (scripts/sanitize.py family `cluster`): tiled and
1D bulk multicasts over clusters of 2, 4 (2x2) and 8 CTAs and the 16-CTA non-portable shape, every receiving CTA
checked against the oracle, the cluster identity / distributed shared memory kernel, and the __cluster_dims__ kernel
with and without a launch-time cluster. No hazards here: those stay in the fault-child tests. Exits non-zero on a
mismatch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drvtma.cluster import probe as P  # noqa: E402
from drvtma.runtime.driver import DeviceBuffer, context  # noqa: E402
from drvtma.runtime.kernel import load_module  # noqa: E402
from drvtma.testing import RngChooser  # noqa: E402
from drvtma.testing.multicast import bulk_batch, tiled_batch  # noqa: E402

SHAPES = [(2, 1, 1), (2, 2, 1), (8, 1, 1), (16, 1, 1)]


def main() -> int:
    context()
    rng = np.random.default_rng(7)
    ch = RngChooser(rng)
    host = rng.integers(0, 256, 4 << 20, dtype=np.uint8)
    bad = ops = 0
    with DeviceBuffer.from_array(host) as buf:
        probe = P.MulticastProbe()
        try:
            for i, cluster in enumerate(SHAPES):
                make = bulk_batch if i % 2 else tiled_batch
                batch, run_args, global_bytes = make(ch, rng, cluster, buf, host)
                batch.op_lists = batch.op_lists[:2]  # two clusters a launch: enough for the sanitizer to watch
                check = P.check_batch(batch, probe.run(batch, **run_args), global_bytes)
                bad, ops = bad + check.mismatches, ops + check.ops
        finally:
            probe.close()
    clusters, n = 2, 2
    _, received, loaded = P.run_identity((n, 1, 1), clusters)  # distributed shared memory stores and loads
    wrong = sum(not (np.array_equal(received[k, r], P.identity_words(k, (r - 1) % n))
                     and np.array_equal(loaded[k, r], P.identity_words(k, (r - 2) % n)))
                for k in range(clusters) for r in range(n))
    fixed = load_module(P.IDENTITY_SOURCE).kernel("cluster_dims_2")
    with DeviceBuffer(8 * 4) as ranks:  # the compile-time cluster shape, launched with and without cluster=
        ranks_wrong = 0
        for cluster in (None, 2):
            ranks.fill_u32(0xDEADBEEF)
            fixed.launch(ranks, grid=8, block=32, cluster=cluster)
            got = ranks.download(np.uint32, (8,))
            ranks_wrong += int((got != np.array([r | (2 << 8) for r in (0, 1) * 4], np.uint32)).sum())
    print(f"cluster: {ops} multicasts, {bad} mismatching clusters; {wrong} wrong DSMEM words of {clusters * n} CTAs; "
          f"{ranks_wrong} wrong ranks from cluster_dims_2")
    return 1 if bad or wrong or ranks_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
