"""Random multicast batches for the cluster probe (`drvtma.cluster.probe`): the GPU fuzz and the sanitizer run
draw them from here. Each returns (batch, run arguments, the global bytes the oracle reads)."""

from __future__ import annotations

from typing import cast

from ..cluster import multicast as M
from ..cluster import probe as P
from ..tma.dtypes import ALL_DTYPES
from ..tma.tiled.encode import encode_tiled
from .strategies import RngChooser, build_coordinates, build_valid_spec


def tiled_batch(ch, rng, cluster, buf, host, dtype=None, encode=encode_tiled):
    """Tiled multicasts of one random valid map over `buf` (its bytes in `host`): 1-4 slots, shifted boxes; the map
    of `dtype` when given. `encode` makes the map (CPU tests pass one that needs no driver)."""
    ctas, slots = P.cluster_size(cluster), ch.integer(1, 4)
    per_slot = (40 << 10 if ctas > 8 else 96 << 10) // slots - 1024
    dtypes = ALL_DTYPES if dtype is None else (dtype,)
    spec = build_valid_spec(ch, dtypes=dtypes, interleave=False, address=False, max_dim=ch.choice([8, 40, 300]),
                            max_smem_bytes=min(per_slot, ch.choice([1024, 4096, 16384])), max_extent_bytes=4 << 20)
    align = ch.choice([16, 128, 1024])
    offset = ch.integer(0, (host.size - spec.extent_bytes - 1024) // align) * align
    spec = spec.replace(base_address=buf.ptr + offset)
    box_offset = 128 * ch.integer(0, 7)
    op_lists = [M.random_cluster_ops(rng, ctas, slots, lambda r: (build_coordinates(ch, spec), None))
                for _ in range(max(2, 128 // ctas))]
    batch = P.Batch(cluster, op_lists, slots, M.slot_bytes_for(spec, box_offset), box_offset, spec,
                    poison=ch.integer(0, (1 << 32) - 1))
    return batch, dict(tmap=encode(spec)), host[offset:offset + spec.extent_bytes]


def bulk_batch(ch, rng, cluster, buf, host):
    """1D bulk multicasts from random 16-byte-aligned ranges of `buf`."""
    ctas, slots = P.cluster_size(cluster), ch.integer(1, 4)
    most = 16 * ch.choice([4, 64, 512])
    box_offset = 0 if ch.chance(0.25) else 16 * ch.integer(1, 63)

    def source(r):
        return None, (16 * ch.integer(0, (host.size - most) // 16), 16 * ch.integer(1, most // 16))

    op_lists = [M.random_cluster_ops(rng, ctas, slots, source) for _ in range(max(2, 128 // ctas))]
    batch = P.Batch(cluster, op_lists, slots, M.slot_bytes_for(None, box_offset, most), box_offset,
                    poison=ch.integer(0, (1 << 32) - 1))
    return batch, dict(source=buf), host


def fuzz_shapes() -> list[tuple[int, int, int]]:
    """One cluster shape of every size the multicast rules accept (1..MASK_BITS), spread over x, y and z."""
    out = []
    for n in range(1, M.MASK_BITS + 1):
        axis = n % 3 if n <= 8 else 0  # small sizes take turns on x, y and z; non-portable ones stay on x
        out.append(tuple(n if k == axis else 1 for k in range(3)))
    return cast("list[tuple[int, int, int]]", out)  # three axes each


def fuzz_batches(rng, buf, host, late_expect: float = 0.125, encode=encode_tiled):
    """The multicast fuzz's batches, endlessly: (batch, run arguments, global bytes). Shapes cycle; each round
    makes a different quarter of them bulk, so every size meets both copy kinds every 4 rounds; tiled maps cycle
    through every dtype. A `late_expect` share arm after the bytes landed (tx < 0). Stop at
    `min_batches(...)` batches or later: by then every size met both copy kinds."""
    ch, shapes = RngChooser(rng), fuzz_shapes()
    i = tiled = 0
    while True:
        cluster = shapes[i % len(shapes)]
        if (i + i // len(shapes)) % 4 == 3:
            batch, args, global_bytes = bulk_batch(ch, rng, cluster, buf, host)
        else:
            batch, args, global_bytes = tiled_batch(ch, rng, cluster, buf, host,
                                                    dtype=ALL_DTYPES[tiled % len(ALL_DTYPES)], encode=encode)
            tiled += 1
        if ch.chance(late_expect):
            batch.flags = P.HAZARD_FLAGS["late_expect"]
        yield batch, args, global_bytes
        i += 1


def min_batches() -> int:
    """Batches `fuzz_batches` needs before every cluster size has had a bulk and a tiled batch."""
    return 4 * len(fuzz_shapes())
