"""The GEMM's rules as tables (drvtma.gemm.rules): every rule is broken alone by some configuration and names its
argument, value and fix; the tables' names are exactly what errors() / check_problem / ConvShape.check can yield;
`explain` lists every rule; `drvtma check gemm` / `conv` exit 0, 1 and 2 as `drvtma check` does."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drvtma.cli.main import main
from drvtma.errors import GemmError, broken_rules, rule_outcomes
from drvtma.gemm import explain
from drvtma.gemm.config import GemmConfig
from drvtma.gemm.conv import ConvShape
from drvtma.gemm.rules import CONV_RULES, GATES, GEMM_RULES, PROBLEM_RULES, rule_names
from drvtma.tma.tiled.rules import RULES
from drvtma.tma.tiled.spec import TensorMapSpec

# One configuration per rule that breaks it and nothing else.
BREAKS_ALONE = {
    "dtype": {"dtype": "float32"},
    "out_dtype": {"out_dtype": "int8"},
    "mma_kind": {"mma": "dpas"},
    "streamk_schedule": {"streamk": True, "persistent": False},
    "cluster_size": {"cluster_m": 2, "cluster_n": 2},
    "swizzle": {"swizzle": "16B"},
    "l2_promotion": {"l2_promotion": "512B"},
    "l2_evict": {"evict_b": "lru"},
    "consumers": {"consumers": 3},
    "pingpong_schedule": {"pingpong": True, "streamk": True},
    "swap_ab_output": {"swap_ab": True, "out_dtype": "float32"},
    "tile_m": {"bm": 96},
    "tile_n": {"bn": 200},
    "tile_k": {"bk": 40},
    "stmatrix_epilogue": {"stmatrix": True, "out_dtype": "float32"},
    "mma_sync_tile": {"mma": "mma_sync", "bm": 128, "bn": 128, "consumers": 1},
    "mma_sync_dtype": {"mma": "mma_sync", "dtype": "float8_e4m3fn"},
    "accumulator_registers": {"bm": 128, "consumers": 1},
    "stages": {"stages": 0},
    "epilogue_buffers": {"epilogue_buffers": 1},
    "smem_capacity": {"stages": 5},
    "setmaxnreg_range": {"producer_regs": 20},
    "register_budget": {"consumer_regs": 256},
    "group_m": {"group_m": 0},
    "inflight": {"inflight": 2},
}
PROBLEM_BREAKS = {"shape_range": (0, 128, 64), "k_alignment": (128, 128, 100), "n_alignment": (128, 100, 64)}
CONV = dict(n=2, h=8, w=8, c=64, k=64, r=3, s=3, pad=1)
CONV_CONFIG = GemmConfig(bm=128, bn=128, pingpong=True, inflight=1)
CONV_BREAKS = {
    "conv_dtype": ({}, {"dtype": "float8_e4m3fn"}),
    "conv_config": ({}, {"cluster_m": 2}),
    "conv_channels": ({"c": 48}, {}),
    "conv_shape": ({"r": 9, "h": 4}, {}),
    "conv_offsets": ({"dilation": 128, "pad": 128}, {}),  # offsets to 256, corners still in -128..127
    "conv_stride": ({"stride": 9}, {}),
    "conv_corners": ({"pad": 200}, {}),
}


def _named(err: GemmError) -> None:
    """The message names the rule, the argument and its value, and the fix."""
    assert err.parameter and err.fix
    assert str(err).startswith(f"[{err.rule}] {err.parameter} = {err.value!r}")
    assert str(err).endswith(f"; fix: {err.fix}")


@pytest.mark.parametrize("rule", BREAKS_ALONE)
def test_each_configuration_rule_breaks_alone_and_names_its_fix(rule):
    errors = GemmConfig(**BREAKS_ALONE[rule]).errors()
    assert {e.rule for e in errors} == {rule}, [str(e) for e in errors]
    for e in errors:
        _named(e)
        assert e.parameter.split(", ")[0] in GemmConfig.__dataclass_fields__ or e.parameter == "bk"
    with pytest.raises(GemmError) as exc:
        GemmConfig(**BREAKS_ALONE[rule]).check()
    assert exc.value.rule == rule


@pytest.mark.parametrize("rule", PROBLEM_BREAKS)
def test_each_problem_rule_breaks_alone(rule):
    outcomes = rule_outcomes(PROBLEM_RULES, GemmConfig(), *PROBLEM_BREAKS[rule])
    assert [e.rule for o in outcomes for e in o.errors] == [rule]
    with pytest.raises(GemmError) as exc:
        GemmConfig().check_problem(*PROBLEM_BREAKS[rule])
    assert exc.value.rule == rule
    _named(exc.value)


@pytest.mark.parametrize("rule", CONV_BREAKS)
def test_each_convolution_rule_breaks_alone(rule):
    shape_change, config_change = CONV_BREAKS[rule]
    shape, config = ConvShape(**(CONV | shape_change)), CONV_CONFIG.with_(**config_change)
    errors = broken_rules(CONV_RULES, shape, config)
    assert {e.rule for e in errors} == {rule}, [str(e) for e in errors]
    for e in errors:
        _named(e)
    with pytest.raises(GemmError) as exc:
        shape.check(config)
    assert exc.value.rule == rule


def test_the_tables_names_are_the_rules_exercised():
    """One entry per rule name; each table's names are exactly the rules its breaking cases yield."""
    for table, cases in ((GEMM_RULES, BREAKS_ALONE), (PROBLEM_RULES, PROBLEM_BREAKS), (CONV_RULES, CONV_BREAKS)):
        names = rule_names(table)
        assert len(names) == len(set(names)) == len(table)
        assert list(names) == list(cases)  # the order of reporting
    assert GATES <= set(rule_names(GEMM_RULES))


FIELD_VALUES = {
    "dtype": ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float32"], "out_dtype": ["bfloat16", "float32",
                                                                                              "int8"],
    "bm": [0, 64, 96, 128, 256, 320], "bn": [16, 64, 80, 128, 200, 256], "bk": [None, 0, 32, 40, 128, 256],
    "stages": [0, 1, 3, 5, 17], "consumers": [1, 2, 3], "swizzle": ["none", "32B", "64B", "128B", "16B"],
    "setmaxnreg": [True, False], "producer_regs": [20, 40, 257], "consumer_regs": [160, 232, 256],
    "persistent": [True, False], "group_m": [0, 8], "inflight": [0, 1, 2], "cluster_m": [1, 2, 4], "cluster_n": [1, 2, 3],
    "mma": ["wgmma", "mma_sync", "dpas"], "streamk": [True, False], "pingpong": [True, False], "swap_ab": [True, False],
    "l2_promotion": ["none", "256B", "512B"], "epilogue_buffers": [1, 2, 4, 9], "evict_a": ["normal", "last", "lru"],
    "evict_b": ["normal", "first", "none"],
}
CONFIGS = st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in FIELD_VALUES.items()})


@settings(max_examples=150, deadline=None)
@given(change=CONFIGS)
def test_errors_yield_only_table_rules_and_the_walk_explains_them(change):
    """errors() yields only the table's names, in table order; a broken gate ends the list; rule_outcomes walks the
    table as broken_rules does (the explanation and the check cannot drift)."""
    cfg = GemmConfig(**change)
    errors = cfg.errors()
    order = rule_names(GEMM_RULES)
    assert [order.index(e.rule) for e in errors] == sorted(order.index(e.rule) for e in errors)
    gates = [e for e in errors if e.rule in GATES]
    assert not gates or errors[-1].rule == gates[0].rule
    outcomes = rule_outcomes(GEMM_RULES, cfg)
    assert [str(e) for o in outcomes for e in o.errors] == [str(e) for e in errors]  # new errors, the same ones
    assert all(o.status == "skipped" for o in outcomes[next((i for i, o in enumerate(outcomes)
                                                             if o.errors and GATES & set(o.rule.rules)),
                                                            len(outcomes)) + 1:])


def test_a_broken_rule_that_is_no_gate_lets_the_rest_be_checked():
    assert [e.rule for e in GemmConfig(mma="dpas", stages=0, inflight=2).errors()] == ["mma_kind", "stages",
                                                                                       "inflight"]
    assert [e.rule for e in GemmConfig(dtype="float32", stages=0).errors()] == ["dtype"]  # the dtype gate stops


def test_rule_outcomes_walk_the_tensor_map_table_as_broken_rules_does():
    """The same walk on tma.tiled.rules.RULES, whose first rule stops the rest (rank) and whose later ones skip after
    others (after=)."""
    specs = [TensorMapSpec.create("float32", (4, 250), (2, 32), strides_bytes=(1000, 4)),
             TensorMapSpec.create("float32", (64, 64), (300, 64), swizzle=1),
             TensorMapSpec.create("uint8", (64,), (16,), oob_fill=1),
             TensorMapSpec.create("bfloat16", (1024, 1024), (64, 64), swizzle=3),
             TensorMapSpec.create("uint8", (2,) * 6, (2,) * 6)]
    statuses = set()
    for spec in specs:
        outcomes = rule_outcomes(RULES, spec, 232448)
        assert [str(e) for o in outcomes for e in o.errors] == [str(e) for e in broken_rules(RULES, spec, 232448)]
        assert len(outcomes) == len(RULES)
        statuses |= {o.status for o in outcomes}
    assert statuses == {"ok", "broken", "skipped"}
    assert {o.status for o in rule_outcomes(RULES, specs[-1], 232448)[1:]} == {"skipped"}  # rank stops the rest


def test_explain_lists_every_rule():
    good = explain(GemmConfig(), (4096, 4096, 4096))
    assert good.ok and good.broken == []
    text = str(good)
    assert all(f"ok       {name}" in text for name in rule_names(GEMM_RULES + PROBLEM_RULES))
    assert "512 tiles of 128 x 256" in text and text.endswith(f"valid: every rule holds ({len(good.outcomes)} rules)")
    bad = explain(GemmConfig(bm=96), (4096, 4096, 100))
    assert bad.broken_names == ["tile_m", "k_alignment"] and not bad.ok
    text = str(bad)
    assert "BROKEN   [tile_m] bm = 96" in text and "fix: use a multiple of 128" in text
    assert "skipped  tile_n, tile_k," in text and "(after tile_m broke)" in text
    unknown = explain(GemmConfig(dtype="float32"), (64, 64, 64))
    assert unknown.broken_names == ["dtype"]
    assert "GemmConfig(dtype='float32')" in str(unknown) and "skipped  k_alignment, n_alignment" in str(unknown)
    conv = ConvShape(**CONV)
    report = explain(conv.default_config(), conv)
    assert report.ok and {t for t, _ in report.outcomes} == {"configuration", "convolution", "problem"}
    assert explain(CONV_CONFIG.with_(dtype="e4m3"), ConvShape(**(CONV | {"c": 48}))).broken_names == ["conv_dtype"]
    with pytest.raises(GemmError):
        explain("config")  # type: ignore[arg-type]
    assert explain(GemmConfig(), (0, 8, 2**31)).broken_names == ["shape_range"]  # then the alignments skip
    assert [str(e).split(":")[0] for e in explain(GemmConfig(), (0, 8, 2**31)).broken] == [
        "[shape_range] m = 0", "[shape_range] k = 2147483648"]
    with pytest.raises(GemmError) as exc:
        explain(GemmConfig(), (1.5, 1, 1))
    assert exc.value.rule == "shape_range"
    empty = explain(CONV_CONFIG, ConvShape(**(CONV | {"r": 9, "h": 4})))  # no output: no implicit GEMM to judge
    assert empty.broken_names == ["conv_shape"] and "skipped  shape_range, k_alignment, n_alignment" in str(empty)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv, code, names", [
    (("gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "bf16"), 0, ("valid: every rule holds",)),
    (("gemm", "--dtype", "e4m3", "--stages", "5"), 1, ("smem_capacity",)),
    (("gemm", "--swizzle", "16B"), 1, ("swizzle",)),
    (("gemm", "--m", "64", "--n", "4096", "--k", "4096", "--for-problem"), 0, ("swapped A and B",)),
    (("gemm", "--dtype", "f32", "--m", "8", "--n", "8", "--k", "8", "--for-problem"), 1, ("dtype",)),
    (("conv", "--n", "2", "--h", "8", "--w", "8", "--c", "64", "--k", "64", "--r", "3", "--s", "3", "--pad", "1"), 0,
     ("convolution rules:",)),
    (("conv", "--n", "2", "--h", "8", "--w", "8", "--c", "48", "--k", "64", "--r", "3", "--s", "3"), 1,
     ("conv_channels",)),
    (("conv", "--n", "2", "--h", "8", "--w", "8", "--c", "64", "--k", "64", "--r", "3", "--s", "3", "--dtype", "f32"),
     1, ("dtype", "conv_dtype")),
    (("gemm", "--m", "5"), 2, ("--n", "--k")),
    (("gemm", "--for-problem"), 2, ("--for-problem",)),
    (("gemm", "--bm", "x"), 2, ("--bm", "'x'")),
    (("gemm", "--m", "0", "--n", "1", "--k", "1"), 2, ("--m", "'0'")),
    (("gemm", "--bogus"), 2, ("--bogus",)),
    (("conv", "--n", "2"), 2, ("--h", "required")),
    (("conv", "--n", "2", "--h", "8", "--w", "8", "--c", "64", "--k", "64", "--r", "3", "--s", "3", "--pad=-1"), 2,
     ("--pad", "-1")),
])
def test_check_gemm_and_conv_exit_statuses(argv, code, names):
    """0: every rule holds; 1: rules broken, listed on stdout, their names on one stderr line; 2: usage, one line."""
    got, out, err = _cli("check", *argv)
    assert got == code, (out, err)
    assert "Traceback" not in out + err
    if code == 0:
        assert not err and all(n in out for n in names)
    else:
        assert len(err.strip().splitlines()) == 1, err
        assert all(n in err for n in names), err
    if code == 1:
        assert "BROKEN" in out and "fix:" in out


def test_for_problem_reads_the_l2_given():
    """A and B of 56 MiB fit an H200's 60-MiB L2, not an H100's 50: for_problem's group_m differs, as in the bench,
    which reads the device's own L2."""
    problem = ("check", "gemm", "--m", "4096", "--n", "4096", "--k", "3584", "--for-problem")
    h200, h100 = _cli(*problem)[1], _cli(*problem, "--l2-mib", "50")[1]
    assert "group_m 8," in h200.splitlines()[0] and "group_m 16," in h100.splitlines()[0]
    assert _cli(*problem, "--l2-mib", "0")[0] == 2
