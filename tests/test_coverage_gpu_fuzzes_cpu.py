"""Coverage models of the three GPU fuzzes that are pytest tests (multicast, wgmma, decode round trip), on the CPU:
universes follow the rule tables, the generators (drawn as the GPU tests draw them) reach every class at least
MIN_HITS times at about the gpu-check budgets, and handmade cases land in the classes they should."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from drvtma.cluster import multicast as M
from drvtma.cluster import probe as P
from drvtma.fuzz.coverage import MIN_HITS, Coverage
from drvtma.fuzz.coverage import decode as cov_decode
from drvtma.fuzz.coverage import multicast as cov_multicast
from drvtma.fuzz.coverage import wgmma as cov_wgmma
from drvtma.testing.multicast import fuzz_batches, min_batches
from drvtma.testing.tensormaps import random_spec
from drvtma.tma.tiled import rules as tma_rules
from drvtma.tma.tiled.spec import TensorMapSpec
from drvtma.wgmma import cases as wc
from drvtma.wgmma import probe as wp
from drvtma.wgmma import rules as wgmma_rules

SEED = 1  # DRVTMA_FUZZ_SEED's default, as the GPU tests draw
MULTICAST_CASES, WGMMA_CASES = 12000, 5000  # gpu-check's budgets
DECODE_SPECS = 30000  # gpu-check draws 40000 (fewest hits 40 there); 30000 still gives 28, in three quarters the time


def _unhit(cov: Coverage) -> str:
    return cov.summary() + f"\nbelow {MIN_HITS}: {cov.unhit(MIN_HITS)}\noutside: {cov.outside()}"


# ---------------------------------------------------------------------------------------------- multicast

def test_multicast_universe_follows_the_mask_rules(monkeypatch):
    u = cov_multicast.MODEL.universe()
    assert [c for c in u.classes if c.count("|") == 0] == [f"cluster={n}" for n in range(1, 17)]
    assert "cluster=1|mask=all|issuer=in" in u.classes and "cluster=1|mask=one|issuer=out" not in u.classes
    assert "cluster=2|mask=partial|issuer=in" not in u.classes and "cluster=3|mask=partial|issuer=out" in u.classes
    assert not any("mask=all|issuer=out" in c for c in u.classes)
    assert u.refused["copy=tiled|dtype=16u4_align8b"] == "needs_subbyte_maps"
    monkeypatch.setattr(M, "MASK_BITS", 8)  # an 8-bit ctaMask: the clusters of 9..16 go
    small = cov_multicast.MODEL.universe()
    assert "cluster=8" in small.classes and "cluster=9" not in small.classes


def test_multicast_fuzz_reaches_every_class():
    rng = np.random.default_rng(SEED + 13)  # the GPU test's stream
    host, buf = np.zeros(16 << 20, np.uint8), SimpleNamespace(ptr=0x7F00_0000_0000)
    cov = Coverage("multicast_fuzz", cov_multicast.MODEL.universe())
    cases = batches = 0
    for batch, _, _ in fuzz_batches(rng, buf, host, encode=lambda spec: None):
        if cases >= MULTICAST_CASES and batches >= min_batches():
            break
        for ops in batch.op_lists:
            M.check_cluster_ops(ops, batch.ctas, batch.slots)  # nothing the rules refuse
        cases += sum(len(ops) for ops in batch.op_lists)
        batches += 1
        cov.add(cov_multicast.MODEL.classes(batch))
    assert not cov.unhit(MIN_HITS) and not cov.outside() and not cov.refused_hits(), _unhit(cov)


def test_multicast_handmade_batch():
    spec = TensorMapSpec.create("uint32", (64, 64), (8, 32), swizzle="128B")
    ops = [M.Multicast(0, 0b0110, 0, (-4, 0)), M.Multicast(3, 0b1111, 1, (60, 32))]
    batch = P.Batch((4, 1, 1), [ops], 2, M.slot_bytes_for(spec, 0), spec=spec, flags=P.HAZARD_FLAGS["late_expect"])
    got = cov_multicast.MODEL.classes(batch)
    assert got["cluster=4|mask=partial|issuer=out"] == 1 and got["cluster=4|mask=all|issuer=in"] == 1
    assert got["copy=tiled|dtype=uint32"] == 2 and got["copy=tiled|swizzle=B128"] == 2
    assert got["copy=tiled|axis=1|boundary=straddle_start"] == 1 and got["copy=tiled|axis=1|boundary=straddle_end"] == 1
    assert got["copy=tiled|axis=0|boundary=inside"] == 2  # columns 0..31 and 32..63 of 64
    assert got["pair|mask=partial|late_expect=yes"] == 1
    universe = cov_multicast.MODEL.universe()
    assert set(got) <= set(universe.classes)


# ---------------------------------------------------------------------------------------------- wgmma

def test_wgmma_universe_follows_the_rule_tables(monkeypatch):
    u = cov_wgmma.MODEL.universe()
    assert "dtype=f16|n=80" in u.classes and u.refused["dtype=f16|n=40"] == "shape_n"
    assert "dtype=s8|n=40" not in u.classes and "dtype=s8|n=40" not in u.refused  # not an s8 shape at all
    assert "pair|dtype=tf32|major_b=MN" not in u.classes and "pair|dtype=bf16|major_b=MN" in u.classes
    assert "wrong|rule=base_offset_use" in u.classes and "wrong|rule=field_range" in u.refused
    monkeypatch.setattr(wgmma_rules, "RULES", wgmma_rules.RULES + ("lbo_parity",))
    monkeypatch.setattr(wp, "PROBE_NS", tuple(n for n in wp.PROBE_NS if n != 80))
    changed = cov_wgmma.MODEL.universe()
    assert "wrong|rule=lbo_parity" in changed.classes and changed.refused["dtype=f16|n=80"] == "shape_n"


def test_wgmma_fuzz_reaches_every_class():
    rng = np.random.default_rng(SEED)  # the GPU test's stream
    cov = Coverage("wgmma_fuzz", cov_wgmma.MODEL.universe())
    total = g = 0
    while total < WGMMA_CASES:
        group = wc.fuzz_group(rng, g, cases=48, wrong_fraction=0.22)
        g += 1
        cov.add(cov_wgmma.MODEL.count_group(group))
        total += len(group.cases)
    assert not cov.unhit(MIN_HITS) and not cov.outside() and not cov.refused_hits(), _unhit(cov)


def test_wgmma_handmade_case():
    rng = np.random.default_rng(1)  # draws A's box 128 B wide (not narrowed)
    group = wc.random_group(rng, "f16", n=128, cases=1, wrong_fraction=0.0,
                            config={"rs": False, "major_a": "K", "major_b": "MN", "swizzle_a": 3, "swizzle_b": 0,
                                    "steps": 8})
    case = group.cases[0]
    case.label = "base_offset:A"
    case.desc_a = [d.replace(base_offset=2) for d in case.desc_a]
    got = cov_wgmma.MODEL.classes((group, case))
    for cls in ("dtype=f16|n=128", "form=ss", "steps=8", "operand=A|layout=major=K|swizzle=B128|inner=128",
                "operand=B|layout=major=MN|swizzle=NONE|inner=16", "operand=A|major=K|lbo=unread",
                "operand=B|major=MN|sbo=ge1K", "pair|major_b=MN|swizzle_a=B128", "wrong|kind=base_offset|operand=A",
                "wrong|rule=base_offset_use"):
        assert got[cls] == 1, (cls, sorted(got))


# ---------------------------------------------------------------------------------------------- decode

def test_decode_universe_follows_the_rule_tables(monkeypatch):
    u = cov_decode.MODEL.universe()
    assert "rank=3|interleave=B16" in u.classes and "rank=2|interleave=B16" not in u.classes
    assert u.refused["rank=2|dtype=16u4_align8b"] == "needs_subbyte_maps"
    assert u.refused["rank=1|swizzle=B128_ATOM_64B"] == "needs_swizzle_atoms"
    assert "rank=2|axis=1|box=1" not in u.classes and "rank=2|axis=0|box=1" in u.classes  # 16-B inner rows
    assert "pair|dtype=uint8|oob_fill=NAN" not in u.classes and "pair|dtype=float16|oob_fill=NAN" in u.classes
    # without the interleave rules, interleaved rank-2 maps become classes to reach
    monkeypatch.setattr(tma_rules, "RULES", tuple(r for r in tma_rules.RULES if "interleave_rank" not in r.rules))
    assert "rank=2|interleave=B16" in cov_decode.MODEL.universe().classes


@pytest.mark.slow
def test_decode_specs_reach_every_class():
    rng = np.random.default_rng(14)  # the GPU test's stream (its SEED)
    specs = [random_spec(rng) for _ in range(DECODE_SPECS)]
    assert all(s.is_valid() for s in specs[::97])
    cov = Coverage("decode_roundtrip", cov_decode.MODEL.universe())
    cov.add(cov_decode.MODEL.count(specs))
    assert not cov.unhit(MIN_HITS) and not cov.outside() and not cov.refused_hits(), _unhit(cov)


def test_decode_handmade_spec():
    spec = TensorMapSpec.create("float16", (1, 1 << 32, 64), (1, 256, 8), element_strides=(1, 3, 1),
                                swizzle="32B", oob_fill="nan", strides_bytes=(1 << 39, 128, 2))
    got = cov_decode.MODEL.classes(spec)
    for cls in ("rank=3|dtype=float16", "rank=3|swizzle=B32", "rank=3|oob_fill=NAN", "rank=3|axis=0|dim=1",
                "rank=3|axis=1|dim=max", "rank=3|axis=2|dim=small", "rank=3|axis=0|stride=top",
                "rank=3|axis=1|stride=small", "rank=3|axis=1|box=max", "rank=3|axis=0|box=1",
                "rank=3|axis=1|element_stride=not_divides", "rank=3|axis=2|element_stride=1",
                "pair|dtype=float16|swizzle=B32", "pair|l2_promotion=NONE|oob_fill=NAN"):
        assert got[cls] == 1, (cls, sorted(got))
    assert sum(got.values()) == len(got)
    assert set(got) <= set(cov_decode.MODEL.universe().classes)
