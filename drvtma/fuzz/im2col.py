"""The im2col fuzz targets: `im2col_encode` (IM2COL_RULES against cuTensorMapEncodeIm2col, edge specs from
`testing.im2col.build_edge_im2col_spec`) and `im2col` (im2col loads on the GPU, byte for byte against
`tma.im2col.oracle`; one case = one map over the session's pool of random bytes, many loads)."""

from __future__ import annotations

from dataclasses import dataclass

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
from .loads import ImageSession
from .targets import Outcome, Target, spec_labels

POOL_SEED = 3
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


class Im2colSession(ImageSession):
    """im2col loads through the Im2colProbe, over the pool of random bytes."""

    FAKE_POOL_BASE = 0x7F00_0000_0000  # 1024-aligned, as a real pool is

    def _open_probe(self):
        from ..tma.im2col.probe import Im2colProbe

        return Im2colProbe()

    def _placed(self, case: Im2colCase) -> tuple:
        spec = case.spec.replace(base_address=self.pool_base() + case.offset)
        return spec, oracle.im2col_image_bytes(spec, case.box_offset)

    def _launch(self, case: Im2colCase, spec, image_bytes: int, digests: bool):
        from ..tma.im2col.encode import encode_im2col

        assert self.probe is not None  # a session on the device opened one
        return self.probe.launch(encode_im2col(spec), case.coords, case.offsets, image_bytes=image_bytes,
                                 box_offset=case.box_offset, poison=case.poison, digests=digests)

    def _oracle(self, case: Im2colCase, spec, image_bytes: int) -> np.ndarray:
        window = self.host[case.offset:case.offset + spec.extent_bytes]
        return oracle.im2col_images(spec, window, case.coords, case.offsets, image_bytes=image_bytes,
                                    box_offset=case.box_offset, poison=case.poison)

    def _compare(self, case: Im2colCase, spec, got: np.ndarray, want: np.ndarray) -> Outcome:
        bad = differing_rows(got, want)
        if not bad:
            return Outcome(True)
        i = bad[0]
        return Outcome(False, detail=f"{len(bad)} of {len(got)} loads differ; the first:\n" +
                       describe_im2col_mismatch(spec, case.coords[i], case.offsets[i], case.box_offset, got[i],
                                                want[i]),
                       differences=[{"offset": int(p), "expected": int(want[i][p]), "got": int(got[i][p])}
                                    for p in np.flatnonzero(got[i] != want[i])[:16]], bad=bad)


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
