"""The im2col fuzz targets: `im2col_encode` (IM2COL_RULES against cuTensorMapEncodeIm2col, edge specs from
`testing.im2col.build_edge_im2col_spec`) and `im2col` (im2col loads on the GPU, byte for byte against
`tma.im2col.oracle`; one case = one map over the session's pool of random bytes, many loads)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..testing.im2col import build_edge_im2col_spec, build_im2col_loads, build_im2col_spec
from ..tma.im2col import oracle
from ..tma.im2col.encode import encode_im2col_unchecked
from ..tma.im2col.probe import describe_im2col_mismatch
from ..tma.im2col.rules import IM2COL_UNJUDGED_RULES, im2col_driver_should_accept, validate_im2col
from ..tma.im2col.spec import Im2colSpec
from ..tma.tiled.oracle import image_digests
from .coverage.encode import IM2COL_ENCODE_COVERAGE
from .coverage.im2col import Im2colCoverage
from .encode import EncodeSession, EncodeTarget
from .loads import digest_disagreement
from .targets import Outcome, Session, Target, spec_labels

if TYPE_CHECKING:
    from ..runtime.driver import DeviceBuffer
    from ..tma.im2col.probe import Im2colProbe

POOL_SEED = 3
FAKE_POOL_BASE = 0x7F00_0000_0000  # the pool's address on the fake device (1024-aligned, as a real one is)
POOL_BYTES = 16 << 20
MAX_LOADS = 64


def _no_spec(spec) -> None:
    if spec is not None:
        raise ValueError("the im2col targets draw their own im2col specs; --spec takes a tiled map")


class Im2colEncodeSession(EncodeSession):
    validate = staticmethod(validate_im2col)
    should_accept = staticmethod(im2col_driver_should_accept)
    unjudged = IM2COL_UNJUDGED_RULES

    @staticmethod
    def encode(spec: Im2colSpec, address: int) -> None:
        encode_im2col_unchecked(spec.tma_params(), address)


class Im2colEncodeTarget(EncodeTarget):
    name = "im2col_encode"
    description = "validator (drvtma.tma.im2col.rules) vs cuTensorMapEncodeIm2col, specs at every rule's edges"
    session_class = Im2colEncodeSession
    coverage = IM2COL_ENCODE_COVERAGE

    def configure(self, spec=None) -> dict:
        _no_spec(spec)
        return {"spec": None}

    def build(self, ch, options: dict) -> Im2colSpec:
        return build_edge_im2col_spec(ch)

    def case_from_json(self, d: dict, options: dict) -> Im2colSpec:
        return Im2colSpec.from_dict(d["spec"])


@dataclass
class Im2colCase:
    spec: Im2colSpec  # base_address unset: the session puts the map `offset` bytes into its pool
    offset: int
    coords: np.ndarray  # (loads, rank), NumPy order
    offsets: np.ndarray  # (loads, rank - 2), D, H, W order
    box_offset: int
    poison: int


def differing_rows(got: np.ndarray, want: np.ndarray) -> list[int]:
    """The indices of the images (rows of whole 16-B chunks) that differ, compared 8 bytes at a time."""
    return np.flatnonzero((got.view(np.uint64) != want.view(np.uint64)).any(axis=1)).tolist()


class Im2colSession(Session):
    """The pool of random bytes (host and device) and the probe."""

    def __init__(self, options: dict, fake: bool = False):
        super().__init__(options, fake)
        self.host = np.random.default_rng(options["data_seed"]).integers(0, 256, options["pool_bytes"], np.uint8)
        self.device: DeviceBuffer | None = None
        self.probe: Im2colProbe | None = None
        if not fake:
            from ..runtime.driver import DeviceBuffer
            from ..runtime.host import PinnedScratch
            from ..tma.im2col.probe import Im2colProbe

            self.device = self.own(DeviceBuffer.from_array(self.host))
            self.probe = self.own(Im2colProbe())
            self.pinned = self.own(PinnedScratch())  # each case's images, downloaded at the bus's speed

    def pool_base(self) -> int:
        """Where the session's pool of random bytes starts (cases sit `offset` bytes in)."""
        return self.device.ptr if self.device is not None else FAKE_POOL_BASE

    def check_one(self, case: Im2colCase, want: np.ndarray | None = None) -> Outcome:
        """Launch, the oracle's images while the GPU loads, then compare. `want`: given by an oracle worker, as the
        images' digests (1-D): only the GPU's digests come back, and the images only where they differ."""
        timing, clock = self.timing, time.perf_counter
        spec = case.spec.replace(base_address=self.pool_base() + case.offset)
        image_bytes = oracle.im2col_image_bytes(spec, case.box_offset)
        digests = want is not None and want.ndim == 1
        t0 = clock()
        pending = self._launch(case, spec, image_bytes, digests)  # first: the oracle below runs while the GPU loads
        t1 = clock()
        if want is None:
            want = self._oracle(case, spec, image_bytes)
        t2 = clock()
        if digests:  # (the fake device: the oracle's own images stand in for the GPU's)
            got = image_digests(self._oracle(case, spec, image_bytes)) if pending is None else pending.digests()
        else:
            got = want.copy() if pending is None else pending.wait(into=self.pinned)  # compared before the next
        t3 = clock()
        timing["encode+launch"] += t1 - t0
        timing["oracle"] += t2 - t1
        timing["device wait+download"] += t3 - t2
        if digests:
            same = bool((got == want).all())
            timing["compare"] += clock() - t3
            if same:
                return Outcome(True)
            # a digest differs: the images and the oracle's, here, to say which bytes
            want = self._oracle(case, spec, image_bytes)
            got = want.copy() if pending is None else pending.wait(into=self.pinned)
            t3 = clock()
        bad = differing_rows(got, want)
        timing["compare"] += clock() - t3
        if not bad:
            return Outcome(True) if not digests else digest_disagreement(len(case.coords))

        i = bad[0]
        return Outcome(False, detail=f"{len(bad)} of {len(got)} loads differ; the first:\n" +
                       describe_im2col_mismatch(spec, case.coords[i], case.offsets[i], case.box_offset, got[i],
                                                want[i]),
                       differences=[{"offset": int(p), "expected": int(want[i][p]), "got": int(got[i][p])}
                                    for p in np.flatnonzero(got[i] != want[i])[:16]], bad=bad)

    def _launch(self, case: Im2colCase, spec, image_bytes: int, digests: bool):
        if self.fake:
            return None
        from ..tma.im2col.encode import encode_im2col

        assert self.probe is not None  # a session on the device opened one
        return self.probe.launch(encode_im2col(spec), case.coords, case.offsets, image_bytes=image_bytes,
                                 box_offset=case.box_offset, poison=case.poison, digests=digests)

    def _oracle(self, case: Im2colCase, spec, image_bytes: int) -> np.ndarray:
        window = self.host[case.offset:case.offset + spec.extent_bytes]
        return oracle.im2col_images(spec, window, case.coords, case.offsets, image_bytes=image_bytes,
                                    box_offset=case.box_offset, poison=case.poison)


class Im2colTarget(Target):
    name = "im2col"
    description = "im2col loads (ranks 3-5, every swizzle, fill, type, traversal stride, offsets) vs the oracle"
    unit = "loads"
    cases_per_batch = 8
    session_class = Im2colSession
    coverage = Im2colCoverage()
    oracle_workers = True
    version = 2  # N's element stride drawn 1..8

    def configure(self, spec=None, *, data_seed: int = POOL_SEED) -> dict:
        _no_spec(spec)
        return {"spec": None, "data_seed": int(data_seed), "pool_bytes": POOL_BYTES}

    def build(self, ch, options: dict) -> Im2colCase:
        spec = build_im2col_spec(ch)
        offset = 16 * ch.integer(0, (options["pool_bytes"] - spec.extent_bytes) // 16 - 1)
        coords, offsets = build_im2col_loads(ch, spec, ch.integer(1, MAX_LOADS))
        return Im2colCase(spec, offset, coords, offsets, 128 * ch.integer(0, 7), ch.integer(0, (1 << 32) - 1))

    def expected(self, case: Im2colCase, pool: np.ndarray, base: int) -> np.ndarray:
        """The digests of the oracle's images of `case` in a pool of random bytes at `base` (an oracle worker's
        answer: 8 bytes an image reach the campaign)."""
        spec = case.spec.replace(base_address=base + case.offset)
        return image_digests(oracle.im2col_images(spec, pool[case.offset:case.offset + spec.extent_bytes],
                                                   case.coords, case.offsets, box_offset=case.box_offset,
                                                   poison=case.poison))

    def labels(self, case: Im2colCase) -> dict:
        return spec_labels(case.spec)

    def size(self, case: Im2colCase) -> int:
        return len(case.coords)

    def case_to_json(self, case: Im2colCase) -> dict:
        return {"spec": case.spec.to_dict(), "offset": case.offset, "coords": case.coords.tolist(),
                "offsets": case.offsets.tolist(), "box_offset": case.box_offset, "poison": case.poison}

    def case_from_json(self, d: dict, options: dict) -> Im2colCase:
        spec = Im2colSpec.from_dict(d["spec"])
        return Im2colCase(spec, int(d["offset"]), np.asarray(d["coords"], np.int64).reshape(-1, spec.rank),
                          np.asarray(d["offsets"], np.int64).reshape(-1, spec.rank - 2), int(d["box_offset"]),
                          int(d["poison"]))

    def describe(self, case: Im2colCase) -> str:
        return case.spec.describe()


IM2COL_ENCODE = Im2colEncodeTarget()
IM2COL = Im2colTarget()
