"""wgmma on the H200: every case's accumulator registers equal the oracle's, bit for bit, right and wrong
descriptors alike; gather probes show which shared byte each element of B comes from.

Sizes: DRVTMA_FUZZ_WGMMA cases (default 600; gpu-check runs 5000), DRVTMA_FUZZ_SEED (default 1).
DRVTMA_WGMMA_DUMP names a folder for the raw gather maps (npz). Each test prints one JSON line of figures.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import numpy as np
import pytest

from drvtma import settings
from drvtma.errors import WgmmaError
from drvtma.fuzz.coverage import Coverage
from drvtma.fuzz.coverage.wgmma import MODEL as WGMMA_COVERAGE
from drvtma.runtime.figures import record_figure
from drvtma.runtime.figures import record_test as record
from drvtma.wgmma import cases as wc
from drvtma.wgmma import oracle
from drvtma.wgmma.descriptor import SPAN_BYTES, SmemDescriptor, WgmmaSwizzle
from drvtma.wgmma.dtypes import BF16, E4M3, E5M2, F16, TF32
from drvtma.wgmma.probe import ProbeGroup, WgmmaProbe, check_case, predict, predict_case

from support.edge_timeouts import WGMMA_SCRIPT, given_up_waits, run_edge_child

pytestmark = [pytest.mark.gpu, pytest.mark.needs("wgmma")]

FUZZ_CASES = settings.FUZZ_WGMMA.get()
COVERAGE_BUDGET = 5000  # gpu-check's: from here on every coverage class must be hit
SEED = settings.FUZZ_SEED.get()
CASES_PER_LAUNCH = 48


@pytest.fixture(scope="module")
def probe(ctx):
    p = WgmmaProbe()
    yield p
    p.close()


def _describe_mismatch(group: ProbeGroup, i: int, got, want) -> str:
    c = group.cases[i]
    g = oracle.fragments_to_matrix(got, group.n)
    w = oracle.fragments_to_matrix(want, group.n)
    bad = np.argwhere(g != w)
    view = np.int32 if group.dtype.is_int else np.float32
    lines = [f"{group.dtype.name} n={group.n} steps={c.steps} rs={c.rs} major_a={c.major_a} major_b={c.major_b} "
             f"scale_d={c.scale_d} label={c.label}: {len(bad)} of {g.size} values differ",
             f"  spec_b {group.spec_b.box if group.spec_b else None} swizzle "
             f"{group.spec_b.swizzle.name if group.spec_b else None}; b boxes {[(b.coords, b.dst) for b in c.b_boxes]}",
             "  desc_b[0] " + c.desc_b[0].describe()]
    if not c.rs:
        lines.append(f"  spec_a {group.spec_a.box} swizzle {group.spec_a.swizzle.name}; a boxes "
                     f"{[(b.coords, b.dst) for b in c.a_boxes]}")
        lines.append("  desc_a[0] " + c.desc_a[0].describe())
    for r, col in bad[:4]:
        lines.append(f"  D[{r},{col}]: got {g[r, col].view(view)!r}, expected {w[r, col].view(view)!r}")
    other = [m for m in oracle.BASE_OFFSET_MODELS
             if np.array_equal(predict_case(group, c, m), got)]
    lines.append(f"  base-offset models that match: {other}")
    return "\n".join(lines)


def _layout_tags(group: ProbeGroup, c) -> set[str]:
    tags = set()
    for op, boxes in (("A", c.a_boxes), ("B", c.b_boxes)):
        plan = group.plans.get(op)
        if plan is None or not boxes:
            continue
        span = plan.spec.swizzle_span_bytes
        if span and plan.spec.box[-1] * plan.spec.itemsize < span:
            tags.add("narrow_box")
        if span and boxes[0].dst % (8 * span):
            tags.add("tile_off_pattern_boundary")
        tags.add(f"swizzle_{plan.spec.swizzle.name}")
        tags.add(f"{plan.major}-major")
    if c.steps > 1:
        tags.add("multi_step")
    return tags


@pytest.mark.timing  # records the campaign's seconds
def test_wgmma_fuzz(probe):
    """>= FUZZ_CASES cases over every type, N from the probe set, SS and RS, K- and MN-major, every swizzle,
    narrow boxes, 1-8 k-steps, scale-d both ways, ~20 % deliberately wrong descriptors: all exact."""
    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    total, mismatches, wrong = 0, 0, 0
    by_label, bad_labels, dtypes, ns, forms = Counter(), Counter(), Counter(), Counter(), Counter()
    layouts = Counter()  # valid cases with a narrow box, a tile off its pattern boundary, MN-major, several steps
    reports, dumped = [], {}
    refused = 0
    g_index = 0
    cov = Coverage("wgmma_fuzz", WGMMA_COVERAGE.universe())
    while total < FUZZ_CASES:
        group = wc.fuzz_group(rng, g_index, cases=CASES_PER_LAUNCH, wrong_fraction=0.22)
        t, n = group.dtype, group.n
        g_index += 1
        cov.add(WGMMA_COVERAGE.count_group(group))
        got, _ = probe.run(group, unchecked=True)
        want = predict(group)
        for i, c in enumerate(group.cases):
            kind = c.label.split(":")[0]
            by_label[kind] += 1
            wrong += c.label != "valid"
            if c.label != "valid":
                try:
                    check_case(group, c, i)
                except WgmmaError:
                    refused += 1
            dtypes[t.name] += 1
            ns[n] += 1
            forms["rs" if c.rs else "ss"] += 1
            if c.label == "valid":
                layouts.update(_layout_tags(group, c))
            if not np.array_equal(got[i], want[i]):
                mismatches += 1
                bad_labels[kind] += 1
                if len(reports) < 6:
                    reports.append(_describe_mismatch(group, i, got[i], want[i]))
                if len(dumped) < 120:
                    dumped[f"g{g_index - 1}_c{i}"] = got[i]
                    dumped[f"g{g_index - 1}_c{i}_bg"] = np.array([int(group.background.sum())])
        total += len(group.cases)
    dump = settings.WGMMA_DUMP.get()
    if dump and dumped:
        os.makedirs(dump, exist_ok=True)
        np.savez_compressed(os.path.join(dump, "fuzz_mismatches.npz"), **dumped)
    record("wgmma_fuzz", cases=total, wrong_descriptor_cases=wrong, mismatches=mismatches,
           wrong_refused_when_checked=refused, numpy=np.__version__,
           dtypes=sorted(dtypes), ns=sorted(ns), forms=dict(forms), kinds=dict(by_label),
           mismatched_kinds=dict(bad_labels), valid_layouts=dict(layouts), seconds=round(time.perf_counter() - t0, 2))
    record_figure(cov.figure())
    assert mismatches == 0, "\n\n".join(reports)
    if FUZZ_CASES >= COVERAGE_BUDGET:  # smaller runs record the coverage figure without asserting it
        assert not cov.unhit(), f"the wgmma fuzz never reached these classes:\n{cov.summary()}"


# ---- gather probes: the address of every B element (f16), for the §9 questions

def _gather_table():
    """(name, descriptor, major, n): canonical layouts, base offsets, shifted starts, LBO variants."""
    base = 8192
    out = []
    for swz in (WgmmaSwizzle.NONE, WgmmaSwizzle.B32, WgmmaSwizzle.B64, WgmmaSwizzle.B128):
        span = SPAN_BYTES[WgmmaSwizzle(int(swz))]
        for major, n in (("K", 80), ("MN", 128)):
            if major == "K":
                canon = (SmemDescriptor(base, lbo=64 * 16, sbo=128, swizzle=swz) if swz == WgmmaSwizzle.NONE
                         else SmemDescriptor(base, lbo=16, sbo=8 * span, swizzle=swz))
            else:
                canon = (SmemDescriptor(base, lbo=128, sbo=16 * 16, swizzle=swz) if swz == WgmmaSwizzle.NONE
                         else SmemDescriptor(base, lbo=16 * span, sbo=8 * span, swizzle=swz))
            tag = f"{swz.name}/{major}"
            out.append((f"{tag}/canonical", canon, major, n))
            for bo in range(1, 8):
                out.append((f"{tag}/base_offset={bo}", canon.replace(base_offset=bo), major, n))
            for j in range(1, 8):
                out.append((f"{tag}/start+{128 * j}", canon.advanced(128 * j), major, n))
                out.append((f"{tag}/start+{128 * j},base_offset={j}",
                            canon.advanced(128 * j).replace(base_offset=j), major, n))
            for delta in (16, 32, 48, 64, 96, 256, 512):
                out.append((f"{tag}/start+{delta}", canon.advanced(delta), major, n))
            for lbo in (0, 16, 4096):
                out.append((f"{tag}/lbo={lbo}", canon.replace(lbo=lbo), major, n))
            out.append((f"{tag}/sbo={canon.sbo + 16}", canon.replace(sbo=canon.sbo + 16), major, n))
    return out


def test_gather_address_maps(probe):
    """Which byte each B element comes from, for 300+ descriptors, against the oracle (and each base-offset model)."""
    table = _gather_table()
    results, fails = {}, []
    maps = {}
    for major, n in (("K", 80), ("MN", 128)):
        rows = [r for r in table if r[2] == major]
        lo_group, hi_group = wc.gather_groups([r[1] for r in rows], major, n)
        lo, _ = probe.run(lo_group, unchecked=True)
        hi, _ = probe.run(hi_group, unchecked=True)
        got = wc.decode_gather(lo, hi, n)
        for (name, desc, _, _), addr in zip(rows, got):
            maps[name] = addr
            matches = [m for m in oracle.BASE_OFFSET_MODELS
                       if np.array_equal(oracle.element_addresses(desc, F16, n, major, m), addr)]
            results[name] = matches
            if oracle.BASE_OFFSET_MODEL not in matches:
                want = oracle.element_addresses(desc, F16, n, major)
                bad = np.argwhere(want != addr)
                r, k = bad[0]
                fails.append(f"{name}: {desc.describe()}; {len(bad)} of {addr.size} elements elsewhere, e.g. "
                             f"B[{r},{k}] from byte {addr[r, k]}, oracle says {want[r, k]}; models that match: "
                             f"{matches}")
    dump = settings.WGMMA_DUMP.get()
    if dump:
        os.makedirs(dump, exist_ok=True)
        np.savez_compressed(os.path.join(dump, "gather_maps.npz"), **{k.replace("/", "__"): v for k, v in maps.items()})
        with open(os.path.join(dump, "gather_models.json"), "w") as f:
            json.dump(results, f, indent=1)
    record("wgmma_gather", descriptors=len(results), oracle_mismatches=len(fails),
           model=oracle.BASE_OFFSET_MODEL)
    assert not fails, "\n".join(fails[:30])
    # §9 question 1: the phase comes from absolute address bits 7.. minus the base offset. A start moved by whole
    # 128-B lines with base offset 0 reads on absolute addresses; base offset j shifts the phase back by j lines.
    for swz, lines in (("B64", 4), ("B128", 8)):
        for major in ("K", "MN"):
            for j in range(1, 8):
                assert "ignored" in results[f"{swz}/{major}/start+{128 * j}"]
                if j % lines:
                    for name in (f"base_offset={j}", f"start+{128 * j},base_offset={j}"):
                        assert "sub" in results[f"{swz}/{major}/{name}"]
                        assert "ignored" not in results[f"{swz}/{major}/{name}"]
    assert results["B128/K/base_offset=1"] == results["B128/MN/base_offset=3"] == ["sub"]  # not add, not xor
    # §9 question 2: the base offset counts modulo the pattern's lines (8 / 4 / 2), for 32B and 64B too
    for swz, lines in (("B32", 2), ("B64", 4), ("B128", 8)):
        for bo in range(1, 8):
            same = np.array_equal(maps[f"{swz}/K/base_offset={bo}"], maps[f"{swz}/K/canonical"])
            assert same == (bo % lines == 0), (swz, bo)
    # §9 question 3: LBO is not read by a K-major swizzled operand (0, 16 B and 4096 B read the same bytes)
    for swz in ("B32", "B64", "B128"):
        for lbo in (0, 16, 4096):
            assert np.array_equal(maps[f"{swz}/K/lbo={lbo}"], maps[f"{swz}/K/canonical"])
    # §9 question 6: LBO = 0 with N spanning two MN atoms is no error: the second atom reads the first one's bytes
    for swz in ("B32", "B64", "B128"):
        m = maps[f"{swz}/MN/lbo=0"]
        atom = {"B32": 16, "B64": 32, "B128": 64}[swz]
        assert np.array_equal(m[atom:2 * atom], m[:atom])


# relative to the largest |D|: f32 accumulation for 16-bit and tf32 inputs; fp8 sums are known to keep fewer bits
RANDOM_TOLERANCE = {"bf16": 1e-5, "f16": 1e-5, "tf32": 1e-5, "e4m3": 1e-2, "e5m2": 1e-2}


def test_random_data_accumulates_within_tolerance(probe):
    """Random normal data (not exact; 8 k-steps): the H200 agrees with float64 to the accumulation error."""
    rng = np.random.default_rng(SEED + 7)
    worst = {}
    for t in (BF16, F16, TF32, E4M3, E5M2):
        group = wc.random_group(rng, t, n=128, cases=16, wrong_fraction=0.0,
                                config={"steps": 8, "rs": False, "major_a": "K", "major_b": "K", "swizzle_a": 3,
                                        "swizzle_b": 3})
        for plan in group.plans.values():
            plan.raw[:] = t.to_bits(rng.standard_normal(plan.raw.size // t.itemsize)).view(np.uint8)
        group.a_bytes, group.b_bytes = group.plans["A"].raw, group.plans["B"].raw
        got, _ = probe.run(group)
        want = predict(group).view(np.float32)
        g = got.view(np.float32)
        scale = np.abs(want).max()
        worst[t.name] = float(np.abs(g - want).max() / scale)
    record("wgmma_random_tolerance", max_error_relative_to_max=worst, steps=8)
    for name, err in worst.items():
        assert err < RANDOM_TOLERANCE[name], worst


def test_a_timeout_at_the_edge_takes_the_whole_warpgroup_out(ctx):
    """Warp 1 of each probe CTA (one warpgroup) gives up on the TMA barrier after the boxes landed; warps 0, 2 and
    3 see them landed. The block's vote takes all four out before the aligned wgmma: BarrierTimeout naming barrier
    0 of each case (where = the case index), in a child process, not a hang."""
    result = run_edge_child(WGMMA_SCRIPT)
    waits = given_up_waits(result)
    assert result["count"] == 2 * 32, result  # every thread of warp 1 in both cases, nobody else
    assert all(w["where"] == w["block"] and w["stage"] == 0 and w["thread"] // 32 == 1 for w in waits), result
    assert {w["block"] for w in waits} <= {0, 1} and "wgmma_probe_n128" in result["message"], result
    record("wgmma_edge_timeout", count=result["count"], first=waits[0])
