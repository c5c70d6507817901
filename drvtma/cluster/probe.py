"""Multicast probes on the GPU (cu/cluster/multicast_probe.cu): many clusters per launch, each with its own op list;
every CTA's images, barrier states and identity come back and are compared with drvtma.cluster.multicast.

`MulticastProbe.run` launches one batch; `check_batch` compares it byte for byte; `run_identity` runs the cluster
identity / distributed shared memory kernel and `run_reuse` the buffer-reuse hazard kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from ..errors import ClusterError
from ..runtime.cluster_launch import allow_non_portable
from ..runtime.driver import Resource, ScratchBuffers
from ..runtime.status import StatusBuffer, barrier_timeout
from ..tma.tiled.spec import TensorMapSpec
from . import multicast as M

PROBE_SOURCE = "cluster/multicast_probe.cu"
IDENTITY_SOURCE = "cluster/cluster_identity.cu"
THREADS = 128
MAX_SLOTS = 8  # kMaxSlots
ID_WORDS = 8  # blockIdx xyz, %cluster_ctaid xyz, rank, ctas
IDENTITY_WORDS = 256  # kWords of cluster_identity.cu
NO_OP = 0xFFFFFFFF
# Mirrors struct McastOp; keep the layouts identical.
OP_DTYPE = np.dtype([("issuer", "<u4"), ("mask", "<u4"), ("slot", "<u4"), ("pad", "<u4"), ("c", "<i4", (5,)),
                     ("pad2", "<i4", (3,))])
HAZARD_FLAGS = {"no_init_fence": 1, "no_init_sync": 2, "late_expect": 4, "no_expect": 8, "exit_early": 16,
                "no_trailing_sync": 32}
STATE_DONE, STATE_EXACT = 1, 2  # the armed phase completed; a bare arrive then completed the next (no extra bytes)


def cluster_size(cluster) -> int:
    """CTAs in a cluster given as (x, y, z), (x, y), or x."""
    x, y, z = _dims(cluster)
    return x * y * z


def _dims(cluster) -> tuple[int, int, int]:
    c = (cluster,) if isinstance(cluster, int) else tuple(cluster)
    return cast("tuple[int, int, int]", tuple(int(v) for v in c) + (1,) * (3 - len(c)))  # padded to (x, y, z)


def pack_ops(op_lists, spec: TensorMapSpec | None) -> tuple[np.ndarray, int]:
    """[clusters][ops_per_cluster] McastOp records (unused entries issuer = NO_OP), and ops_per_cluster."""
    per = max(1, max((len(ops) for ops in op_lists), default=1))
    out = np.zeros((len(op_lists), per), dtype=OP_DTYPE)
    out["issuer"] = NO_OP
    for i, ops in enumerate(op_lists):
        for k, op in enumerate(ops):
            rec = out[i, k]
            rec["issuer"], rec["mask"], rec["slot"] = op.issuer, op.mask, op.slot
            if op.bulk is not None:
                rec["c"][:2] = (op.bulk[0] // 16, op.bulk[1])
            else:
                rank = cast(TensorMapSpec, spec).rank  # tiled ops come with their spec
                rec["c"][:rank] = tuple(op.coords)[::-1]  # the kernel wants dim 0 first
    return out, per


@dataclass
class Batch:
    """One launch: `op_lists[k]` is cluster k's ops. `spec` None means 1D bulk ops from the source buffer."""

    cluster: tuple[int, int, int]
    op_lists: list
    slots: int
    slot_bytes: int
    box_offset: int = 0
    spec: TensorMapSpec | None = None
    poison: int = 0xA5A5A5A5
    flags: int = 0

    @property
    def ctas(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]


@dataclass
class BatchResult:
    images: np.ndarray  # (clusters, ctas, slots, slot_bytes) uint8
    state: np.ndarray  # (clusters, ctas, slots)
    ids: np.ndarray  # (clusters, ctas, ID_WORDS)
    timeout: Exception | None = None  # the BarrierTimeout, when the status block reported one


class MulticastProbe(Resource):
    """The compiled probe kernels (non-portable cluster sizes allowed) and their device scratch."""

    def __init__(self, defines: dict | None = None):
        from ..runtime.kernel import load_module

        self.module = load_module(PROBE_SOURCE, defines=defines)
        self.kernel = self.module.kernel("multicast_probe")
        self.reuse_kernel = self.module.kernel("multicast_reuse")
        allow_non_portable(self.kernel)
        self.status = StatusBuffer()
        self.scratch = ScratchBuffers()
        self._scratch = self.scratch.get

    def run(self, batch: Batch, *, tmap=None, source=None, check_rules: bool = True,
            raise_timeout: bool = True) -> BatchResult:
        """Launch one batch. `tmap` encodes batch.spec (tiled); `source` is the DeviceBuffer bulk ops read."""
        n, ctas, slots = len(batch.op_lists), batch.ctas, batch.slots
        if not 1 <= slots <= MAX_SLOTS:
            raise ClusterError("probe_slots", "slots", slots, f"use 1..{MAX_SLOTS} slots")
        if batch.slot_bytes % M.SLOT_ALIGN:
            raise ValueError(f"slot_bytes must be a multiple of {M.SLOT_ALIGN}")
        if check_rules:
            for ops in batch.op_lists:
                M.check_cluster_ops(ops, ctas, slots)
        expect = np.zeros((n, ctas, slots), dtype=np.uint32)
        for k, ops in enumerate(batch.op_lists):
            # Bits at or above the cluster size name no CTA (hazard tests): arm the real receivers only.
            real = [replace(op, mask=op.mask & ((1 << ctas) - 1)) for op in ops]
            expect[k] = M.expected_tx(real, ctas, slots, batch.spec)
        ops_arr, per = pack_ops(batch.op_lists, batch.spec)
        rank = 0 if batch.spec is None else batch.spec.rank
        if tmap is None:  # bulk batches still pass a map: any well-formed 128 bytes
            from ..tma.tiled.encode import encode_tiled

            tmap = self._dummy_map = getattr(self, "_dummy_map", None) or encode_tiled(
                TensorMapSpec.create("uint8", (16,), (16,)), self._scratch("dummy", 16))
        if source is None:
            source = self._scratch("dummy", 16)
        words = slots * batch.slot_bytes // 4
        bufs = {name: self._scratch(name, nbytes) for name, nbytes in (
            ("ops", ops_arr.nbytes), ("expect", expect.nbytes), ("images", n * ctas * words * 4),
            ("state", n * ctas * slots * 4), ("ids", n * ctas * ID_WORDS * 4))}
        bufs["ops"].upload(ops_arr)
        bufs["expect"].upload(expect)
        for name in ("images", "state", "ids"):
            bufs[name].fill_u32(0xDEADBEEF)  # a CTA that wrote nothing shows
        self.status.reset()
        c = batch.cluster
        self.kernel.launch(tmap, rank, source, bufs["ops"], per, bufs["expect"], slots, batch.slot_bytes,
                           batch.box_offset, batch.poison & 0xFFFFFFFF, batch.flags, bufs["images"], bufs["state"],
                           bufs["ids"], self.status, grid=(c[0] * n, c[1], c[2]), block=(THREADS, 1, 1),
                           shared_mem=slots * batch.slot_bytes + M.SLOT_ALIGN, cluster=c)
        images = bufs["images"].download(np.uint8, (n, ctas, slots, batch.slot_bytes))
        state = bufs["state"].download(np.uint32, (n, ctas, slots))
        ids = bufs["ids"].download(np.uint32, (n, ctas, ID_WORDS))
        timeout = barrier_timeout("multicast_probe", self.status.read())
        if timeout is not None and raise_timeout:
            raise timeout
        return BatchResult(images, state, ids, timeout)

    def run_reuse(self, tmap, coords, *, cluster: int, clusters: int, tile_bytes: int, consume_ns: int,
                  safe: bool, raise_timeout: bool = True):
        """(clusters, cluster, rounds, tile_bytes) uint8: what every CTA copied out of each round's tile (rounds
        after a timed-out wait keep 0xDEADBEEF); with raise_timeout=False, (images, BarrierTimeout or None)."""
        rounds = len(coords)
        c = np.asarray(coords, dtype=np.int32)[:, ::-1].copy()  # dim 0 first
        coords_buf = self._scratch("reuse_coords", c.nbytes)
        coords_buf.upload(c)
        out = self._scratch("reuse_out", clusters * cluster * rounds * tile_bytes)
        out.fill_u32(0xDEADBEEF)
        self.status.reset()
        self.reuse_kernel.launch(tmap, coords_buf, rounds, tile_bytes, consume_ns, int(safe), out, self.status,
                                 grid=(cluster * clusters, 1, 1), block=(THREADS, 1, 1),
                                 shared_mem=tile_bytes + M.SLOT_ALIGN, cluster=(cluster, 1, 1))
        got = out.download(np.uint8, (clusters, cluster, rounds, tile_bytes))
        timeout = barrier_timeout("multicast_reuse", self.status.read())
        if raise_timeout:
            if timeout is not None:
                raise timeout
            return got
        return got, timeout

    def _parts(self) -> tuple:
        return self.scratch, self.status


@dataclass
class BatchCheck:
    """Byte-for-byte comparison of one batch: receiving (CTA, slot) images checked, mismatches, a report."""

    ops: int = 0
    images_checked: int = 0
    receiving_checked: int = 0
    mismatches: int = 0
    reports: list = field(default_factory=list)


def check_batch(batch: Batch, result: BatchResult, global_bytes=None, *, max_reports: int = 3) -> BatchCheck:
    """Every CTA's every slot against the oracle (poison where nothing lands), barrier states, rank formula."""
    out = BatchCheck()
    ctas = batch.ctas
    for k, ops in enumerate(batch.op_lists):
        want = M.expected_images(ops, ctas, batch.slots, batch.slot_bytes, spec=batch.spec,
                                 global_bytes=global_bytes, box_offset=batch.box_offset, poison=batch.poison)
        got = result.images[k]
        out.ops += len(ops)
        out.images_checked += ctas * batch.slots
        out.receiving_checked += sum(len(op.receivers) for op in ops)
        ranks_ok = all(int(result.ids[k, r, 6]) == r == M.cta_rank(result.ids[k, r, 3:6], batch.cluster)
                       and int(result.ids[k, r, 7]) == ctas for r in range(ctas))
        if ranks_ok and np.array_equal(got, want) and (result.state[k] == STATE_DONE | STATE_EXACT).all():
            continue
        problems = []
        for r in range(ctas):
            ident = result.ids[k, r]
            if int(ident[6]) != r or M.cta_rank(ident[3:6], batch.cluster) != r or int(ident[7]) != ctas:
                problems.append(f"rank {r}: ids {ident.tolist()} break rank = x + nx * (y + ny * z)")
            for s in range(batch.slots):
                if int(result.state[k, r, s]) != STATE_DONE | STATE_EXACT:
                    problems.append(f"rank {r} slot {s}: barrier state {int(result.state[k, r, s])}, expected 3 "
                                    "(armed phase done, no extra bytes)")
                diff = np.flatnonzero(got[r, s] != want[r, s])
                if diff.size:
                    problems.append(f"rank {r} slot {s}: {diff.size} bytes differ, first at {diff[:6].tolist()} "
                                    f"(got {got[r, s, diff[:6]].tolist()}, want {want[r, s, diff[:6]].tolist()})")
        if problems:
            out.mismatches += 1
            if len(out.reports) < max_reports:
                desc = batch.spec.describe() if batch.spec is not None else "1D bulk"
                listing = "\n".join(f"  {op}" for op in ops)
                out.reports.append(f"cluster {batch.cluster} #{k}, box offset {batch.box_offset}, {desc}\n"
                                   f"{listing}\n" + "\n".join(problems[:12]))
    return out


def run_identity(cluster, clusters: int, *, non_portable: bool = False):
    """(ids (clusters, ctas, 8), received (clusters, ctas, 256), loaded (clusters, ctas, 256)) from
    cluster_identity.cu: each CTA's position, the words rank - 1 stored into it and the words it loaded from rank - 1's
    buffer (written by rank - 2)."""
    from ..runtime.driver import DeviceBuffer
    from ..runtime.kernel import load_module

    kernel = load_module(IDENTITY_SOURCE).kernel("cluster_identity")
    if non_portable:
        allow_non_portable(kernel)
    c = _dims(cluster)
    ctas = c[0] * c[1] * c[2]
    total = ctas * clusters
    with DeviceBuffer(total * ID_WORDS * 4) as ids, DeviceBuffer(total * IDENTITY_WORDS * 4) as received, \
            DeviceBuffer(total * IDENTITY_WORDS * 4) as loaded, StatusBuffer() as status:
        for buf in (ids, received, loaded):
            buf.fill_u32(0xDEADBEEF)
        kernel.launch(ids, received, loaded, status, grid=(c[0] * clusters, c[1], c[2]), block=(THREADS, 1, 1),
                      cluster=c)
        status.check("cluster_identity")
        return (ids.download(np.uint32, (clusters, ctas, ID_WORDS)),
                received.download(np.uint32, (clusters, ctas, IDENTITY_WORDS)),
                loaded.download(np.uint32, (clusters, ctas, IDENTITY_WORDS)))


def identity_words(cluster_index: int, writer_rank: int) -> np.ndarray:
    """The 256 words CTA `writer_rank` of cluster `cluster_index` stores (cluster_identity.cu's tag)."""
    return (np.uint32(cluster_index << 20) | np.uint32(writer_rank << 12)
            | np.arange(IDENTITY_WORDS, dtype=np.uint32)).astype(np.uint32)
