"""TMA multicast in NumPy: the rules a multicast must follow and what it writes.

A multicast issued by cluster rank r with mask m puts one box (drvtma.tma.tiled.oracle's image of it) at the same
shared-memory offset in every CTA whose rank bit is set in m, issuer included only when its bit is set, and completes
the box's bytes on the barrier at the same offset in each of them. So every receiver must arm its own barrier for the
bytes landing in it, whoever issued them. Bit r of the mask is the CTA of cluster rank r, and rank is
x + nx * (y + ny * z) over %cluster_ctaid [derived; the GPU tests pin both].

`Multicast` is one load, `check_cluster_ops` the host-side rules, `expected_tx` what each CTA arms per slot and
`expected_images` every CTA's images. 1D bulk multicasts (no tensor map) are `Multicast(..., bulk=(offset, bytes))`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from ..errors import ClusterError
from ..tma.tiled import oracle
from ..tma.tiled.spec import TensorMapSpec

MASK_BITS = 16  # ctaMask is a 16-bit operand
SLOT_ALIGN = 1024  # every image slot starts 1024-byte aligned, so the swizzle phase is the box offset's


@dataclass(frozen=True)
class Multicast:
    """One multicast load: `issuer` rank, `mask` of receiving ranks, `slot` (image index in every receiver) and
    either `coords` (tiled, NumPy order) or `bulk` = (source byte offset, bytes) for a 1D bulk copy."""

    issuer: int
    mask: int
    slot: int = 0
    coords: tuple[int, ...] | None = None
    bulk: tuple[int, int] | None = None

    @property
    def receivers(self) -> list[int]:
        return [r for r in range(MASK_BITS) if self.mask >> r & 1]


def cta_rank(ctaid, cluster) -> int:
    """Cluster rank of the CTA at %cluster_ctaid (x, y, z) in a cluster of dims (x, y, z): x fastest."""
    (x, y, z), (nx, ny, _) = tuple(ctaid), tuple(cluster)
    return x + nx * (y + ny * z)


def mask_of(ranks) -> int:
    return sum(1 << int(r) for r in set(ranks))


def check_multicast(op: Multicast, cluster_ctas: int, slots: int = 1) -> None:
    """Refuse a multicast the hardware cannot take, with the rule's name."""
    if not 1 <= cluster_ctas <= MASK_BITS:
        raise ClusterError("multicast_cluster_size", "cluster_ctas", cluster_ctas, "use a cluster of 1..16 CTAs")
    if not 0 <= op.issuer < cluster_ctas:
        raise ClusterError("multicast_issuer", "issuer", op.issuer, f"use a rank in 0..{cluster_ctas - 1}",
                           f"the cluster has {cluster_ctas} CTAs")
    if op.mask == 0:
        raise ClusterError("multicast_mask_empty", "mask", op.mask, "set the bit of at least one receiving rank",
                           "an empty ctaMask writes nowhere and completes no barrier (undocumented)")
    if op.mask >> cluster_ctas:
        raise ClusterError("multicast_mask_range", "mask", hex(op.mask),
                           f"keep bits below {cluster_ctas} (mask & {hex((1 << cluster_ctas) - 1)})",
                           f"bits at or above the cluster size ({cluster_ctas}) name no CTA; the hardware "
                           "behaviour is undocumented")
    if not 0 <= op.slot < slots:
        raise ClusterError("multicast_slot", "slot", op.slot, f"use a slot in 0..{slots - 1}")
    if (op.coords is None) == (op.bulk is None):
        raise ClusterError("multicast_kind", "op", op, "give coords (tiled) or bulk=(offset, bytes), not both")
    if op.bulk is not None:
        offset, nbytes = op.bulk
        if offset % 16 or nbytes % 16 or nbytes <= 0:
            raise ClusterError("bulk_alignment", "bulk", op.bulk, "use a 16-byte aligned offset and a positive "
                               "multiple of 16 bytes", "1D bulk copies move 16-byte units")


def check_cluster_ops(ops, cluster_ctas: int, slots: int = 1) -> None:
    """Every op's own rules, and no two ops landing in the same slot of one CTA (their order is undefined)."""
    owner: dict[tuple[int, int], int] = {}
    for i, op in enumerate(ops):
        check_multicast(op, cluster_ctas, slots)
        for r in op.receivers:
            j = owner.setdefault((r, op.slot), i)
            if j != i:
                raise ClusterError("multicast_overlap", f"ops[{i}].mask", hex(op.mask),
                                   f"give ops {j} and {i} disjoint masks or different slots",
                                   f"both write slot {op.slot} of rank {r}, and nothing orders them")


def op_bytes(op: Multicast, spec: TensorMapSpec | None) -> int:
    """The bytes one op lands in each receiver (and completes on its barrier)."""
    return op.bulk[1] if op.bulk is not None else cast(TensorMapSpec, spec).expect_tx_bytes  # tiled: spec given


def expected_tx(ops, cluster_ctas: int, slots: int, spec: TensorMapSpec | None = None) -> np.ndarray:
    """(cluster_ctas, slots) bytes each CTA must arm its slot barrier for: what lands in it, issuer or not."""
    tx = np.zeros((cluster_ctas, slots), dtype=np.int64)
    for op in ops:
        for r in op.receivers:
            tx[r, op.slot] += op_bytes(op, spec)
    return tx


def slot_bytes_for(spec: TensorMapSpec | None, box_offset: int, bulk_bytes: int = 0) -> int:
    """Bytes of one slot: the box (or bulk copy) at `box_offset`, rounded up to the 1024-byte slot alignment."""
    need = box_offset + (spec.smem_bytes if spec is not None else bulk_bytes)
    return -(-need // SLOT_ALIGN) * SLOT_ALIGN


def expected_images(ops, cluster_ctas: int, slots: int, slot_bytes: int, *, spec: TensorMapSpec | None = None,
                    global_bytes=None, box_offset: int = 0, poison: int = 0) -> np.ndarray:
    """(cluster_ctas, slots, slot_bytes) uint8: every CTA's images after the ops, poison where nothing landed.

    Tiled ops land drvtma.tma.tiled.oracle's image (swizzle on the absolute address: slots are 1024-byte aligned);
    bulk ops copy `global_bytes[offset:offset + bytes]`.
    """
    check_cluster_ops(ops, cluster_ctas, slots)
    if slot_bytes % SLOT_ALIGN:
        raise ValueError(f"slot_bytes {slot_bytes} must be a multiple of {SLOT_ALIGN}")
    out: np.ndarray = np.empty((cluster_ctas, slots, slot_bytes // 4), dtype=np.uint32)  # a uint8 view below
    out[:] = np.uint32(poison & 0xFFFFFFFF)
    out = out.view(np.uint8).reshape(cluster_ctas, slots, slot_bytes)
    tiled = [op for op in ops if op.coords is not None]
    if tiled:
        if spec is None:
            raise ValueError("tiled multicasts need the spec")
        imgs = oracle.load_images(spec, global_bytes, [op.coords for op in tiled], box_offset=box_offset,
                                  image_bytes=slot_bytes, poison=poison)
        written = np.zeros(slot_bytes, dtype=bool)
        written[(oracle.box_row_addresses(spec, box_offset)).reshape(-1)] = True
        for op, img in zip(tiled, imgs):
            for r in op.receivers:
                out[r, op.slot, written] = img[written]
    raw = None if global_bytes is None else np.asarray(global_bytes, dtype=np.uint8).reshape(-1)
    for op in ops:
        if op.bulk is not None:
            offset, nbytes = op.bulk
            if box_offset + nbytes > slot_bytes:
                raise ValueError(f"a {nbytes} B bulk copy at {box_offset} does not fit a {slot_bytes} B slot")
            for r in op.receivers:
                # bulk ops come with global_bytes
                out[r, op.slot, box_offset:box_offset + nbytes] = cast(np.ndarray, raw)[offset:offset + nbytes]
    return out


# ---------------------------------------------------------------------------------------------- random cases

def random_cluster_ops(rng: np.random.Generator, cluster_ctas: int, slots: int, make_source) -> list[Multicast]:
    """A random legal op list for one cluster: per slot a random set of receivers split into disjoint masks, each
    with a random issuer (often outside its own mask). So some masks leave out the issuer, several issuers share a
    slot with disjoint masks, and a CTA receives from several issuers in different slots.
    `make_source(rng)` returns (coords, None) or (None, (offset, bytes)) for one op."""
    ops = []
    for slot in range(slots):
        if slot and rng.random() < 0.2:
            continue  # a slot nobody writes: its barriers arm 0 bytes
        # One mask of every CTA, or a single receiver, are rare by chance in large clusters: drawn on purpose.
        pick = rng.random()
        whole = pick < 0.2
        if whole:
            receivers = list(range(cluster_ctas))
        elif pick < 0.35:
            receivers = [int(rng.integers(cluster_ctas))]
        else:
            receivers = [r for r in range(cluster_ctas) if rng.random() < 0.7] or [int(rng.integers(cluster_ctas))]
        rng.shuffle(receivers)
        groups = 1 if whole else int(rng.integers(1, min(len(receivers), 4) + 1))
        cuts = sorted(rng.choice(np.arange(1, len(receivers)), groups - 1, replace=False)) if groups > 1 else []
        for part in np.split(np.array(receivers), cuts):
            coords, bulk = make_source(rng)
            # a third issue from inside their own mask (by chance only 1 in the cluster size for a single receiver)
            issuer = int(rng.choice(part)) if rng.random() < 0.3 else int(rng.integers(cluster_ctas))
            ops.append(Multicast(issuer, mask_of(part), slot, coords, bulk))
    return ops
