"""The coverage model of the stores and reductions targets, without a GPU: its universe follows the rule tables,
a user's map narrows it, and handmade cases classify as expected (the standard campaigns' hits are
tests/test_coverage_cpu.py's)."""

from __future__ import annotations

import warnings

from drvtma.errors import StoreStraddleWarning
from drvtma.fuzz.campaign import build_case
from drvtma.fuzz.coverage import MIN_HITS, measure
from drvtma.fuzz.stores import REDUCTIONS, STORES, StoreFuzzCase
from drvtma.fuzz.user import KERNEL_REDUCTIONS, KERNEL_STORES
from drvtma.tma import stores as S
from drvtma.tma.dtypes import FLOAT64, TFLOAT32
from drvtma.tma.tiled.spec import TensorMapSpec


def universe(target, spec=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreStraddleWarning)
        return target.coverage.universe(target.configure(spec))


# ---------------------------------------------------------------------------------------------- the universe

def test_the_universe_names_what_the_rules_accept_and_refuses_the_rest_by_rule():
    stores, reductions = universe(STORES), universe(REDUCTIONS)
    assert "rank=3|dtype=float64" in stores.classes and "pair|dtype=float16|swizzle=B128" in stores.classes
    assert "rank=5|axis=4|element_stride=not_divides" in stores.classes  # the inner axis too
    assert "rank=1|axis=0|stride=tight" not in stores.classes + tuple(stores.refused)  # no outer axis
    assert stores.refused["rank=2|dtype=tfloat32"] == "store_dtype"  # refused by check_store_spec: not modelled
    assert stores.refused["rank=2|dtype=16u4_align8b"] == "needs_subbyte_maps"
    assert stores.refused["rank=4|swizzle=B128_ATOM_64B"] == "needs_swizzle_atoms"
    for cls in ("rank=3|axis=1|coordinate=negative", "rank=3|axis=2|boundary=before",
                "rank=3|axis=0|boundary=straddle_start", "rank=3|axis=0|boundary=spans"):
        assert stores.refused[cls] == "store_negative_coordinate"
    assert reductions.refused["rank=2|dtype=float64"] == "reduce_dtype"
    assert reductions.refused["pair|dtype=float16|op=inc"] == "reduce_dtype"
    assert "rank=2|op=inc|dtype=uint32" in reductions.classes
    assert reductions.refused["rank=2|op=inc|dtype=int32"] == "reduce_dtype"
    pairs = {c for c in reductions.classes if c.startswith("pair|dtype=") and "|op=" in c}
    assert pairs == {f"pair|dtype={d.name}|op={op}" for op, ds in S.REDUCE_DTYPES.items() for d in ds}
    assert not any("|op=" in c for c in stores.classes if c.startswith("pair"))  # one op: no op pairs


def test_the_universe_follows_the_tables(monkeypatch):
    monkeypatch.setitem(S.REDUCE_DTYPES, "add", S.REDUCE_DTYPES["add"] + (FLOAT64,))
    monkeypatch.setitem(S.REDUCE_DTYPES, "inc", ())
    reductions = universe(REDUCTIONS)
    assert "pair|dtype=float64|op=add" in reductions.classes and "rank=4|dtype=float64" in reductions.classes
    assert "rank=4|op=inc" not in reductions.classes and reductions.refused["rank=4|op=inc"] == "reduce_dtype"
    monkeypatch.setattr(S.rules, "STORE_DTYPES", tuple(d for d in S.STORE_DTYPES if d != FLOAT64) + (TFLOAT32,))
    stores = universe(STORES)
    assert "rank=1|dtype=tfloat32" in stores.classes and "pair|dtype=tfloat32|l2=B64" in stores.classes
    assert stores.refused["rank=1|dtype=float64"] == "store_dtype"
    monkeypatch.undo()
    assert "rank=1|dtype=float64" in universe(STORES).classes and "rank=4|op=inc" in universe(REDUCTIONS).classes


def test_a_users_map_restricts_the_universe_to_what_it_allows():
    spec = TensorMapSpec.create("float16", (10, 6, 40), (4, 3, 16), element_strides=(3, 1, 1), swizzle=2)
    u = universe(REDUCTIONS, spec)
    assert {c.split("|")[0] for c in u.classes if c.startswith("rank=")} == {"rank=3"}
    assert "rank=3|swizzle=B64" in u.classes and "rank=3|swizzle=NONE" not in u.classes + tuple(u.refused)
    assert "rank=3|axis=0|element_stride=not_divides" in u.classes
    assert "rank=3|axis=0|element_stride=1" not in u.classes
    assert {c for c in u.classes if c.startswith("rank=3|op=") and c.count("|") == 1} == {
        "rank=3|op=add", "rank=3|op=min", "rank=3|op=max"}
    assert u.refused["rank=3|op=xor"] == "reduce_dtype"
    assert KERNEL_STORES.coverage is not None and KERNEL_REDUCTIONS.coverage.ops == REDUCTIONS.coverage.ops
    cov = measure(REDUCTIONS, REDUCTIONS.configure(spec),
                  (build_case(REDUCTIONS, REDUCTIONS.configure(spec), 1, i)[0] for i in range(400)))
    assert cov.unhit(MIN_HITS) == [] and cov.outside() == [] and cov.refused_hits() == []


# ---------------------------------------------------------------------------------------------- classes()

def test_classes_of_a_handmade_case():
    spec = TensorMapSpec.create("float32", (10, 20), (4, 8), strides_bytes=(96, 4), element_strides=(3, 2),
                                swizzle=1, l2_promotion=2)
    got = set(STORES.coverage.classes(StoreFuzzCase(S.StoreCase(spec, (8, 12)), 0)))
    assert {"rank=2|dtype=float32", "rank=2|swizzle=B32", "rank=2|l2=B128", "rank=2|op=store",
            "rank=2|axis=0|element_stride=not_divides", "rank=2|axis=0|box=smaller", "rank=2|axis=0|stride=padded",
            "rank=2|axis=0|coordinate=positive", "rank=2|axis=0|boundary=straddle_end",  # rows 8 and 11 of 10
            "rank=2|axis=1|element_stride=divides", "rank=2|axis=1|boundary=inside",  # 12..19: inner stride ignored
            "pair|dtype=float32|swizzle=B32", "pair|swizzle=B32|l2=B128"} <= got
    assert not any(c.startswith("pair") and "op=" in c for c in got)
    got = set(REDUCTIONS.coverage.classes(StoreFuzzCase(S.StoreCase(spec.replace(strides_bytes=(80, 4)), (0, 20),
                                                                    "add"), 0)))
    assert {"rank=2|axis=0|boundary=inside", "rank=2|axis=0|coordinate=zero", "rank=2|axis=0|stride=tight",
            "rank=2|axis=1|boundary=past", "rank=2|op=add|dtype=float32", "pair|dtype=float32|op=add"} <= got
