"""Measured coverage (drvtma.fuzz.coverage): each standard campaign's cases, built on the CPU exactly as gpu-check
runs them, hit every class of the target's universe at least MIN_HITS times; universes follow the rule tables; the
classifiers say what a handmade case is."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from drvtma.errors import Rule, TensorMapError
from drvtma.fuzz.campaign import build_case
from drvtma.fuzz.coverage import MIN_HITS, Coverage, Universe, boundaries, measure
from drvtma.fuzz.coverage import encode as encode_model
from drvtma.fuzz.coverage import tiled as tiled_model
from drvtma.fuzz.coverage.im2col import load_classes
from drvtma.fuzz.standard import KERNEL_CAMPAIGNS, STANDARD_CAMPAIGNS
from drvtma.fuzz.targets import BUILTIN_TARGETS, get_target
from drvtma.tma.im2col.spec import Im2colSpec
from drvtma.tma.tiled import oracle
from drvtma.tma.tiled.rules import RULES, validate_all
from drvtma.tma.tiled.spec import TensorMapSpec


def _cases(standard):
    target = get_target(standard.target)
    options = target.configure()
    return target, options, [build_case(target, options, standard.seed, i)[0] for i in range(standard.examples)]


@pytest.mark.slow
@pytest.mark.parametrize("standard", STANDARD_CAMPAIGNS, ids=lambda s: s.target)
def test_the_standard_campaign_hits_every_class_enough(standard):
    target, options, cases = _cases(standard)
    cov = measure(target, options, cases)
    weak = {c: cov.counts[c] for c in cov.unhit(MIN_HITS)}
    assert not weak, f"{standard.target}: {len(weak)} classes hit fewer than {MIN_HITS} times: {weak}"
    assert not cov.refused_hits(), f"{standard.target} drew classes its oracle refuses: {cov.refused_hits()}"
    assert not cov.outside(), f"{standard.target}: classes its model does not know: {cov.outside()[:10]}"


@pytest.mark.slow  # thousands of cases built per campaign
@pytest.mark.parametrize("campaign", [c for c in KERNEL_CAMPAIGNS if c.full],
                         ids=lambda c: f"{c.target}-{c.strategy}")
def test_the_kernel_campaigns_hit_every_class_of_their_strategy_enough(campaign):
    """The GPU tests' campaigns of a kernel of your own (tests/support/byo_gpu_kernels.py): the cases they draw reach
    every class the strategy can express 20 times, and none it cannot (Triton's element strides, cuda.core's long
    boxes: refused by the strategy's rule)."""
    target = get_target(campaign.target)
    options = campaign.options(target, f"{__file__}:run")
    cases = [build_case(target, options, campaign.seed, i)[0] for i in range(campaign.examples)]
    cov = measure(target, options, cases)
    weak = {c: cov.counts[c] for c in cov.unhit(MIN_HITS)}
    assert not weak, f"{campaign}: {len(weak)} classes hit fewer than {MIN_HITS} times: {weak}"
    assert not cov.refused_hits() and not cov.outside(), (cov.refused_hits(), cov.outside()[:10])


@pytest.mark.parametrize("strategy, rule, label", [
    ("triton", "triton_element_strides", "rank=2|axis=0|element_stride=divides"),
    ("cuda.core", "cuda_core_box", "rank=3|axis=1|boundary=spans"),
    ("cuda.core", "cuda_core_box", "rank=3|axis=1|box=larger")])
def test_a_class_the_strategy_cannot_express_is_refused_by_its_rule(strategy, rule, label):
    for name in ("kernel-loads", "kernel-stores"):
        target = get_target(name)
        universe = target.coverage.universe(target.configure(kernel=f"{__file__}:run", strategy=strategy))
        want = rule
        if name == "kernel-stores" and label.endswith("spans"):
            want = "store_negative_coordinate"  # a store spans an axis only from a negative coordinate: refused first
        assert label not in universe.classes and universe.refused.get(label) == want, (name, label)


def test_every_builtin_target_measures_coverage():
    assert {c.target for c in STANDARD_CAMPAIGNS} | {"kernel-loads", "kernel-stores", "kernel-reductions"} \
        == set(BUILTIN_TARGETS)
    missing = [name for name in BUILTIN_TARGETS if get_target(name).coverage is None]
    assert not missing, f"targets without a coverage model: {missing}"


def test_a_new_rule_is_a_class_no_generator_reaches():
    """A rule added to the table is a class of the validator's universe at once; the generator, which knows
    nothing of it, leaves it unhit (so the standard-campaign test above would fail until a generator breaks it)."""
    made_up = Rule(("made_up_rule",), lambda spec, limit=None: spec.shape != (12345,),
                   lambda spec, limit=None: iter([TensorMapError("made_up_rule", "shape", spec.shape, "fix")]), "form")
    model = encode_model.ValidatorCoverage(RULES + (made_up,), validate_all, tiled_model.RANKS,
                                           lambda: tiled_model.tiled_universe(False))
    assert "rule=made_up_rule" in model.universe({}).classes
    assert "rule=made_up_rule" not in encode_model.ENCODE_COVERAGE.universe({}).classes
    cov = Coverage("encode", model.universe({}))
    for i in range(200):
        cov.add(model.classes(build_case(get_target("encode"), {"spec": None}, 1, i)[0]))
    assert "rule=made_up_rule" in cov.unhit() and "rule=box_range" not in cov.unhit()


def test_a_rule_that_refuses_a_value_takes_its_class_out(monkeypatch):
    before = tiled_model.tiled_universe(True)
    assert "rank=2|fill=NAN" in before.classes
    real = tiled_model.validate_all

    def no_nan(spec):
        return real(spec) + ([TensorMapError("no_nan_fill", "oob_fill", "NAN", "use ZERO")] if spec.oob_fill else [])

    monkeypatch.setattr(tiled_model, "validate_all", no_nan)
    tiled_model.tiled_universe.cache_clear()
    try:
        after = tiled_model.tiled_universe(True)
        assert "rank=2|fill=NAN" not in after.classes and "no_nan_fill" in after.refused["rank=2|fill=NAN"]
        assert not any("fill=NAN" in c for c in after.classes)
    finally:
        tiled_model.tiled_universe.cache_clear()


def test_refused_classes_name_the_rule_that_refuses_them():
    loads = tiled_model.tiled_universe(True)
    assert loads.refused["rank=3|dtype=16u4_align8b"].startswith("needs_subbyte_maps")
    assert loads.refused["rank=3|swizzle=B128_ATOM_64B"] == "needs_swizzle_atoms"
    assert loads.refused["rank=3|interleave=B16"] == "oracle_interleave"  # the driver takes it, the oracle does not
    assert "rank=1|interleave=B16" in loads.refused
    # a pair whose instance needs three other fields set (rank >= 3, a float type, swizzle 32B)
    assert "pair|fill=NAN|interleave=B32" in tiled_model.tiled_universe(False).classes
    # the oracle really refuses what the universe says it refuses
    spec = tiled_model.canonical_spec({"rank": 3, "interleave": "B16"})
    with pytest.raises(TensorMapError, match="oracle_interleave"):
        oracle.load_images(spec, np.zeros(1 << 14, np.uint8), [(0, 0, 0)])


def test_boundaries_of_a_box_against_its_axis():
    got = list(boundaries([-5, -2, 0, 3, 10, -1], [-1, 2, 4, 12, 12, 20], 10))
    assert got == ["before", "straddle_start", "inside", "straddle_end", "past", "spans"]


def test_classes_of_a_handmade_tiled_load():
    spec = TensorMapSpec.create("float32", (6, 40), (4, 8), element_strides=(2, 1), swizzle="32B")
    counts = tiled_model.TiledLoadsCoverage().classes(
        type("Case", (), {"spec": spec, "coords": np.array([(-4, 0), (0, 36), (5, -4)])})())
    assert counts["rank=2|dtype=float32"] == 1 and counts["pair|dtype=float32|swizzle=B32"] == 1
    assert counts["rank=2|axis=0|element_stride=divides"] == 1 and counts["rank=2|axis=1|box=smaller"] == 1
    # axis 0 loads rows c, c + 2 (two of them): -4 -> [-4, -2] before; 0 -> [0, 2] inside; 5 -> [5, 7] straddles
    assert [counts[f"rank=2|axis=0|boundary={b}"] for b in ("before", "inside", "straddle_end")] == [1, 1, 1]
    assert [counts[f"rank=2|axis=1|boundary={b}"] for b in ("inside", "straddle_end", "straddle_start")] == [1, 1, 1]
    assert counts["rank=2|axis=0|coordinate=negative"] == 1 and counts["rank=2|axis=1|coordinate=zero"] == 1


def test_classes_of_handmade_im2col_walks():
    """(N=3, H=2, W=3, C=4) uint32, corners 0: a load of 3 pixels stays in W, 5 go into H, 7 into the next image;
    N's element stride 2 from image 1 lands past the last image."""
    def walk(pixels, n, es_n=1):
        spec = Im2colSpec.create("uint32", (3, 2, 3, 4), (0, 0), (0, 0), 4, pixels, element_strides=(es_n, 1, 1, 1))
        return load_classes(spec, [(n, 0, 0, 0)], [(0, 0)])

    assert walk(3, 0)["rank=4|load|walk=within_w"] == 1
    assert walk(5, 0)["rank=4|load|walk=into_h"] == 1
    assert walk(7, 0)["rank=4|load|walk=next_image"] == 1 and walk(7, 0)["rank=4|load|past_last_image=no"] == 1
    assert walk(7, 1, es_n=2)["rank=4|load|past_last_image=yes"] == 1
    assert walk(7, 1, es_n=1)["rank=4|load|past_last_image=no"] == 1


def test_the_coverage_line_and_summary_name_what_is_unhit():
    cov = Coverage("t", Universe(("a", "b", "c"), {"z": "some_rule"}))
    cov.add(["a"] * 25 + ["b"] + ["q"])
    fig = cov.figure()
    assert fig["test"] == "coverage" and fig["classes"] == 3 and fig["hit"] == 2 and fig["unhit"] == ["c"]
    assert fig["below_20"] == 2 and fig["min_hits"] == 0 and fig["outside"] == ["q"]
    assert "unhit: c" in cov.summary() and "2 of 3" in cov.summary()
    cov.add(Counter({"z": 1}))
    assert cov.refused_hits() == ["z"]


def test_measuring_a_target_without_a_model_is_refused_by_name():
    from drvtma.errors import ArgumentError
    from drvtma.fuzz.targets import Target

    bare = Target()
    bare.name = "bare"
    with pytest.raises(ArgumentError, match=r"\[coverage_model\] target = 'bare'"):
        measure(bare, {}, [])


def test_hypothesis_events_name_each_class_once_and_steer_to_boundaries():
    """Inside a hypothesis test the loads model's classes become `event`s (their share shows in
    --hypothesis-show-statistics) and the distinct boundary kinds a `target`; outside one hypothesis refuses."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.errors import InvalidArgument

    from drvtma.fuzz.coverage import hypothesis_events

    spec = TensorMapSpec.create("bfloat16", (40, 64), (16, 32))
    seen = []

    @settings(max_examples=15, database=None, deadline=None)
    @given(st.lists(st.tuples(st.integers(-40, 60), st.integers(-60, 90)), min_size=1, max_size=4))
    def check(coords):
        counts = tiled_model.load_classes(spec, coords)
        got = hypothesis_events(counts.elements())
        assert got == list(dict.fromkeys(counts.elements())) and len(got) == len(counts)
        seen.extend(got)

    check()
    assert any("boundary=" in c for c in seen) and any(c.startswith("pair|") for c in seen)
    with pytest.raises(InvalidArgument):
        hypothesis_events(["rank=2|dtype=BFLOAT16"])


def test_a_signed_view_counts_as_the_map_type_the_driver_sees():
    """int8 rides a UINT8 map: its loads fall in the uint8 classes, none outside the model (a user's --spec too)."""
    spec = TensorMapSpec.create("int8", (40, 64), (16, 32))
    target = get_target("loads")
    for options in ({"spec": None}, {"spec": spec.to_dict()}):
        universe = target.coverage.universe(options)
        cov = Coverage("loads", universe)
        cov.add(tiled_model.load_classes(spec, [(0, 0), (-3, 40)]))
        assert not cov.outside() and cov.counts["rank=2|dtype=uint8"] == 1, cov.outside()
