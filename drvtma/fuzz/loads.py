"""The `loads` fuzz target: tiled loads of random (or the user's) maps on the GPU, byte for byte against the oracle.

A case is one map over a pool of random bytes (the pool comes from the data seed and is uploaded once), many boxes
at random coordinates, a box offset in shared memory and a poison word. While the GPU loads one case the host
computes the oracle's images of it (`LoadProbe.launch`), so the two overlap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..show.failure import failure_svg
from ..testing import ADDRESS_BASE, build_valid_spec
from ..testing.strategies import coordinate_builder
from ..tma.tiled import oracle
from ..tma.tiled.probe import describe_mismatch
from ..tma.tiled.spec import TensorMapSpec
from .coverage.tiled import TiledLoadsCoverage
from .targets import Outcome, Session, Target, spec_labels

if TYPE_CHECKING:
    from ..runtime.driver import DeviceBuffer

DATA_SEED = 1  # the pool's bytes: fixed by default, so stored failures replay in later campaigns
POOL_BYTES = 64 << 20
MAX_BOXES = 192  # boxes per map: more of them spread the per-launch cost (encode, launch, download)
DIFF_LIMIT = 16
IMAGE_HEX_LIMIT = 64 << 10  # images up to this size go into reproducers whole


def expected_images(spec, global_bytes, coords, *, box_offset, image_bytes, poison):
    """What the oracle says the probe writes (a module attribute: planted-bug tests replace it)."""
    return oracle.load_images(spec, global_bytes, coords, box_offset=box_offset, image_bytes=image_bytes,
                              poison=poison)


def placed(case, base: int):
    """The case's map at its place in a pool starting at `base`, and its image size."""
    spec = case.spec.replace(base_address=base + case.offset)
    return spec, oracle.image_bytes_for(spec, case.box_offset)


@dataclass
class LoadCase:
    spec: TensorMapSpec  # base_address unset: the session puts the map `offset` bytes into its pool
    offset: int
    coords: np.ndarray  # (boxes, rank), NumPy order
    box_offset: int
    poison: int
    layout: tuple | None = field(default=None, compare=False)  # trace positions: (count, box starts, end)


def _spec_from_options(options: dict) -> TensorMapSpec | None:
    d = options.get("spec")
    if not d:
        return None
    return TensorMapSpec.from_dict({k: v for k, v in d.items() if k != "base_address"})


def build_boxes(ch, spec: TensorMapSpec, max_boxes: int, coordinates) -> tuple[np.ndarray, tuple | None]:
    """1..max_boxes boxes (a choice), each `coordinates()`: (boxes x rank, the trace positions `focus` reads)."""
    count_at = ch.position()
    n = ch.integer(1, max_boxes)
    starts, coords = [], []
    for _ in range(n):
        starts.append(ch.position())
        coords.append(coordinates())
    layout = (count_at, starts, ch.position()) if count_at is not None else None
    return np.array(coords, dtype=np.int64).reshape(n, spec.rank), layout


def image_differences(spec, box_offset, got, want, limit=DIFF_LIMIT) -> list[dict]:
    """The first differing bytes of one image, with where they sit in the box."""
    out = []
    for pos in np.flatnonzero(got != want)[:limit]:
        rel = int(pos) - box_offset
        where = (f"box byte {rel}, row {rel // spec.row_pitch_bytes}, byte {rel % spec.row_pitch_bytes} of the "
                 "pitch (before swizzle)" if 0 <= rel < spec.smem_bytes else "outside the box footprint")
        out.append({"offset": int(pos), "expected": f"0x{int(want[pos]):02x}", "got": f"0x{int(got[pos]):02x}",
                    "where": where})
    return out


def digest_disagreement(loads: int) -> Outcome:
    """The GPU's digests differ from the oracle's while every image byte is the same: drvtma's digest is wrong
    (a failure, so that it is never hidden)."""
    return Outcome(False, detail=f"the GPU's digests of {loads} image(s) differ from the oracle's, but every byte "
                   "of the images is the same: the probe's digest (write_image_digest) and oracle.image_digests "
                   "disagree, a drvtma bug")


def compare_images(case: LoadCase, spec: TensorMapSpec, got: np.ndarray, want: np.ndarray) -> Outcome:
    bad = np.flatnonzero((got.view(np.uint64) != want.view(np.uint64)).any(axis=1)).tolist()  # 16-byte rows
    if not bad:
        return Outcome(True)
    first = bad[0]
    small = got.shape[1] <= IMAGE_HEX_LIMIT

    return Outcome(False, expected=want[first].tobytes().hex() if small else None,
                   got=got[first].tobytes().hex() if small else None,
                   differences=image_differences(spec, case.box_offset, got[first], want[first]),
                   detail=f"{len(bad)} of {len(got)} boxes differ; the first:\n"
                          + describe_mismatch(spec, case.coords[first], case.box_offset, got[first], want[first]),
                   bad=bad)


class ImageSession(Session):
    """A target whose case is one probe launch over a pool of random bytes (host and device), its images compared
    byte for byte with the oracle's; given the oracle workers' digests (1-D) instead, only the GPU's digests come
    back, and the images only for a case whose digest differs. Subclasses give the probe, the placed spec and image
    size, the launch, the oracle and the comparison."""

    FAKE_POOL_BASE = ADDRESS_BASE  # the pool's address on the fake device

    def __init__(self, options: dict, fake: bool = False):
        super().__init__(options, fake)
        t = time.perf_counter()
        self.host = np.random.default_rng(options["data_seed"]).integers(0, 256, options["pool_bytes"],
                                                                         dtype=np.uint8)
        self.device: DeviceBuffer | None = None
        self.probe = None
        if not fake:
            from ..runtime.driver import DeviceBuffer
            from ..runtime.host import PinnedScratch

            self.device = self.own(DeviceBuffer.from_array(self.host))
            self.probe = self.own(self._open_probe())
            self.pinned = self.own(PinnedScratch())  # each case's images, downloaded at the bus's speed
        self.timing["setup"] += time.perf_counter() - t

    def pool_base(self) -> int:
        """Where the session's pool of random bytes starts (cases sit `offset` bytes in)."""
        return self.device.ptr if self.device is not None else self.FAKE_POOL_BASE

    def check_one(self, case, want: np.ndarray | None = None) -> Outcome:
        """Launch, the oracle's images while the GPU loads, then compare. `want`: given by an oracle worker, as the
        images' digests (1-D): only the GPU's digests come back, and the images only where they differ."""
        timing, clock = self.timing, time.perf_counter
        spec, image_bytes = self._placed(case)
        digests = want is not None and want.ndim == 1
        t0 = clock()
        pending = None if self.fake else self._launch(case, spec, image_bytes, digests)  # the oracle runs meanwhile
        t1 = clock()
        if want is None:
            want = self._oracle(case, spec, image_bytes)
        t2 = clock()
        if digests:
            got = oracle.image_digests(self._fake_images(case, spec, image_bytes)) if pending is None \
                else pending.digests()
        else:
            got = self._fake_images(case, spec, image_bytes, want) if pending is None \
                else pending.wait(into=self.pinned)  # compared before the next case's download
        t3 = clock()
        timing["encode+launch"] += t1 - t0
        timing["oracle"] += t2 - t1
        timing["device wait+download"] += t3 - t2
        timing["image_bytes"] += len(case.coords) * image_bytes
        if digests:
            same = bool((got == want).all())
            timing["compare"] += clock() - t3
            if same:
                return Outcome(True)
            # a digest differs: the images, and the oracle's made here, to say which bytes
            want = self._oracle(case, spec, image_bytes)
            got = self._fake_images(case, spec, image_bytes, want) if pending is None \
                else pending.wait(into=self.pinned)
            t3 = clock()
        outcome = self._compare(case, spec, got, want)
        timing["compare"] += clock() - t3
        return digest_disagreement(len(case.coords)) if digests and outcome.ok else outcome

    def _fake_images(self, case, spec, image_bytes: int, want: np.ndarray | None = None) -> np.ndarray:
        """The fake device's images: the oracle's (`want` where it is made already)."""
        return want.copy() if want is not None else self._oracle(case, spec, image_bytes)

    def _open_probe(self):
        raise NotImplementedError

    def _placed(self, case) -> tuple:
        """(the case's spec at its place in the pool, its image size)."""
        raise NotImplementedError

    def _launch(self, case, spec, image_bytes: int, digests: bool):
        raise NotImplementedError

    def _oracle(self, case, spec, image_bytes: int) -> np.ndarray:
        raise NotImplementedError

    def _compare(self, case, spec, got: np.ndarray, want: np.ndarray) -> Outcome:
        raise NotImplementedError


class LoadsSession(ImageSession):
    """Tiled loads through the LoadProbe."""

    def _open_probe(self):
        from ..tma.tiled.probe import LoadProbe

        return LoadProbe()

    def _placed(self, case: LoadCase) -> tuple:
        return placed(case, self.pool_base())

    def _launch(self, case: LoadCase, spec, image_bytes: int, digests: bool):
        from ..tma.tiled.encode import encode_tiled

        assert self.probe is not None  # a session on the device opened one
        return self.probe.launch(encode_tiled(spec), case.coords, box_offset=case.box_offset,
                                 image_bytes=image_bytes, poison=case.poison, digests=digests)

    def _oracle(self, case: LoadCase, spec, image_bytes: int) -> np.ndarray:
        window = self.host[case.offset:case.offset + spec.extent_bytes]
        return expected_images(spec, window, case.coords, box_offset=case.box_offset, image_bytes=image_bytes,
                               poison=case.poison)

    def _fake_images(self, case: LoadCase, spec, image_bytes: int, want: np.ndarray | None = None) -> np.ndarray:
        """The true oracle's images (planted-bug tests replace expected_images, which `want` came from)."""
        window = self.host[case.offset:case.offset + spec.extent_bytes]
        return oracle.load_images(spec, window, case.coords, box_offset=case.box_offset, image_bytes=image_bytes,
                                  poison=case.poison)

    def _compare(self, case: LoadCase, spec, got: np.ndarray, want: np.ndarray) -> Outcome:
        return compare_images(case, spec, got, want)


class LoadsTarget(Target):
    name = "loads"
    description = "tiled loads (any dtype, rank, swizzle, fill, element strides) vs the NumPy oracle"
    unit = "boxes"
    cases_per_batch = 8
    session_class = LoadsSession
    coverage = TiledLoadsCoverage()
    oracle_workers = True

    def configure(self, spec=None, *, data_seed: int = DATA_SEED, max_boxes: int = MAX_BOXES) -> dict:
        pool = POOL_BYTES
        if spec is not None:
            spec.replace(base_address=ADDRESS_BASE).validate()
            oracle._check_oracle_spec(spec, 0)
            pool = max(pool, -(-(spec.extent_bytes + (1 << 20)) // (1 << 20)) << 20)
        return {"spec": spec.to_dict() if spec is not None else None, "data_seed": int(data_seed),
                "pool_bytes": int(pool), "max_boxes": int(max_boxes)}

    def build(self, ch, options: dict) -> LoadCase:
        spec = _spec_from_options(options)
        if spec is None:
            big = ch.chance(0.05)
            spec = build_valid_spec(ch, interleave=False, address=False, max_dim=ch.choice([8, 40, 300]),
                                    max_smem_bytes=200 * 1024 if big else ch.choice([2048, 16384, 49152]),
                                    max_extent_bytes=8 << 20)
        align = ch.choice([16, 16, 128, 1024])
        offset = ch.integer(0, (options["pool_bytes"] - spec.extent_bytes - 1024) // align) * align
        box_offset = 128 * ch.integer(0, 7)
        poison = ch.integer(0, (1 << 32) - 1)
        draw = coordinate_builder(spec)
        coords, layout = build_boxes(ch, spec, options["max_boxes"], lambda: draw(ch))
        return LoadCase(spec, offset, coords, box_offset, poison, layout)

    def focus(self, trace, case: LoadCase, outcome: Outcome):
        """Only the boxes that differed (at most 4), the count choice set to match."""
        if case.layout is None or not outcome.bad:
            return trace
        count_at, starts, end = case.layout
        bounds = starts + [end]
        keep = outcome.bad[:4]
        boxes = [v for i in keep for v in trace[bounds[i]:bounds[i + 1]]]
        return trace[:count_at] + [len(keep)] + boxes + trace[end:]

    def expected(self, case: LoadCase, pool: np.ndarray, base: int) -> np.ndarray:
        """The digests of the oracle's images of `case` in a pool of random bytes at `base` (an oracle worker's
        answer: 8 bytes an image reach the campaign, and the GPU's digests are compared with them)."""
        spec, image_bytes = placed(case, base)
        return oracle.image_digests(expected_images(spec, pool[case.offset:case.offset + spec.extent_bytes],
                                                    case.coords, box_offset=case.box_offset,
                                                    image_bytes=image_bytes, poison=case.poison))

    def labels(self, case: LoadCase) -> dict:
        return spec_labels(case.spec)

    def picture(self, case: LoadCase, outcome: Outcome) -> str | None:
        """The first differing box's image (`show.failure`); None when the reproducer holds no image bytes."""
        if outcome.ok or outcome.expected is None or not outcome.bad:
            return None

        return failure_svg(case.spec, case.coords[outcome.bad[0]], case.box_offset, outcome.expected, outcome.got)

    def size(self, case: LoadCase) -> int:
        return len(case.coords)

    def case_to_json(self, case: LoadCase) -> dict:
        return {"spec": case.spec.to_dict(), "pool_offset": case.offset, "coordinates": case.coords.tolist(),
                "box_offset": case.box_offset, "poison": f"0x{case.poison:08x}"}

    def case_from_json(self, d: dict, options: dict) -> LoadCase:
        spec = TensorMapSpec.from_dict({k: v for k, v in d["spec"].items() if k != "base_address"})
        coords = np.array(d["coordinates"], dtype=np.int64).reshape(-1, spec.rank)
        return LoadCase(spec, int(d["pool_offset"]), coords, int(d["box_offset"]), int(str(d["poison"]), 0))

    def describe(self, case: LoadCase) -> str:
        head = ", ".join(str(tuple(int(v) for v in c)) for c in case.coords[:4])
        more = f" and {len(case.coords) - 4} more" if len(case.coords) > 4 else ""
        return (f"{len(case.coords)} load(s) at {head}{more} (NumPy order), box offset {case.box_offset}, "
                f"poison 0x{case.poison:08x}, pool offset {case.offset}\n{case.spec.describe()}")


LOADS = LoadsTarget()
